"""Tests of ``protocols/``: sans-IO cores, the Trio transport, adapters against the mock agent."""

"""A fake model provider for the real agent CLIs (tests only)."""

from .server import FakeProvider, StreamRecord

__all__ = ["FakeProvider", "StreamRecord"]

"""Fuzzing suites: the shared Hypothesis profiles (``ci`` by default, ``long``
with ``--hypothesis-profile=long``)."""

from __future__ import annotations

from .profiles import register

register()

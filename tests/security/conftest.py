"""Fixtures of the attacks in this folder."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A directory outside /tmp, owned like the checkout: what a person's own
    directories look like.  (/tmp is a scratch tree, never trusted, and the
    sandbox's /tmp is its own: a data dir or a ``~/.local/bin`` there is not
    where an agent could reach it, nor where a person keeps them.)"""
    top = REPO / ".outside-tmp"
    path = top / uuid.uuid4().hex
    path.mkdir(parents=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        try:
            top.rmdir()
        except OSError:
            pass

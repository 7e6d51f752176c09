"""The one Playwright and Chromium of a test run (session fixtures, registered in
tests/conftest.py): Playwright's sync API allows one instance per thread, so the
browser tests and the security tests that drive a browser must share it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "browser", "chromium_path", "playwright_instance"]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

@pytest.fixture(scope="session")
def chromium_path() -> Path:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent: install Debian's chromium (make browser-deps)")
    pytest.importorskip("playwright.sync_api", reason="playwright (Python) is not installed")
    return CHROMIUM


@pytest.fixture(scope="session")
def playwright_instance(chromium_path: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="session")
def browser(playwright_instance: Any, chromium_path: Path) -> Iterator[Any]:
    b = playwright_instance.chromium.launch(
        executable_path=str(chromium_path), args=CHROMIUM_ARGS, headless=True
    )
    try:
        yield b
    finally:
        b.close()

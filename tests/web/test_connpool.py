"""The bound on unauthenticated connections (web.connpool) and what takes a
connection out of it (web.auth.Tokens.carried_by): issue 40, item 7.

Sans-IO: the pool is driven as the listener drives it (``open`` at accept,
``touch`` when bytes move, ``authenticate`` when a head carries the token,
``close`` at the end); the real server's floods are in
tests/security/test_connection_flood.py.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from web.auth import Tokens, bearer_subprotocol, head_tokens
from web.connpool import ConnPool, Held

TOKEN = "right-token-0123456789abcdef-0123456789"
OTHER = "other-token-0123456789abcdef-0123456789"


class Opened:
    """Connections as the listener opens them; which ones the pool closed."""

    def __init__(self, pool: ConnPool) -> None:
        self.pool = pool
        self.closed: list[str] = []
        self.by_name: dict[str, Held] = {}
        self.clock = 0.0

    def open(self, name: str, peer: str = "127.0.0.1") -> Held:
        self.clock += 1
        held = self.pool.open(peer, lambda: self.closed.append(name), self.clock)
        self.by_name[name] = held
        return held


def test_a_new_connection_over_the_bound_closes_the_one_idle_longest() -> None:
    opened = Opened(ConnPool(per_peer=3, total=100))
    for name in "abc":
        opened.open(name)
    opened.pool.touch(opened.by_name["a"])  # a moved a byte: b is idle the longest now
    opened.open("d")
    assert opened.closed == ["b"]
    assert opened.by_name["b"].evicted and not opened.by_name["d"].evicted
    opened.open("e")
    assert opened.closed == ["b", "c"]
    assert opened.pool.count() == 3
    # Closing one closed already is harmless (the listener's own close comes later).
    opened.pool.close(opened.by_name["b"])
    assert opened.pool.count() == 3


def test_a_flood_over_the_bound_displaces_its_own_connections_first() -> None:
    opened = Opened(ConnPool(per_peer=64, total=1000))
    person = opened.open("person")
    for i in range(64):
        opened.pool.touch(person)  # the person's page keeps using its connection
        opened.open(f"flood{i}")
    assert "person" not in opened.closed
    assert len(opened.closed) == 1  # the first flood connection, idle the longest


def test_authenticated_connections_leave_the_pool_for_good() -> None:
    opened = Opened(ConnPool(per_peer=2, total=100))
    page = opened.open("page")
    opened.pool.authenticate(page)
    for i in range(10):
        opened.open(f"flood{i}")
    assert "page" not in opened.closed and not page.evicted
    assert opened.pool.count() == 2
    opened.pool.touch(page)  # (out of the pool: nothing to move)
    assert opened.pool.count("127.0.0.1") == 2


def test_the_bound_per_address_spares_other_addresses() -> None:
    opened = Opened(ConnPool(per_peer=2, total=3))
    opened.open("remote", peer="10.0.0.5")
    opened.open("local1")
    opened.open("local2")
    opened.open("local3")  # its address is at its bound: one of its own goes
    assert opened.closed == ["local1"]
    opened.open("other", peer="10.0.0.6")  # the total bound: the idle longest of all
    assert opened.closed == ["local1", "remote"]
    assert opened.pool.count() == 3


@pytest.mark.parametrize("per_peer", [0, 1])
def test_a_bound_under_one_still_serves_the_newcomer(per_peer: int) -> None:
    opened = Opened(ConnPool(per_peer=per_peer, total=100))
    opened.open("a")
    opened.open("b")
    assert opened.closed == ["a"]


def head(target: str = "/", *headers: str) -> bytes:
    return (f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + "".join(h + "\r\n" for h in headers) + "\r\n").encode("latin-1")


TOKENS = Tokens({"default": TOKEN})


@pytest.mark.parametrize("request_head", [
    head("/api/v1/boot", f"Authorization: Bearer {TOKEN}"),
    head("/api/v1/boot", f"authorization: bearer   {TOKEN}  "),
    head("/ws", "Upgrade: websocket",
         f"Sec-WebSocket-Protocol: turnvisor, {bearer_subprotocol(TOKEN)}"),
    head(f"/?token={TOKEN}"),                       # the login address
    head(f"/tasks/t1?session=s&token={quote(TOKEN)}"),
    # The head as web.hyper rebuilds it for a later request on a kept-alive connection.
    f"POST /api/v1/tasks HTTP/1.1\r\nauthorization: Bearer {TOKEN}\r\n\r\n".encode(),
])
def test_a_head_with_the_token_is_authenticated(request_head: bytes) -> None:
    assert TOKENS.carried_by(request_head)


@pytest.mark.parametrize("request_head", [
    head("/"),
    head("/static/app.js"),
    head("/api/v1/boot", f"Authorization: Bearer {OTHER}"),
    head("/api/v1/boot", f"Authorization: Basic {TOKEN}"),
    head("/api/v1/boot", f"Authorization: Bearer {TOKEN[:-1]}"),
    head("/api/v1/boot", f"X-Authorization: Bearer {TOKEN}"),
    head("/ws", f"Sec-WebSocket-Protocol: turnvisor, {bearer_subprotocol(OTHER)}"),
    head("/ws", "Sec-WebSocket-Protocol: turnvisor.bearer.!!!"),
    head(f"/?notoken={TOKEN}"),
    head(f"/?token={OTHER}"),
    head(f"/api/v1/boot#token={TOKEN}"),
    # Only the first Authorization counts (as the app reads it).
    head("/api/v1/boot", f"Authorization: Bearer {OTHER}", f"Authorization: Bearer {TOKEN}"),
    b"\x00\xff" * 200,
    b"",
])
def test_a_head_without_the_token_is_not(request_head: bytes) -> None:
    assert not TOKENS.carried_by(request_head)


def test_a_head_offers_one_token_of_each_kind_at_most() -> None:
    many = head(f"/?token=a&token=b&token={TOKEN}",
                *[f"Authorization: Bearer t{i}" for i in range(100)],
                *[f"Sec-WebSocket-Protocol: {bearer_subprotocol(f's{i}')}" for i in range(100)])
    assert head_tokens(many) == ["a", "t0", "s0"]


def test_a_pipelined_body_is_not_read_as_headers() -> None:
    request = head("/api/v1/tasks") + f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
    assert not TOKENS.carried_by(request)

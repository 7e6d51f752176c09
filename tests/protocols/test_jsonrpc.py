"""RpcConnection: exact encodings in both dialects, a table of parsed lines,
and the property that no input raises out of the core or costs a valid message."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols.jsonrpc import (
    INTERNAL_ERROR,
    NEED_DATA,
    Dialect,
    ErrorResponse,
    IncomingNotification,
    IncomingRequest,
    InvalidLine,
    LocalProtocolError,
    PeerClosed,
    Response,
    RpcConnection,
    RpcEvent,
    UnmatchedResponse,
    error_details,
    error_text,
)
from protocols.transport import AgentRequestError

from .helpers import drain

J2, CX = Dialect.JSONRPC2, Dialect.CODEX

# (dialect, what the caller does, exact bytes written)
ENCODINGS: list[tuple[Dialect, Callable[[RpcConnection], bytes], bytes]] = [
    (
        J2,
        lambda c: c.send_request("m", {"a": 1})[1],
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}\n',
    ),
    (CX, lambda c: c.send_request("m", {"a": 1})[1], b'{"id":1,"method":"m","params":{"a":1}}\n'),
    (J2, lambda c: c.send_request("m")[1], b'{"jsonrpc":"2.0","id":1,"method":"m"}\n'),
    (CX, lambda c: c.send_notification("initialized"), b'{"method":"initialized"}\n'),
    (
        J2,
        lambda c: c.send_notification("n", {"x": None}),
        b'{"jsonrpc":"2.0","method":"n","params":{"x":null}}\n',
    ),
    (J2, lambda c: c.send_response(7, {}), b'{"jsonrpc":"2.0","id":7,"result":{}}\n'),
    (CX, lambda c: c.send_response("s", None), b'{"id":"s","result":null}\n'),
    (
        J2,
        lambda c: c.send_error(3, -32601, "nope"),
        b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"nope"}}\n',
    ),
    # Text stays UTF-8 on the wire, not \u-escaped.
    (
        CX,
        lambda c: c.send_notification("t", "h\u00e9\u2603"),
        b'{"method":"t","params":"h\xc3\xa9\xe2\x98\x83"}\n',
    ),
    # An agent may send a lone surrogate (JSON allows the escape); echoing it
    # back in a reply must still give one valid line, not a UnicodeEncodeError.
    (
        J2,
        lambda c: c.send_error("\ud800", -32601, "no \ud800"),
        b'{"jsonrpc":"2.0","id":"\\ud800","error":{"code":-32601,"message":"no \\ud800"}}\n',
    ),
]


@pytest.mark.parametrize(("dialect", "call", "expected"), ENCODINGS)
def test_encoding(
    dialect: Dialect, call: Callable[[RpcConnection], bytes], expected: bytes
) -> None:
    assert call(RpcConnection(dialect)) == expected


def test_request_ids_count_up_and_are_tracked() -> None:
    c = RpcConnection(CX, first_id=100)
    assert [c.send_request(m)[0] for m in ("a", "b")] == [100, 101]
    assert c.pending == {100: "a", 101: "b"}


def _conn_with_pending() -> RpcConnection:
    c = RpcConnection(J2)
    c.send_request("session/new", {})  # id 1
    return c


# A line from the peer -> the one event it becomes (InvalidLine compared by type).
PARSES: list[tuple[str, bytes, RpcEvent | type[InvalidLine]]] = [
    (
        "request",
        b'{"jsonrpc":"2.0","id":7,"method":"fs/read","params":{"p":1}}',
        IncomingRequest(id=7, method="fs/read", params={"p": 1}),
    ),
    (
        "request, string id, no jsonrpc",
        b'{"id":"a","method":"x"}',
        IncomingRequest(id="a", method="x", params=None),
    ),
    ("notification", b'{"method":"n","params":[1]}', IncomingNotification(method="n", params=[1])),
    (
        "null id is a notification",
        b'{"id":null,"method":"n"}',
        IncomingNotification(method="n", params=None),
    ),
    (
        "extra members ignored",
        b'{"method":"n","emittedAtMs":1796212069007}',
        IncomingNotification(method="n", params=None),
    ),
    (
        "response",
        b'{"id":1,"result":{"sessionId":"s"}}',
        Response(id=1, method="session/new", result={"sessionId": "s"}),
    ),
    (
        "error response",
        b'{"id":1,"error":{"code":-32602,"message":"bad","data":[1]}}',
        ErrorResponse(id=1, method="session/new", code=-32602, message="bad", data=[1]),
    ),
    (
        "error of the wrong shape",
        b'{"id":1,"error":"boom"}',
        ErrorResponse(id=1, method="session/new", code=INTERNAL_ERROR, message="boom"),
    ),
    (
        "response to an unknown id",
        b'{"id":9,"result":1}',
        UnmatchedResponse(id=9, message={"id": 9, "result": 1}),
    ),
    (
        "response with a bool id",
        b'{"id":true,"result":1}',
        UnmatchedResponse(id=True, message={"id": True, "result": 1}),
    ),
    ("request with a bool id", b'{"id":false,"method":"m"}', InvalidLine),
    ("request with an object id", b'{"id":{},"method":"m"}', InvalidLine),
    ("not JSON", b"this is not JSON {", InvalidLine),
    ("not an object", b"[1, 2, 3]", InvalidLine),
    ("no method, result or error", b"{}", InvalidLine),
    ("method not a string", b'{"method": 5}', InvalidLine),
    ("invalid UTF-8", b'{"method":"\xff\xfe broken"}', InvalidLine),
    ("nesting beyond the recursion limit", b"[" * 100_000 + b"]" * 100_000, InvalidLine),
    (
        "an int beyond int_max_str_digits",
        b'{"method":"n","params":' + b"9" * 5000 + b"}",
        InvalidLine,
    ),
]


@pytest.mark.parametrize(("line", "expected"), [p[1:] for p in PARSES], ids=[p[0] for p in PARSES])
def test_parse(line: bytes, expected: RpcEvent | type[InvalidLine]) -> None:
    c = _conn_with_pending()
    c.receive_data(line + b"\n")
    [ev] = drain(c)
    if expected is InvalidLine:
        assert isinstance(ev, InvalidLine)
        assert len(ev.line) <= 200 or ev.reason.startswith("request id")
    else:
        assert ev == expected


def test_a_response_settles_its_request_once() -> None:
    c = _conn_with_pending()
    c.receive_data(b'{"id":1,"result":{}}\n{"id":1,"result":{}}\n')
    assert [type(e) for e in drain(c)] == [Response, UnmatchedResponse]
    assert c.pending == {}


def test_forgotten_request_answer_is_unmatched() -> None:
    c = _conn_with_pending()
    c.forget(1)
    c.receive_data(b'{"id":1,"result":{}}\n')
    assert [type(e) for e in drain(c)] == [UnmatchedResponse]


def test_end_of_stream_parses_the_partial_line_and_lists_pending() -> None:
    c = RpcConnection(CX)
    c.send_request("thread/start", {})
    c.send_request("turn/start", {})
    c.receive_data(b'{"id":1,"result":{"thread":{"id":"t"}}}')
    assert c.next_event() is NEED_DATA
    c.receive_data(b"")
    assert drain(c) == [
        Response(id=1, method="thread/start", result={"thread": {"id": "t"}}),
        PeerClosed(pending=((2, "turn/start"),)),
    ]
    assert c.closed
    with pytest.raises(LocalProtocolError):
        c.send_request("turn/start", {})


def test_oversized_line_is_reported_and_the_next_one_read() -> None:
    c = RpcConnection(J2, max_line_bytes=64)
    c.receive_data(b'{"method":"big","params":"' + b"x" * 100 + b'"}\n{"method":"small"}\n')
    big, small = drain(c)
    assert isinstance(big, InvalidLine)
    assert "exceeds 64" in big.reason
    assert small == IncomingNotification(method="small", params=None)


# -- property: valid messages survive any garbage and any chunking ----------

LIMIT = 512

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=8,
)
methods = st.sampled_from(["session/update", "turn/started", "item/agentMessage/delta"]) | st.text(
    min_size=1, max_size=10
)


def _is_json_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), dict)
    except (ValueError, RecursionError):
        return False


# A line that is not a message: arbitrary bytes without a newline.
garbage = (
    st.binary(max_size=60)
    .map(lambda b: b.replace(b"\n", b""))
    .filter(lambda b: not _is_json_object(b))
)


@st.composite
def lines(
    draw: st.DrawFn, dialect: Dialect, pending: list[int]
) -> tuple[bytes, dict[str, Any] | None]:
    """One line of the stream, unterminated, and the message it carries
    (None for garbage and for lines over the limit)."""
    kind = draw(st.sampled_from(["notification", "request", "response", "garbage", "near limit"]))
    if kind == "garbage":
        return draw(garbage), None
    msg: dict[str, Any] = {"jsonrpc": "2.0"} if dialect is Dialect.JSONRPC2 else {}
    if kind == "response" and pending:
        msg["id"] = pending.pop(draw(st.integers(0, len(pending) - 1)))
        if draw(st.booleans()):
            msg["result"] = draw(json_values)
        else:
            msg["error"] = {
                "code": draw(st.integers(-33000, 0)),
                "message": draw(st.text(max_size=8)),
            }
    else:
        msg["method"] = draw(methods)
        if kind == "request":
            msg["id"] = draw(st.integers(0, 2**31) | st.text(max_size=8))
        if draw(st.booleans()):
            msg["params"] = draw(json_values)

    def encode(m: dict[str, Any]) -> bytes:
        return json.dumps(m, ensure_ascii=ascii_only, separators=seps).encode()

    ascii_only = draw(st.booleans())
    seps = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    if kind == "near limit":
        # Pad to within two bytes of the limit, either side: the boundary is
        # where framing bugs live (CRLF after a line of exactly the limit).
        base = len(encode({**msg, "pad": ""}))
        msg["pad"] = "x" * max(0, LIMIT + draw(st.integers(-2, 2)) - base)
    line = encode(msg)
    return line, (msg if len(line) <= LIMIT else None)


def _expected(conn: RpcConnection, msg: dict[str, Any]) -> RpcEvent:
    if "method" in msg:
        if "id" in msg:
            return IncomingRequest(id=msg["id"], method=msg["method"], params=msg.get("params"))
        return IncomingNotification(method=msg["method"], params=msg.get("params"))
    method = conn.pending[msg["id"]]
    if "error" in msg:
        err = msg["error"]
        return ErrorResponse(id=msg["id"], method=method, code=err["code"], message=err["message"])
    return Response(id=msg["id"], method=method, result=msg["result"])


@given(dialect=st.sampled_from(Dialect), data=st.data())
def test_valid_messages_survive_garbage_and_any_split(
    dialect: Dialect, data: st.DataObject
) -> None:
    conn = RpcConnection(dialect, max_line_bytes=LIMIT)
    pending = [conn.send_request(f"m{i}")[0] for i in range(5)]
    drawn = data.draw(st.lists(lines(dialect, pending), max_size=12), label="lines")
    stream = bytearray()
    expected: list[object] = []
    for line, msg in drawn:
        if msg is not None:
            expected.append(_expected(conn, msg))
        elif line.strip():  # blank garbage is skipped, not reported
            expected.append(InvalidLine)
        stream += line + data.draw(st.sampled_from([b"\n", b"\r\n"]), label="terminator")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=15), label="cuts"))
    got: list[RpcEvent] = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        if a < b:
            conn.receive_data(bytes(stream[a:b]))
            got += drain(conn)  # must never raise, whatever arrived
    still_pending = tuple(conn.pending.items())
    conn.receive_data(b"")
    got += drain(conn)
    assert got[-1] == PeerClosed(pending=still_pending)
    assert [InvalidLine if isinstance(e, InvalidLine) else e for e in got[:-1]] == expected


@given(chunks=st.lists(st.binary(max_size=200), max_size=20), dialect=st.sampled_from(Dialect))
def test_arbitrary_bytes_never_raise(chunks: list[bytes], dialect: Dialect) -> None:
    conn = RpcConnection(dialect, max_line_bytes=64)
    conn.send_request("x")
    for chunk in [*chunks, b""]:
        conn.receive_data(chunk)
        for ev in drain(conn):
            # Every reply the core builds from peer data must encode.
            if isinstance(ev, IncomingRequest):
                assert conn.send_error(ev.id, -32601, f"no {ev.method}").endswith(b"\n")
    assert conn.closed


@pytest.mark.parametrize(("data", "details"), [
    (None, None),
    ({"details": "model 'x' not found"}, "model 'x' not found"),
    ({"details": "  two\n lines  "}, "two lines"),
    ({"message": "auth required"}, "auth required"),
    ({"details": "", "message": "the message then"}, "the message then"),
    ({"details": 3}, None),
    ({"other": "x"}, None),
    ("plain text", "plain text"),
    (["a"], None),
    ({"details": "x" * 1000}, "x" * 299 + "…"),
])
def test_error_details_is_a_short_form_of_data(data: Any, details: str | None) -> None:
    assert error_details(data) == details


def test_error_text_adds_details_only_where_they_say_more() -> None:
    assert error_text("Internal error", {"details": "no such session"}) == \
        "Internal error: no such session"
    assert error_text("Internal error", None) == "Internal error"
    assert error_text("no such session s1", {"details": "no such session"}) == \
        "no such session s1"
    assert error_text("", {"details": "why"}) == "why"
    assert error_text("gone", {"details": "gone: the session expired"}) == \
        "gone: the session expired"


def test_an_error_answers_data_reaches_the_request_error() -> None:
    """An agent's ``error.data`` survives the wire (``send_error`` writes it,
    ``ErrorResponse`` keeps it) and ``AgentRequestError``: kept whole as
    ``data``, its details short in the text."""
    client, agent = RpcConnection(Dialect.JSONRPC2), RpcConnection(Dialect.JSONRPC2)
    rid, data = client.send_request("session/load", {"sessionId": "s1"})
    agent.receive_data(data)
    req = agent.next_event()
    assert isinstance(req, IncomingRequest)
    detail = {"details": "Session s1 not found", "sessionId": "s1"}
    client.receive_data(agent.send_error(req.id, INTERNAL_ERROR, "Internal error", detail))
    answer = client.next_event()
    assert answer == ErrorResponse(id=rid, method="session/load", code=INTERNAL_ERROR,
                                   message="Internal error", data=detail)
    assert isinstance(answer, ErrorResponse)
    exc = AgentRequestError(answer.method, answer.code, answer.message, answer.data)
    assert (exc.method, exc.code, exc.message, exc.data) == (
        "session/load", INTERNAL_ERROR, "Internal error", detail)
    assert exc.details == "Session s1 not found"
    assert str(exc) == "session/load failed (-32603): Internal error: Session s1 not found"
    plain = AgentRequestError("session/new", -32602, "bad cwd")
    assert plain.data is None and plain.details is None
    assert str(plain) == "session/new failed (-32602): bad cwd"

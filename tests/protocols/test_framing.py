"""LineDecoder: a table of framing cases, then properties checked against a
one-line reference model (split on ``\\n``, drop one ``\\r``, judge the size)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocols.framing import FrameEvent, Line, LineDecoder, LineTooLong, StreamEnded

LIMIT = 8


def feed_all(chunks: list[bytes], *, limit: int = LIMIT) -> list[FrameEvent]:
    dec = LineDecoder(max_line_bytes=limit)
    out: list[FrameEvent] = []
    for chunk in chunks:
        out += dec.feed(chunk)
    return out


# (chunks fed in order, b"" = end of stream) -> frames, with LIMIT = 8.
CASES: list[tuple[str, list[bytes], list[FrameEvent]]] = [
    ("one line", [b"abc\n"], [Line(data=b"abc")]),
    ("two lines in one chunk", [b"a\nb\n"], [Line(data=b"a"), Line(data=b"b")]),
    ("a line split over chunks", [b"ab", b"c", b"d\n"], [Line(data=b"abcd")]),
    ("CRLF", [b"abc\r\n"], [Line(data=b"abc")]),
    ("CR split from its LF", [b"abc\r", b"\n"], [Line(data=b"abc")]),
    ("only one CR dropped", [b"abc\r\r\n"], [Line(data=b"abc\r")]),
    ("blank and whitespace lines skipped", [b"\n \n\r\n\t\nx\n"], [Line(data=b"x")]),
    ("exactly the limit", [b"12345678\n"], [Line(data=b"12345678")]),
    ("exactly the limit, CRLF", [b"12345678\r\n"], [Line(data=b"12345678")]),
    ("limit split before CR", [b"12345678", b"\r", b"\n"], [Line(data=b"12345678")]),
    (
        "one over the limit, then a good line",
        [b"123456789\nok\n"],
        [LineTooLong(size=9, limit=LIMIT), Line(data=b"ok")],
    ),
    (
        "oversized line streamed in pieces",
        [b"12345", b"67890", b"abcdef", b"gh\nok\n"],
        [LineTooLong(size=18, limit=LIMIT), Line(data=b"ok")],
    ),
    (
        "limit plus CR, then not LF",
        [b"12345678\r", b"x\nok\n"],
        [LineTooLong(size=10, limit=LIMIT), Line(data=b"ok")],
    ),
    ("end of stream, nothing buffered", [b"a\n", b""], [Line(data=b"a"), StreamEnded(partial=b"")]),
    (
        "end of stream keeps the partial line",
        [b"a\nbc", b""],
        [Line(data=b"a"), StreamEnded(partial=b"bc")],
    ),
    (
        "end of stream inside an oversized line",
        [b"123456789012", b""],
        [LineTooLong(size=12, limit=LIMIT), StreamEnded(partial=b"")],
    ),
    ("nothing after the end", [b"a", b"", b"b\n", b""], [StreamEnded(partial=b"a")]),
]


@pytest.mark.parametrize(("chunks", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_framing_cases(chunks: list[bytes], expected: list[FrameEvent]) -> None:
    assert feed_all(chunks) == expected


def reference(stream: bytes, limit: int, *, ended: bool) -> list[FrameEvent]:
    """What the decoder must produce for ``stream``, however it is chunked."""
    *complete, last = stream.split(b"\n")
    out: list[FrameEvent] = []
    for raw in complete:
        line = raw.removesuffix(b"\r")
        if len(line) > limit:
            out.append(LineTooLong(size=len(raw), limit=limit))
        elif line.strip():
            out.append(Line(data=line))
    if ended:
        if len(last.removesuffix(b"\r")) > limit:
            out += [LineTooLong(size=len(last), limit=limit), StreamEnded(partial=b"")]
        else:
            out.append(StreamEnded(partial=last))
    return out


# Bytes rich in the characters framing cares about, mixed with anything at all.
stream_bytes = st.lists(
    st.sampled_from([b"\n", b"\r", b"\r\n", b"x", b" ", b"{}", b"\xff"]) | st.binary(max_size=40),
    max_size=40,
).map(b"".join)


@given(
    stream=stream_bytes,
    limit=st.integers(min_value=1, max_value=32),
    data=st.data(),
    ended=st.booleans(),
)
def test_any_chunking_matches_reference(
    stream: bytes, limit: int, data: st.DataObject, ended: bool
) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12), label="cuts"))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    dec = LineDecoder(max_line_bytes=limit)
    out: list[FrameEvent] = []
    for chunk in chunks:
        if chunk:  # b"" would mean end of stream
            out += dec.feed(chunk)
        # The DoS bound: an unterminated line is never held beyond the limit
        # (+1 for a CR whose LF has not arrived yet).
        assert len(dec._buf) <= limit + 1
    if ended:
        out += dec.feed(b"")
        assert dec.feed(b"more\n") == []
    assert out == reference(stream, limit, ended=ended)


@given(
    lines=st.lists(
        st.binary(min_size=1, max_size=20).filter(lambda b: b"\n" not in b), max_size=20
    ),
    limit=st.integers(min_value=1, max_value=16),
    crlf=st.booleans(),
    data=st.data(),
)
def test_no_complete_line_within_the_limit_is_lost(
    lines: list[bytes], limit: int, crlf: bool, data: st.DataObject
) -> None:
    """Oversized neighbours cost only themselves."""
    term = b"\r\n" if crlf else b"\n"
    stream = b"".join(line + term for line in lines)
    step = data.draw(st.integers(1, max(1, len(stream))), label="chunk size")
    dec = LineDecoder(max_line_bytes=limit)
    got = [
        ev.data
        for i in range(0, len(stream), step)
        for ev in dec.feed(stream[i : i + step])
        if isinstance(ev, Line)
    ]
    kept = [line.removesuffix(b"\r") if not crlf else line for line in lines]
    assert got == [k for k in kept if len(k) <= limit and k.strip()]

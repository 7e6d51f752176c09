"""A prompt's large images written as they are encoded (protocols/prompt_parts.py
``streamed``, protocols/transport.py ``send``): the pieces make exactly the line the core
builds with the bytes inline, none is much larger than a chunk's base64, small parts
stay inline, and on a real pipe the line arrives whole with no other frame inside it."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from protocols.acp import AcpClient
from protocols.prompt_parts import (
    SPLICE_CHUNK,
    SPLICE_MIN_BYTES,
    FilePart,
    ImagePart,
    MentionPart,
    PromptPart,
    Spliced,
    acp_blocks,
    codex_input,
    streamed,
)
from protocols.transport import AgentConnection

CAPS = {"image": True, "embeddedContext": True}
BIG = ImagePart(name="big.png", mime="image/png", data=os.urandom(3 * SPLICE_CHUNK + 7))
BIG2 = ImagePart(name="b2.jpg", mime="image/jpeg", data=os.urandom(SPLICE_MIN_BYTES + 1))
SMALL = ImagePart(name="s.png", mime="image/png", data=os.urandom(100))
PDF = FilePart(name="spec.pdf", mime="application/pdf", data=os.urandom(SPLICE_MIN_BYTES * 2))
TEXT = FilePart(name="log.txt", mime="text/plain", data=b"line\n" * SPLICE_MIN_BYTES)
SRC = MentionPart(path="/w/a.py", name="a.py", mime="text/x-python", text="x = 1\n")


def _acp(parts: tuple[PromptPart, ...]) -> bytes:
    return (json.dumps({"id": 3, "prompt": acp_blocks("look", parts, CAPS)},
                       separators=(",", ":")) + "\n").encode()


def _codex(parts: tuple[PromptPart, ...]) -> bytes:
    return (json.dumps({"id": 3, "input": codex_input("look", parts)},
                       separators=(",", ":")) + "\n").encode()


@pytest.mark.parametrize("build", [_acp, _codex])
def test_the_pieces_are_the_inline_line(build: Any) -> None:
    parts: tuple[PromptPart, ...] = (BIG, SMALL, SRC, BIG2)
    if build is _acp:
        parts = (*parts, PDF, TEXT)
    line = streamed(build, parts)
    assert isinstance(line, Spliced)
    # Only the large images and the large binary file stand in; the text file is text.
    assert len(line.blobs) == (3 if build is _acp else 2)
    inline = build(parts)
    pieces = list(line)
    assert b"".join(pieces) == inline
    assert len(line) == len(inline)
    # The line as built is small; no piece holds more than a chunk's base64 (or the
    # line's own text around the stand-ins).
    assert len(line.line) < len(TEXT.data) * 2
    assert max(len(p) for p in pieces if p not in (line.line,)) <= max(
        SPLICE_CHUNK * 4 // 3, len(line.line))


def test_small_parts_and_none_give_the_bytes() -> None:
    assert streamed(_acp, (SMALL, SRC)) == _acp((SMALL, SRC))
    assert streamed(_acp, ()) == _acp(())


def test_a_core_that_drops_a_part_is_refused() -> None:
    with pytest.raises(RuntimeError, match="stand-in"):
        streamed(lambda parts: _acp(()), (BIG,))


def test_a_refusal_is_raised_before_anything() -> None:
    # The core's own refusal (no image prompts) is what the caller sees.
    from protocols.prompt_parts import PartRefused

    with pytest.raises(PartRefused):
        streamed(lambda parts: (json.dumps(acp_blocks("x", parts, {})) + "\n").encode(),
                 (BIG,))


@asynccontextmanager
async def piped() -> AsyncIterator[tuple[AgentConnection, trio.lowlevel.FdStream]]:
    r, w = os.pipe()
    async with trio.lowlevel.FdStream(r) as far, trio.lowlevel.FdStream(w) as near:
        yield AgentConnection(AcpClient(), near, far, write_timeout_s=5), far


async def _read(stream: trio.lowlevel.FdStream, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        out += await stream.receive_some(65536)
    return bytes(out)


async def test_on_a_pipe_the_line_is_whole_and_nothing_gets_inside_it(
        autojump_clock: trio.testing.MockClock) -> None:
    line = streamed(_acp, (BIG, BIG2))
    assert isinstance(line, Spliced)
    after = b'{"method":"session/cancel"}\n'
    async with piped() as (conn, far):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.send, line)
            await trio.testing.wait_all_tasks_blocked()
            # The pipe is full: the prompt holds it; a cancel written now waits.
            assert not conn.can_send_now()
            nursery.start_soon(conn.send, after)
            got = await _read(far, len(line) + len(after))
        assert got == _acp((BIG, BIG2)) + after


async def test_a_cancelled_caller_before_the_pipe_is_free_writes_nothing(
        autojump_clock: trio.testing.MockClock) -> None:
    big = b"x" * 300_000 + b"\n"
    line = streamed(_acp, (BIG,))
    async with piped() as (conn, far):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.send, big)
            await trio.testing.wait_all_tasks_blocked()
            with trio.CancelScope() as scope:
                scope.cancel()
                await conn.send(line)
            assert scope.cancelled_caught
            got = await _read(far, len(big))
        assert got == big
        # Nothing of the cancelled line followed.
        with trio.move_on_after(1):
            extra = await far.receive_some(65536)
            pytest.fail(f"written after a cancelled send: {extra[:40]!r}")

"""The in-process agent's ``/dropcancel``, under virtual time: the first
``session/cancel`` is dropped, a re-sent one ends the turn."""

from __future__ import annotations

import trio
import trio.testing

from protocols.adapters import AcpAdapter
from supervisor.profiles import BUILTIN_PROFILES

from .fake_agent import FakeLauncher


async def test_dropcancel_needs_the_cancel_twice(autojump_clock: trio.testing.MockClock) -> None:
    launcher = FakeLauncher()
    async with launcher(BUILTIN_PROFILES["mock"], "/tmp", "s1") as launched:
        adapter = launched.adapter
        assert isinstance(adapter, AcpAdapter)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(adapter.connection.run)
            await adapter.initialize()
            await adapter.new_session("/tmp")
            ended = []

            async def prompt() -> None:
                ended.append(await adapter.prompt("/dropcancel 5000"))

            nursery.start_soon(prompt)
            await trio.sleep(0.25)
            await adapter.cancel()
            await trio.sleep(1.0)
            assert ended == []  # dropped: still streaming
            resent = trio.current_time()
            await adapter.resend_cancel()
            with trio.fail_after(1):
                while not ended:
                    await trio.sleep(0.01)
            assert ended[0].stop_reason == "cancelled"
            assert trio.current_time() - resent < 0.2
            assert launcher.agents[0].cancels == 2
            nursery.cancel_scope.cancel()

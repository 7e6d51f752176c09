from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import pytest
import trio

from supervisor.config import Config
from supervisor.executors import Launcher
from supervisor.root import Supervisor, open_supervisor
from supervisor.storage.db import Db
from supervisor.storage.store import Store

P = ParamSpec("P")
R = TypeVar("R")


class InlineStore(Store):
    """The real SQLite store, called on the Trio thread.

    Under MockClock's autojump a wait on a worker thread counts as "blocked",
    so virtual time would leap past the very timeouts under test while a row
    is being written.  Running the (fast, local) SQL inline keeps virtual time
    honest; the threaded Store is what every other test uses.
    """

    async def call(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        await trio.lowlevel.checkpoint()
        return functools.partial(fn, *args, **kwargs)()


#: ``make_supervisor``: ``async with make_supervisor(...) as sup`` opens a
#: ``Supervisor`` on the test's data dir (the factory's keywords, below).
SupervisorFactory = Callable[..., AbstractAsyncContextManager[Supervisor]]


@pytest.fixture
def make_supervisor(tmp_path: Path) -> SupervisorFactory:
    @asynccontextmanager
    async def factory(*, launcher: Launcher | None = None, inline: bool = False,
                      agents: dict[str, Any] | None = None,
                      store_class: type[InlineStore] = InlineStore, checkpoints: bool = False,
                      **timeouts: float) -> AsyncIterator[Supervisor]:
        data = tmp_path / "data"
        # Turn checkpoints (on in the product) are off here unless asked for: these
        # tests time the turn and cancel paths, many on virtual time, where a real
        # git snapshot before each prompt would leap the clock (a cancel during it
        # withholds the prompt: tests/supervisor/test_continuity_timing.py).
        config = Config.from_mapping(data, {"timeouts": timeouts, "agents": agents or {},
                                            "projects": {"checkpoints": checkpoints},
                                            "server": {"trace_cancels": True}})
        db = None
        if inline:
            data.mkdir(parents=True, exist_ok=True)
            db = Db(config.db_path)
        async with open_supervisor(config, launcher=launcher, db=db,
                                   store_class=store_class if inline else Store) as sup:
            yield sup

    return factory

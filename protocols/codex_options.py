"""A Codex thread's options, kept for ``CodexClient`` (protocols/codex.py).

Codex has no call that sets a thread's model or effort between turns: each
``turn/start`` takes ``model``, ``effort`` and ``approvalPolicy``, which hold for
that turn and the ones after it.  So a ``set`` is kept here and goes out with
every later ``turn/start`` (``turn_params``), and the options say at once
what the next turn will use.  What is offered (protocols/session_options.py's
``codex_options``): the thread's ``model``, ``reasoningEffort`` and
``approvalPolicy`` as ``thread/start`` (or ``thread/resume``) answered them,
with ``model/list``'s models and each one's efforts once that is answered.
"""

from __future__ import annotations

from typing import Any, Final

from . import session_options as so
from .events import OptionsChanged

__all__ = ["TURN_PARAMS", "CodexOptions"]

#: Our option id → ``turn/start``'s parameter.
TURN_PARAMS: Final = {"model": "model", "reasoning_effort": "effort",
                      "approval_policy": "approvalPolicy"}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class CodexOptions:
    def __init__(self) -> None:
        #: What the thread's answer said (None: it did not).
        self.thread: dict[str, str | None] = {}
        #: ``model/list``'s answer, once known.
        self.listed: Any = None
        #: What we set: option id → value, sent with every ``turn/start``.
        self.chosen: dict[str, str] = {}
        self.options: tuple[so.Option, ...] = ()

    def _current(self) -> OptionsChanged:
        values = {**self.thread, **self.chosen}
        self.options = so.codex_options(values.get("model"), values.get("reasoning_effort"),
                                        values.get("approval_policy"), self.listed)
        return OptionsChanged(options=self.options)

    def thread_answered(self, result: Any) -> OptionsChanged:
        """``thread/start``'s or ``thread/resume``'s answer: what the thread runs with."""
        got = result if isinstance(result, dict) else {}
        self.thread = {"model": _str(got.get("model")),
                       "reasoning_effort": _str(got.get("reasoningEffort")),
                       "approval_policy": _str(got.get("approvalPolicy"))}
        return self._current()

    def models_listed(self, result: Any) -> OptionsChanged:
        """``model/list``'s answer: the model's choices and each one's efforts."""
        self.listed = result
        return self._current()

    def set(self, option_id: str, value: str) -> OptionsChanged:
        """Keep ``value`` for the next turns; ValueError if it is not offered."""
        so.check_choice(self.options, option_id, value)
        self.chosen[option_id] = value
        return self._current()

    def turn_params(self) -> dict[str, str]:
        """``turn/start``'s parameters for what we set."""
        return {TURN_PARAMS[k]: v for k, v in self.chosen.items()}

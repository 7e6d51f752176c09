"""The mock agent: a real agent program speaking ACP or the Codex app-server protocol.

    python -m protocols.mock_agent --protocol acp|codex

Used by tests, benchmarks and the default ``turnvisor serve``.  It imports only
the standard library and ``protocols.jsonrpc`` so it starts in a few tens of
milliseconds.  The prompt text selects a behaviour (DESIGN.md §3):

    /delay <ms>      a chunk every 100 ms for <ms>; honours cancel at once
    /slow <ms>       the same stream, but ignores cancel until <ms> has passed
    /hang            never answers the prompt, ignores cancel
    /pause <ms>      silent for <ms> (ignores cancel), then one chunk and the
                     end of the turn: a stall that resolves
    /permission      asks permission (ACP) or approval (Codex) and waits; Codex:
                     ``cancel`` ("Deny and stop") interrupts the turn, and every
                     settled approval is followed by ``serverRequest/resolved``
    /withdraw        asks permission, then takes the request back after ~300 ms
                     (ACP ``$/cancel_request``, Codex ``serverRequest/resolved``)
                     and ends the turn with ``withdrawn: <the client's answer>``
    /dropcancel <ms> streams like /delay, but ignores the first cancel it gets
                     (``session/cancel``; ``turn/interrupt`` is answered ``{}``
                     and ignored) and honours the second, as pi-acp and vibe
                     drop a cancel that follows the prompt at once
    /tool <ms>       a tool call that runs <ms>, then finishes
    /crash           exits with status 1 mid-turn
    /garbage         writes a non-JSON line, then goes on normally
    /recall          answers ``recall: <p1> | <p2> | ...``: the user prompts this
                     agent session saw before this one, oldest first
                     (``recall: (nothing)`` if none)
    /write PATH TEXT writes TEXT (and a newline; ``\\n`` is one) to PATH under the
                     session's cwd: a tool call carrying the diff, as real agents
                     report edits (protocols/mock_edits.py)
    /append PATH TEXT  the same, appended
    /rm PATH         deletes PATH (a tool call with the diff)
    /edits <n>       <n> writes (``edit-1.txt`` ...), one per 100 ms; honours
                     cancel at once: a turn to cancel half-way
    /subagents <n> [ms] [hang|hang-all]
                     <n> child sessions (ACP subagent sessions; v1 only for a
                     client offering ``clientCapabilities.subagents``) streaming
                     for <ms> (20 s) each while the parent streams; each honours
                     its own ``session/cancel``; the parent ends when they all
                     have, or at its own cancel, leaving them running
                     (protocols/mock/subagents.py); ``hang`` after <ms>: the
                     parent ignores its cancel; ``hang-all``: the children too
    /steps <n> <ms> [permission]
                     <n> (3) shell-like tool calls in sequence, ``step i of n:
                     sleep s``, each running <ms> (500), a chunk after each and
                     ~100 ms of "thinking" before the next; a cancel mid-step
                     ends the turn ``cancelled`` at once (the step is left to
                     the client to mark: Codex sends no item/completed for
                     it); ``permission``: asks for the second step half-way
                     through the first (protocols/mock/stops.py)
    /stray           leaves ``sleep 600`` running in the agent's own process
                     group (a completed tool call ``stray: sleep 600``), says
                     ``stray pid <pid>`` and ends the turn; it dies with the
                     group
    /usage [n]       reports <n> (1234) tokens used: ACP ``usage_update``
                     (``used``, ``size`` 200000, a ``cost``), Codex
                     ``thread/tokenUsage/updated``
    /title NAME      ACP: names the session (``session_info_update``)
    /options         says the option values in effect (ACP: ``options:
                     mode=... model=...``; Codex: the ``model``, ``effort`` and
                     ``approvalPolicy`` the last ``turn/start`` carried)
    /agentset ID V   ACP: the agent sets option ID to V itself
                     (``config_option_update``; legacy: ``current_mode_update``)
    anything else    echoes the text back in a few chunks

Sessions survive the process: each agent session (ACP session, Codex thread)
is one JSON file in the state directory (``$MOCK_AGENT_STATE_DIR``, default
``turnvisor-mock-agent/`` under ``$XDG_STATE_HOME`` or ``~/.local/state``: never
in the working directory, the user's project), rewritten atomically at each
prompt and turn end, so a new mock process can restore it.  ACP advertises
``agentCapabilities.loadSession`` and ``sessionCapabilities.resume``:
``session/load`` replays the history (``user_message_chunk`` /
``agent_message_chunk``) before it answers, ``session/resume`` does not;
Codex has ``thread/resume {threadId}``.  An unknown session is an error.
``--restore both|load|resume|none`` (ACP: what is advertised and served; Codex:
``none`` refuses ``thread/resume``) gives tests an agent that restores one
way only, or not at all.

Codex ``turn/steer {threadId, input, expectedTurnId}`` during a turn: a
``/delay`` (``/slow``, ``/dropcancel``) turn then streams ``steered: <text>``
as its next chunk; an ``expectedTurnId`` that is not the running turn is an
error.  Steered input is a user message of the session (``/recall`` lists it).
With ``--steering`` the ACP dialect offers the same through the steering
extension (``_meta.steering.supported``; ``_session/steering {sessionId,
prompt}`` answers ``{outcome: "injected"}``, or ``"promptRequired"`` with no
turn running).

ACP v2: with ``--acp-version 2`` (or ``$MOCK_AGENT_ACP_VERSION=2``; the
default is 1, a v1-only agent) the mock speaks v2 when the client's
``initialize`` offers 2, and v1 otherwise.  In v2 ``session/prompt`` is
answered ``{}`` at once (accepted), followed by a ``user_message`` and a
``running`` ``state_update``; the turn ends with ``state_update {state:
"idle", stopReason}`` (``cancelled`` after ``session/cancel``).  Chunks carry a
``messageId``, tool calls start with ``tool_call_update``, a permission request
has a ``title`` and a ``subject`` (with ``requires_action`` while it waits),
and ``session/resume`` with ``replayFrom: {type: "start"}`` replays the history
(``user_message`` / ``agent_message``) before it answers; ``session/load`` is
not served.

The behaviours are sans-IO scripts run by one state machine (protocols/mock/:
``machine``, a dialect each in ``acp1``, ``acp2``, ``codex``, the scripts in
``scripts`` and ``faults``); this program runs it on stdin/stdout
(``protocols/mock/stdio.py``), and the tests' in-process agent
(tests/supervisor/fake_agent.py) runs the same machine on a Trio memory stream.

Login (DESIGN.md §19, ``--login``: the ``mock-login`` profiles): logged out it answers
``auth_required`` to every session until ``authenticate`` (an ``env_var`` key method and a
``terminal`` one, ``--sign-in``) or Codex's ``account/login/start``: protocols/mock/login.py.

Options and commands (DESIGN.md §19, protocols/mock/options.py): the session
offers a mode (default, plan, yolo) and a model (mock-fast, mock-smart), kept
with the session.  ACP: ``configOptions`` in every session answer, set with
``session/set_config_option``; with ``--legacy-options`` (ACP v1 only) the
legacy ``modes``/``models`` instead, set with ``session/set_mode`` /
``session/set_model`` (each way refuses the other's calls).  Right after
``session/new``'s answer an ``available_commands_update`` lists the commands
above that a person would use, with descriptions and input hints.  Codex:
``thread/start`` answers ``model``, ``reasoningEffort``, ``approvalPolicy``;
``model/list`` lists both models and their efforts.

Faults for the reliability suite (not part of the DESIGN table):

    /stderr <n>      writes <n> KiB to stderr, then echoes
    /bigline <mb>    writes one line of <mb> MiB, then echoes
    /partial         writes a message in three pieces with pauses, then echoes
    /badutf8         writes a line of invalid UTF-8, then echoes
    /wrongshape      writes JSON of the wrong shape and a reply to an unknown id
    /closeout        closes stdout but keeps running (until stdin ends)
    /flood <mb>      streams <mb> MiB of text (16 KiB chunks) as fast as its
                     stdout takes it, honouring cancel, then waits for the
                     cancel (30 s at most) and ends the turn
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from .mock import stdio
from .mock.base import Script
from .mock.login import sign_in
from .mock.machine import MockMachine
from .mock.sessions import STATE_DIR_ENV, SessionStore

__all__ = ["ACP_VERSION_ENV", "STATE_DIR_ENV", "build_parser", "machine", "main"]

#: The highest ACP version the mock speaks, when ``--acp-version`` is not given.
ACP_VERSION_ENV = "MOCK_AGENT_ACP_VERSION"
RESTORE = {"both": frozenset({"load", "resume"}), "none": frozenset()}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m protocols.mock_agent")
    parser.add_argument("--protocol", choices=("acp", "codex"), default="acp")
    parser.add_argument(
        "--restore", choices=("both", "load", "resume", "none"), default="both",
        help="how sessions can be restored (ACP: what initialize advertises; "
             "Codex: none refuses thread/resume)",
    )
    parser.add_argument("--steering", action="store_true",
                        help="ACP: offer the steering extension (_session/steering)")
    parser.add_argument("--acp-version", type=int, choices=(1, 2),
                        default=int(os.environ.get(ACP_VERSION_ENV) or 1),
                        help="ACP: the highest protocol version spoken (2: v2 when offered)")
    parser.add_argument("--legacy-options", action="store_true",
                        help="ACP v1: offer the mode and model as the legacy modes/models "
                             "(session/set_mode, session/set_model) instead of configOptions")
    parser.add_argument("--login", action="store_true",
                        help="need a login before a session (protocols/mock/login.py)")
    parser.add_argument("--sign-in", action="store_true",
                        help="sign in (the --login terminal method) in this home, and exit")
    parser.add_argument("--no-offers", action="store_true",
                        help="ACP: offer no options and no commands (a bench baseline)")
    parser.add_argument("--no-images", action="store_true",
                        help="ACP: do not advertise image prompts (promptCapabilities.image)")
    return parser


def machine(args: argparse.Namespace,
            extra: Mapping[str, Script] | None = None) -> MockMachine:
    """The machine the command line asks for; ``extra``: more behaviours by command
    (the tests' weird and hostile agents)."""
    restore = RESTORE.get(args.restore, frozenset({args.restore}))
    return MockMachine(args.protocol, SessionStore.from_environment(), restore=restore,
                       steering=args.steering, acp_max_version=args.acp_version, extra=extra,
                       spawn=stdio.spawn, legacy_options=args.legacy_options,
                       images=not args.no_images, login=args.login,
                       offers=not args.no_offers)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.sign_in:
        sign_in("mock-terminal")
        print(f"signed in (in {Path.home()})")
        return 0
    return stdio.serve(machine(args))


if __name__ == "__main__":
    sys.exit(main())

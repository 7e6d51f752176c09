"""How many of the cancel path's timeout tests run on virtual time, counted from
the test sources (``python -m tests.support.clock_census [--cases] [DIR ...]``;
without a directory, tests/supervisor; ``--cases`` adds the figure over the
cases pytest collects, each parameter set one; tests/supervisor/test_clock_census.py
asserts the floor).

Read by ``ast``, never run; what is counted:

- **A test** is a module-level ``def``/``async def test_*`` (or one in a
  ``Test*`` class) in a ``test_*.py`` file; a parametrized test counts once.
- **It times the cancel path** when it names one of the cancel path's timeouts
  (``CANCEL_TIMEOUTS``: the join window, the re-sends, the escalation and its
  clean-up, the operation's bound, the after-step bound, the lost link's bound,
  the termination grace) as a keyword (``make_supervisor(cancel_join_s=3)``),
  a string (a ``{"timeouts": {...}}`` mapping) or an attribute
  (``timeouts.cancel_cleanup_s``), in its own body or in a module-level
  function, constant or fixture of its module that it refers to, directly or
  through others (a ``_running`` helper that sets the window counts for every
  test calling it), **and** it waits on a clock: an ``async`` test, or one
  that calls ``trio.run`` (a plain table test of the rules that reads a
  timeout's name waits for nothing, and is no timing test).  A test that relies
  on a default without naming it is not seen: the figure covers exactly the
  tests that chose a value for one of these timeouts.
- **It runs on MockClock** when it takes pytest-trio's ``autojump_clock``
  fixture (``MockClock(autojump_threshold=0)``), or it, or a module-level
  name it refers to, builds ``MockClock(autojump_threshold=0)`` itself (a
  ``trio.run(..., clock=...)`` or a fixture of its own).  A ``MockClock()``
  without autojump is a clock the test moves by hand and is counted too:
  either way no second of the test is a real second.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CANCEL_TIMEOUTS", "Census", "TimedTest", "census", "collected_cases", "main"]

#: The cancel path's timeouts (supervisor/config.py's ``Timeouts``).
CANCEL_TIMEOUTS = frozenset({
    "cancel_join_s", "cancel_resend_s", "cancel_resend_again_s", "cancel_escalate_s",
    "cancel_cleanup_s", "cancel_operation_s", "after_step_timeout_s",
    "link_down_cancel_s", "term_grace_s",
})

#: The fixture names that are a MockClock (pytest-trio's, and the suite's own).
CLOCK_FIXTURES = frozenset({"autojump_clock", "mock_clock"})

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class TimedTest:
    """One test that names a cancel-path timeout."""

    path: str
    name: str
    timeouts: frozenset[str]
    mock_clock: bool


@dataclass(frozen=True)
class Census:
    tests: tuple[TimedTest, ...]

    @property
    def on_mock_clock(self) -> int:
        return sum(t.mock_clock for t in self.tests)

    @property
    def share(self) -> float:
        """The share on MockClock, 0..1 (1 when no test times the path)."""
        return self.on_mock_clock / len(self.tests) if self.tests else 1.0

    def real_time(self) -> list[TimedTest]:
        return [t for t in self.tests if not t.mock_clock]


@dataclass
class _Facts:
    """What one definition says by itself, and the module-level names it uses."""

    timeouts: set[str]
    clock: bool
    refs: set[str]
    #: It calls ``trio.run``: without it a plain ``def`` test waits on no
    #: clock (a rule table reading the timeouts' names).
    runs: bool = False


def _facts(node: ast.AST, args: Iterable[str] = ()) -> _Facts:
    facts = _Facts(set(), False, set(args))
    facts.clock = bool(CLOCK_FIXTURES & facts.refs)
    for sub in ast.walk(node):
        if isinstance(sub, ast.keyword) and sub.arg in CANCEL_TIMEOUTS:
            facts.timeouts.add(sub.arg)
        elif isinstance(sub, ast.Constant) and sub.value in CANCEL_TIMEOUTS:
            facts.timeouts.add(str(sub.value))
        elif isinstance(sub, ast.Attribute) and sub.attr in CANCEL_TIMEOUTS:
            facts.timeouts.add(sub.attr)
        elif isinstance(sub, ast.Name):
            facts.refs.add(sub.id)
        elif isinstance(sub, ast.Call) and _is_mock_clock(sub.func):
            facts.clock = True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                sub.func.attr == "run" and isinstance(sub.func.value, ast.Name) and \
                sub.func.value.id == "trio":
            facts.runs = True
    return facts


def _is_mock_clock(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "MockClock") or (
        isinstance(func, ast.Attribute) and func.attr == "MockClock")


def _arg_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    return [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


def _definitions(tree: ast.Module) -> dict[str, _Facts]:
    """Each module-level function, class or assigned name, with its facts."""
    defs: dict[str, _Facts] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs[node.name] = _facts(node, _arg_names(node))
        elif isinstance(node, ast.ClassDef):
            defs[node.name] = _facts(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    defs[target.id] = _facts(node)
    return defs


def _closure(start: _Facts, defs: dict[str, _Facts], own: str) -> _Facts:
    """``start`` with the facts of every module-level name it reaches."""
    out = _Facts(set(start.timeouts), start.clock, set(), start.runs)
    seen = {own}
    todo = list(start.refs)
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        facts = defs[name]
        out.timeouts |= facts.timeouts
        out.clock = out.clock or facts.clock
        out.runs = out.runs or facts.runs
        todo.extend(facts.refs)
    return out


def _tests(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name.startswith("test_"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                        item.name.startswith("test_"):
                    yield f"{node.name}.{item.name}", item


def census(dirs: Iterable[Path]) -> Census:
    """The timed tests of every ``test_*.py`` under ``dirs``."""
    found: list[TimedTest] = []
    for directory in dirs:
        for path in sorted(directory.rglob("test_*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            defs = _definitions(tree)
            for name, fn in _tests(tree):
                facts = _closure(_facts(fn, _arg_names(fn)), defs, fn.name)
                waits = isinstance(fn, ast.AsyncFunctionDef) or facts.runs
                if facts.timeouts and waits:
                    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                    found.append(TimedTest(str(rel), name, frozenset(facts.timeouts),
                                           facts.clock))
    return Census(tuple(found))


def collected_cases(dirs: Iterable[Path]) -> dict[str, int]:
    """How many cases pytest collects for each test (``path::name``): one per
    parameter set.  Runs ``pytest --collect-only`` (nothing is executed)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         *map(str, dirs)], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    cases: dict[str, int] = {}
    for line in out.splitlines():
        if "::" in line:
            test = line.strip().split("[", 1)[0]
            cases[test] = cases.get(test, 0) + 1
    return cases


def main(argv: list[str]) -> int:
    """``[--cases] [DIR ...]``: with ``--cases``, parametrized cases are counted too."""
    count_cases = "--cases" in argv
    dirs = [Path(a).resolve() for a in argv if a != "--cases"] or [ROOT / "tests" / "supervisor"]
    result = census(dirs)
    for test in result.tests:
        mark = "mock" if test.mock_clock else "REAL"
        print(f"{mark}  {test.path}::{test.name}  ({', '.join(sorted(test.timeouts))})")
    print(f"{result.on_mock_clock} of {len(result.tests)} cancel-path timeout tests "
          f"on MockClock ({result.share:.0%})")
    if count_cases:
        cases = collected_cases(dirs)
        n = [cases.get(f"{t.path}::{t.name}", 0) for t in result.tests]
        virtual = sum(c for c, t in zip(n, result.tests, strict=True) if t.mock_clock)
        total = sum(n)
        print(f"{virtual} of {total} collected cases on MockClock "
              f"({virtual / total if total else 1.0:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

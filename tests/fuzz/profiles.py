"""The Hypothesis profiles, one definition for every suite that fuzzes.

``ci`` (the default): 200 examples per property.  With the properties of
tests/fuzz (each takes a share, see ``examples``) and tests/protocols that
is a few thousand examples per CI run.  ``long`` (``--hypothesis-profile=long``):
30 000 per property, tens of thousands for a nightly-style run.

tests/protocols/conftest.py registers the same two names with the same
values (keep them in step), so in a run of both suites the order in which the
conftests load does not matter.  (Hypothesis has a built-in "ci" profile too:
it is replaced.)  New suites should call ``register`` from here.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

CI_EXAMPLES = 200
LONG_EXAMPLES = 30_000

#: Every phase but ``explain``: it re-parses the test's source with ``ast``,
#: which CPython 3.11 can fail ("AST constructor recursion depth mismatch")
#: when the property runs in a worker thread, as the server fuzzers do.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)


def register() -> None:
    # deadline=None: on a shared 2-core machine a single slow example is not a bug.
    settings.register_profile("ci", max_examples=CI_EXAMPLES, deadline=None)
    settings.register_profile(
        "long",
        max_examples=LONG_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    # Loaded before pytest_configure when tests/fuzz is on the command line: an
    # explicit --hypothesis-profile is applied after this, so only pick "ci"
    # when nobody chose a profile (or Hypothesis picked its own "ci" because
    # $CI is set: ours replaces it).
    if settings.get_current_profile_name() in ("default", "ci"):
        settings.load_profile("ci")


def examples(share: float = 1.0) -> int:
    """This property's number of examples: ``share`` times the current profile's."""
    current = settings.default
    assert current is not None  # a profile is always loaded (above)
    return max(20, int(current.max_examples * share))

"""The Hypothesis profiles, one definition for every suite that fuzzes.

``ci`` (the default): 300 examples per property — with the properties of
tests/fuzz and tests/protocols that is a few thousand examples per CI run.
``long`` (``pytest --hypothesis-profile=long``): 30 000 per property, tens of
thousands for a nightly-style run.  tests/protocols/conftest.py registers the
same two names with the same values, so whichever conftest loads first, the
profiles are the same; this module is the one place new suites should use.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings

CI_EXAMPLES = 300
LONG_EXAMPLES = 30_000


def register() -> None:
    # deadline=None: on a shared 2-core machine a single slow example is not a bug.
    settings.register_profile("ci", max_examples=CI_EXAMPLES, deadline=None)
    settings.register_profile(
        "long",
        max_examples=LONG_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    # Loaded before pytest_configure: an explicit --hypothesis-profile is applied
    # after this, so only pick "ci" when nobody chose a profile.
    if settings.get_current_profile_name() == "default":
        settings.load_profile("ci")


#: Every phase but ``explain``: it re-parses the test's source with ``ast``,
#: which CPython 3.11 can fail ("AST constructor recursion depth mismatch")
#: when the property runs in a worker thread, as the server fuzzers do.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)


def examples(fraction: float = 1.0) -> int:
    """This property's share of the current profile's examples (at least 20)."""
    return max(20, int(settings.default.max_examples * fraction))

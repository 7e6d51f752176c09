"""What a launch records and what a re-attach finds changed (executors/launch_record.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from supervisor.executors.launch_record import (
    KUBE_FIELDS,
    SSH_FIELDS,
    RecordFiles,
    changed,
    record,
)
from supervisor.profiles import AgentProfile, KubeSettings, parse_profiles

SECRET = "sk-live-0123456789abcdef"


def profile() -> AgentProfile:
    return parse_profiles({"k": {
        "protocol": "acp", "executor": "kubernetes", "image": "localhost/a:1",
        "command": ["agent", "--x"], "env": {"API_KEY": SECRET},
        "resources": {"limits": {"memory": "1Gi"}}}})["k"]


def test_the_same_profile_changes_nothing_and_the_record_holds_no_value() -> None:
    p = profile()
    text = record(p, KUBE_FIELDS)
    assert changed(text, p, KUBE_FIELDS) == ()
    assert sorted(json.loads(text)) == sorted(KUBE_FIELDS)
    assert SECRET not in text and "localhost/a:1" not in text


@pytest.mark.parametrize(("change", "names"), [
    ({"image": "localhost/a:2"}, ("image",)),
    ({"command": ("agent", "--y")}, ("command",)),
    ({"env": {"API_KEY": "another"}}, ("env",)),
    ({"image": "localhost/b:1", "env": {}}, ("image", "env")),
    ({"offline_cancel_s": 30.0}, ("offline_cancel_s",)),
    ({"kube": KubeSettings(resources={"limits": {"memory": "2Gi"}})}, ("resources",)),
])
def test_each_launch_setting_that_changed_is_named(change: dict[str, object],
                                                   names: tuple[str, ...]) -> None:
    p = profile()
    text = record(p, KUBE_FIELDS)
    assert changed(text, dataclasses.replace(p, **change), KUBE_FIELDS) == names  # type: ignore[arg-type]


def test_what_does_not_make_another_agent_is_not_compared() -> None:
    p = profile()
    text = record(p, SSH_FIELDS)
    # An ssh run has no image: a changed one is not its change.
    assert changed(text, dataclasses.replace(p, image="localhost/z:9", cwd="/elsewhere"),
                   SSH_FIELDS) == ()
    assert changed(text, dataclasses.replace(p, sandbox="none"), SSH_FIELDS) == ("sandbox",)


@pytest.mark.parametrize("recorded", [None, "", "not json", "[1, 2]", "{}"])
def test_no_record_or_a_bad_one_says_nothing(recorded: str | None) -> None:
    p = profile()
    assert changed(recorded, dataclasses.replace(p, image="localhost/other:1"),
                   KUBE_FIELDS) == ()


def test_record_files_keep_one_record_per_run(tmp_path: Path) -> None:
    files = RecordFiles(tmp_path / "records")
    assert files.load("inst/one") is None
    files.save("inst/one", "a")
    files.save("inst/two", "b")
    files.save("inst/one", "c")
    assert (files.load("inst/one"), files.load("inst/two")) == ("c", "b")
    assert (tmp_path / "records").stat().st_mode & 0o777 == 0o700
    files.forget("inst/one")
    files.forget("inst/one")
    assert (files.load("inst/one"), files.load("inst/two")) == (None, "b")

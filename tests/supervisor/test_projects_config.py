"""``[projects]`` in turnvisor.toml (DESIGN.md §12): roots resolved, the start
directory by default, bad values refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.config import Config, ConfigError


def test_the_default_root_is_the_start_directory(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "start").mkdir()
    monkeypatch.chdir(tmp_path / "start")  # (a sibling of the data dir, not its parent)
    cfg = Config.from_mapping(tmp_path / "data", {})
    assert cfg.projects.roots == ((tmp_path / "start").resolve(),)
    assert cfg.projects.checkpoints is True and cfg.projects.before_turn_s == 5.0


def test_roots_are_resolved_with_links_followed(tmp_path: Path) -> None:
    real = tmp_path / "src"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    # (A relative root is relative to the data dir, so it must climb out of it.)
    cfg = Config.from_mapping(tmp_path / "data",
                              {"projects": {"roots": [str(tmp_path / "link"), "../src"],
                                            "checkpoints": False}})
    assert cfg.projects.roots == (real.resolve(), real.resolve())
    assert cfg.projects.checkpoints is False


@pytest.mark.parametrize(("raw", "says"), [
    ({"roots": []}, "non-empty list"),
    ({"roots": "/tmp"}, "non-empty list"),
    ({"roots": ["/no/such/dir"]}, "is not a directory"),
    ({"root": ["/tmp"]}, "unknown key(s) root"),
    ({"checkpoints": "yes"}, "true or false"),
    ({"before_turn_s": 0}, "positive number"),
])
def test_bad_values_are_refused_by_name(tmp_path: Path, raw: dict[str, object],
                                        says: str) -> None:
    with pytest.raises(ConfigError, match=r"\[projects\]") as err:
        Config.from_mapping(tmp_path, {"projects": raw})
    assert says in str(err.value)

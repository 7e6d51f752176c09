"""``[mcp_servers.NAME]`` of turnvisor.toml (supervisor/mcp_servers.py) as a table: what is
taken, what is refused (one ConfigError line naming the server), and which launches a
server applies to (its profiles and projects)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from protocols.mcp import McpServer
from supervisor.config import Config, ConfigError
from supervisor.models import Task


def load(tmp_path: Path, toml: str) -> Config:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (tmp_path / "app" / "sub").mkdir(parents=True, exist_ok=True)
    (tmp_path / "other").mkdir(exist_ok=True)
    (data / "turnvisor.toml").write_text(toml)
    return Config.load(data, project_roots=[str(tmp_path / "app")])


@pytest.mark.parametrize(("toml", "server"), [
    ('[mcp_servers.files]\ncommand = "/usr/bin/files-mcp"',
     McpServer(name="files", kind="stdio", command="/usr/bin/files-mcp")),
    ('[mcp_servers.files]\ncommand = ["/usr/bin/files-mcp", "--ro"]\nargs = ["-v"]\n'
     'env = { LOG = "debug" }',
     McpServer(name="files", kind="stdio", command="/usr/bin/files-mcp", args=("--ro", "-v"),
               env={"LOG": "debug"})),
    ('[mcp_servers.docs]\ntype = "http"\nurl = "https://mcp.example/mcp"\n'
     'headers = { Authorization = "Bearer t" }',
     McpServer(name="docs", kind="http", url="https://mcp.example/mcp",
               headers={"Authorization": "Bearer t"})),
    ('[mcp_servers.ev-1]\ntype = "sse"\nurl = "http://127.0.0.1:9/sse"',
     McpServer(name="ev-1", kind="sse", url="http://127.0.0.1:9/sse")),
])
def test_taken(tmp_path: Path, toml: str, server: McpServer) -> None:
    [entry] = load(tmp_path, toml).mcp_servers
    assert entry.server == server
    assert (entry.profiles, entry.projects) == ((), ())


@pytest.mark.parametrize(("toml", "says"), [
    ("mcp_servers = 3", "[mcp_servers] must hold tables"),
    ("[mcp_servers]\nfiles = 1", "[mcp_servers.files] must be a table"),
    ('[mcp_servers."a.b"]\ncommand = "/x"', "[mcp_servers.a.b]: a name is letters"),
    ("[mcp_servers.files]\nargs = []", "[mcp_servers.files] needs command"),
    ('[mcp_servers.files]\ncommand = []', "[mcp_servers.files] needs command"),
    ('[mcp_servers.files]\ncommand = "files-mcp"', "must be an absolute path"),
    ('[mcp_servers.files]\ncommand = "/x"\nargs = "-v"', "[mcp_servers.files] args must be a list"),
    ('[mcp_servers.files]\ncommand = "/x"\nenv = { N = 1 }', "[mcp_servers.files] env must be a "
     "table of strings"),
    ('[mcp_servers.files]\ncommand = "/x"\nurl = "https://a"', "unknown key(s) for a stdio "
     "server: url"),
    ('[mcp_servers.docs]\ntype = "http"', '[mcp_servers.docs] needs url = "http(s)://'),
    ('[mcp_servers.docs]\ntype = "http"\nurl = "ftp://a"', "needs url"),
    ('[mcp_servers.docs]\ntype = "http"\nurl = "https://a"\ncommand = "/x"',
     "unknown key(s) for a http server: command"),
    ('[mcp_servers.docs]\ntype = "ws"\nurl = "https://a"', 'type must be "stdio", "http" or '
     '"sse", not \'ws\''),
    ('[mcp_servers.docs]\ntype = "sse"\nurl = "https://a"\nheaders = ["a"]', "headers must be"),
    ('[mcp_servers.files]\ncommand = "/x"\nprofiles = ["nope"]', "unknown agent profile 'nope'"),
    ('[mcp_servers.files]\ncommand = "/x"\nprofiles = "mock"', "profiles must be a list"),
    ('[mcp_servers.files]\ncommand = "/x"\nprojects = ["missing"]', "'missing' is not a "
     "directory"),
])
def test_refused(tmp_path: Path, toml: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, toml)
    assert says in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_command_in_the_data_dir_is_refused(tmp_path: Path) -> None:
    # Every agent's sandbox hides the data dir: the agent could not start it.
    command = tmp_path / "data" / "bin" / "mcp"
    with pytest.raises(ConfigError, match="lies in the data dir, which every agent's sandbox"):
        load(tmp_path, f'[mcp_servers.files]\ncommand = "{command}"')


def _task(project: Path | None) -> Task:
    return Task(id="t", workspace_id="default", title="t", created_at="", updated_at="",
                project_dir=str(project) if project else None)


def test_where_a_server_applies(tmp_path: Path) -> None:
    app = tmp_path / "app"
    config = load(tmp_path, f"""
[mcp_servers.everywhere]
command = "/bin/true"
[mcp_servers.codex_only]
command = "/bin/true"
profiles = ["mock-codex"]
[mcp_servers.app_only]
type = "http"
url = "https://a/mcp"
projects = ["{app}"]
[mcp_servers.both]
type = "http"
url = "https://b/mcp"
profiles = ["mock"]
projects = ["../app"]
""")
    other = str(tmp_path / "other")

    def names(profile: str, cwd: str, task: Task | None) -> list[str]:
        return [s.name for s in config.mcp_for(profile, cwd, task)]

    assert names("mock", other, None) == ["everywhere"]
    assert names("mock-codex", other, None) == ["everywhere", "codex_only"]
    # The project: the task's directory (a session in a worktree elsewhere still has it) ...
    assert names("mock", other, _task(app)) == ["everywhere", "app_only", "both"]
    assert names("mock-acp2", other, _task(app)) == ["everywhere", "app_only"]
    # ... else the session's cwd; a directory inside the project is in it.
    assert names("mock", str(app / "sub"), None) == ["everywhere", "app_only", "both"]
    assert names("mock", str(app / "sub"), _task(None)) == ["everywhere", "app_only", "both"]
    assert names("mock-codex", str(tmp_path / "app2"), None) == ["everywhere", "codex_only"]


def test_no_section_no_servers(tmp_path: Path) -> None:
    config = load(tmp_path, "")
    assert config.mcp_servers == ()
    assert config.mcp_for("mock", str(tmp_path), None) == ()


def test_readme_example_parses(tmp_path: Path) -> None:
    # The README's commented [mcp_servers.example], uncommented, is a valid config.
    lines = [line.strip() for line in
             (Path(__file__).parents[2] / "README.md").read_text().splitlines()]
    start = lines.index("# [mcp_servers.example]")
    block: list[str] = []
    for line in lines[start:]:
        if not line.startswith("# "):
            break
        block.append(line.removeprefix("# "))
    raw: dict[str, Any] = tomllib.loads("\n".join(block))
    [entry] = Config.from_mapping(tmp_path, raw).mcp_servers
    assert entry.server.name == "example"
    assert entry.server.command == "/usr/local/bin/example-mcp"
    assert entry.profiles == ("claude", "codex")

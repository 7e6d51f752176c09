"""MCP servers on the wire without a process (DESIGN.md §19): ACP's ``mcpServers`` of
``session/new`` / ``session/load`` / ``session/resume`` in the schema's shapes, only the
kinds the agent's ``mcpCapabilities`` allow (a refusal names the server, before anything
is written); Codex's ``config`` overrides of ``thread/start`` / ``thread/resume``."""

from __future__ import annotations

from typing import Any

import pytest

from protocols.acp import AcpClient
from protocols.codex import CodexClient
from protocols.jsonrpc import Dialect, IncomingRequest
from protocols.mcp import McpServer, McpUnsupported, acp_kinds, codex_config

from .helpers import ConnectionPair, parse_lines

STDIO = McpServer(name="files", kind="stdio", command="/usr/bin/files-mcp",
                  args=("--root", "/w"), env={"LOG": "debug"})
HTTP = McpServer(name="docs", kind="http", url="https://mcp.example/mcp",
                 headers={"Authorization": "Bearer t"})
SSE = McpServer(name="events", kind="sse", url="https://mcp.example/sse")

STDIO_V1 = {"name": "files", "command": "/usr/bin/files-mcp", "args": ["--root", "/w"],
            "env": [{"name": "LOG", "value": "debug"}]}
HTTP_ACP = {"type": "http", "name": "docs", "url": "https://mcp.example/mcp",
            "headers": [{"name": "Authorization", "value": "Bearer t"}]}


def initialized(version: int, caps: dict[str, Any], *servers: McpServer,
                ) -> ConnectionPair[AcpClient]:
    p = ConnectionPair(AcpClient(acp_version=2 if version == 2 else 1), Dialect.JSONRPC2)
    [init] = p.to_agent(p.client.initialize()[1])
    assert isinstance(init, IncomingRequest) and init.id == 1
    answer: dict[str, Any] = ({"protocolVersion": 2, "info": {"name": "a"},
                               "capabilities": caps} if version == 2 else
                              {"protocolVersion": 1, "agentCapabilities": caps})
    p.to_client(p.agent.send_response(init.id, answer))
    p.client.mcp_servers = servers
    return p


@pytest.mark.parametrize(("version", "caps", "kinds"), [
    (1, {}, {"stdio"}),
    (1, {"mcpCapabilities": {"http": True, "sse": False}}, {"stdio", "http"}),
    (1, {"mcpCapabilities": {"http": True, "sse": True}}, {"stdio", "http", "sse"}),
    (1, {"mcpCapabilities": {"http": "yes"}}, {"stdio"}),
    (2, {}, {"stdio"}),
    (2, {"session": {"mcp": {"stdio": {}, "http": {}}}}, {"stdio", "http"}),
    (2, {"session": {"mcp": {"http": None}}}, {"stdio"}),
    # v1's shape under v2 is not v2's capability.
    (2, {"mcpCapabilities": {"http": True, "sse": True}}, {"stdio"}),
])
def test_kinds_from_capabilities(version: int, caps: dict[str, Any], kinds: set[str]) -> None:
    assert acp_kinds(caps, version) == kinds


def test_claude_agent_acp_advertises_http_and_sse() -> None:
    # Its initialize answer (tests/fixtures/agent-transcripts/claude_agent_acp_0.101.0.jsonl).
    caps = {"loadSession": True, "mcpCapabilities": {"http": True, "sse": True}}
    assert acp_kinds(caps, 1) == {"stdio", "http", "sse"}


@pytest.mark.parametrize("version", [1, 2])
def test_session_new_carries_the_servers(version: int) -> None:
    caps: dict[str, Any] = ({"session": {"mcp": {"http": {}}}} if version == 2
                            else {"mcpCapabilities": {"http": True}})
    p = initialized(version, caps, STDIO, HTTP)
    [line] = parse_lines(p.client.new_session("/w")[1])
    stdio = {"type": "stdio", **STDIO_V1} if version == 2 else STDIO_V1
    assert line["method"] == "session/new"
    assert line["params"] == {"cwd": "/w", "mcpServers": [stdio, HTTP_ACP]}


def test_no_servers_is_an_empty_list() -> None:
    [line] = parse_lines(initialized(1, {}).client.new_session("/w")[1])
    assert line["params"]["mcpServers"] == []


@pytest.mark.parametrize(("version", "caps", "server"), [
    (1, {}, HTTP),
    (1, {"mcpCapabilities": {"http": True, "sse": False}}, SSE),
    (2, {"session": {"mcp": {"http": {}}}}, SSE),
])
def test_a_kind_not_advertised_is_refused_naming_it(version: int, caps: dict[str, Any],
                                                    server: McpServer) -> None:
    p = initialized(version, caps, STDIO, server)
    with pytest.raises(McpUnsupported) as refused:
        p.client.new_session("/w")
    message = str(refused.value)
    assert f"MCP server {server.name!r} is {server.kind}" in message
    assert "\n" not in message
    # Nothing was written, no request begun: the next one is the first after initialize's.
    p.client.mcp_servers = (STDIO,)
    [again] = p.to_agent(p.client.new_session("/w")[1])
    assert isinstance(again, IncomingRequest) and again.id == 2


def test_load_and_resume_carry_the_servers() -> None:
    caps = {"loadSession": True, "sessionCapabilities": {"resume": {}},
            "mcpCapabilities": {"http": True}}
    p = initialized(1, caps, STDIO, HTTP)
    [load] = parse_lines(p.client.load_session("s1", "/w")[1])
    assert load["params"]["mcpServers"] == [STDIO_V1, HTTP_ACP]
    p2 = initialized(1, caps, HTTP)
    [resume] = parse_lines(p2.client.resume_session("s1", "/w")[1])
    assert resume["method"] == "session/resume"
    assert resume["params"]["mcpServers"] == [HTTP_ACP]


def test_a_refused_restore_names_the_server() -> None:
    p = initialized(1, {"sessionCapabilities": {"resume": {}}}, SSE)
    with pytest.raises(McpUnsupported, match="'events' is sse"):
        p.client.resume_session("s1", "/w")


def test_codex_thread_config() -> None:
    config = codex_config([STDIO, HTTP])
    assert config == {
        "mcp_servers.files.command": "/usr/bin/files-mcp",
        "mcp_servers.files.args": ["--root", "/w"],
        "mcp_servers.files.env": {"LOG": "debug"},
        "mcp_servers.docs.url": "https://mcp.example/mcp",
        "mcp_servers.docs.http_headers": {"Authorization": "Bearer t"},
    }
    core = CodexClient()
    [start] = parse_lines(core.thread_start("/w", config=config)[1])
    assert start["method"] == "thread/start"
    assert start["params"]["config"] == config
    [resume] = parse_lines(CodexClient().thread_resume("t1", "/w", config=config)[1])
    assert resume["params"]["config"] == config


def test_codex_refuses_sse() -> None:
    with pytest.raises(McpUnsupported, match="'events' is sse, which Codex does not take"):
        codex_config([STDIO, SSE])

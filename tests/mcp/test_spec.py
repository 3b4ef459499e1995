"""Reading MCP server configuration in the ``.mcp.json`` shape (ra.mcp.spec)."""

from __future__ import annotations

import json

import pytest

from ra.mcp.spec import (
    HttpServer,
    McpConfigError,
    ServerProblem,
    StdioServer,
    load_mcp_config,
    parse_mcp_servers,
)


def test_claude_code_file_shape_reads_unchanged(tmp_path):
    path = tmp_path / ".mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}"]},
                    "remote": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"X-Key": "${KEY}"}},
                    "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
                    "off": {"command": "x", "disabled": True},
                }
            }
        )
    )
    servers = load_mcp_config(path, environ={"HOME": "/home/u", "KEY": "k1"})
    assert servers["fs"] == StdioServer("npx", ("-y", "@modelcontextprotocol/server-filesystem", "/home/u"))
    assert servers["remote"] == HttpServer("https://mcp.example.com/mcp", {"X-Key": "k1"})
    assert servers["old"].transport == "sse"
    assert "off" not in servers


def test_variables_defaults_and_unset():
    servers = parse_mcp_servers(
        {"a": {"command": "c", "env": {"T": "${T:-fallback}"}}, "b": {"command": "${MISSING}"}}, environ={}
    )
    assert servers["a"].env == {"T": "fallback"}
    assert isinstance(servers["b"], ServerProblem) and "${MISSING}" in servers["b"].message


def test_a_typo_is_a_problem_not_silence():
    servers = parse_mcp_servers({"a": {"comand": "x"}}, environ={})
    assert isinstance(servers["a"], ServerProblem)
    assert "comand" in servers["a"].message


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "ws", "url": "ws://x"},
        {"type": "http", "url": "file:///etc/passwd"},
        {"command": ""},
        {"command": "x", "args": "a b"},
        {"command": "x", "timeout": -1},
    ],
)
def test_unusable_entries(entry):
    assert isinstance(parse_mcp_servers({"s": entry}, environ={})["s"], ServerProblem)


@pytest.mark.parametrize("data", [[], {"mcpServers": []}, {"mcpServers": {"a": "cmd"}}, {"mcpServers": {}, "other": 1}])
def test_wrong_shapes_are_refused(data):
    with pytest.raises(McpConfigError):
        parse_mcp_servers(data, environ={})


def test_not_json_names_the_place(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"mcpServers": {,}}')
    with pytest.raises(McpConfigError, match=r"bad.json: not valid JSON \(line 1"):
        load_mcp_config(path)


def test_secrets_stay_out_of_repr():
    spec = parse_mcp_servers(
        {
            "a": {"command": "c", "env": {"TOKEN": "s3cret"}},
            "b": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer s3cret"}},
        },
        environ={},
    )
    assert "s3cret" not in repr(spec)

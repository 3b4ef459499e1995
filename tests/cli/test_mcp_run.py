"""MCP servers in a ``ra`` run: the real command against the scripted Chat Completions server on
127.0.0.1, with a real MCP server over stdio (tests/cli/mcp_servers/notes.py). The model calls a
server's tool; rules and modes naming ``mcp__`` tools take effect; a server that cannot start is
a warning; stream-json's init message lists the servers; secrets in a server's env or headers
appear in no output; no server outlives the run; an untrusted project's .mcp.json runs nothing."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.support import (
    chat_requests,
    clean_env,
    enqueue_text,
    enqueue_tools,
    jsonl,
    mcp_json,
    run_ra,
    tool_messages,
)
from tests.cli.support import (
    notes_server as notes,
)
from tests.support.replay import ReplayServer

#: Real servers started per test: the slow lane (`pytest -m slow`), which CI runs.
pytestmark = pytest.mark.slow


def args(server: ReplayServer, *extra: str) -> list[str]:
    return ["--base-url", f"{server.base_url}/v1", "--model", "m", *extra]


def offered(server: ReplayServer) -> list[str]:
    """The tool names the first model call offered."""
    return [t["function"]["name"] for t in chat_requests(server)[0]["tools"]]


def test_the_model_calls_an_mcp_tool_through_ra(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "mcp__notes__echo", {"text": "hello"}))
    enqueue_text(replay_server, "it said hello")
    result = run_ra(args(replay_server, "--mcp-config", mcp_json(notes=notes()), "echo hello"), clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "it said hello"
    first = chat_requests(replay_server)[0]
    (echo,) = [t["function"] for t in first["tools"] if t["function"]["name"] == "mcp__notes__echo"]
    assert echo["description"] == "Say the text back."
    assert echo["parameters"]["properties"]["text"]["type"] == "string"  # the server's schema, passed through
    (answer,) = tool_messages(chat_requests(replay_server)[1])
    assert "notes says: hello" in answer["content"]
    assert "mcp__notes__echo" in result.stderr  # the call is shown like any other


def test_a_server_that_cannot_start_is_a_warning_and_the_run_goes_on(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_tools(replay_server, ("c1", "mcp__notes__echo", {"text": "still here"}))
    enqueue_text(replay_server, "done")
    servers = mcp_json(notes=notes(), gone={"command": str(tmp_path / "no-such-program")})
    result = run_ra(args(replay_server, "--mcp-config", servers, "go"), clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "warning" in line and "gone" in line]
    assert len(warnings) == 1, result.stderr
    assert "no-such-program" in warnings[0]
    assert "mcp__notes__echo" in offered(replay_server)
    assert not any(name.startswith("mcp__gone") for name in offered(replay_server))
    (answer,) = tool_messages(chat_requests(replay_server)[1])
    assert "notes says: still here" in answer["content"]


def test_a_config_entry_that_cannot_be_used_is_a_warning_naming_its_file(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_text(replay_server, "done")
    config = tmp_path / "ra.toml"
    config.write_text('[mcp_servers.needs]\ncommand = "x"\nenv = { TOKEN = "${RA_TEST_NOT_SET}" }\n')
    result = run_ra(args(replay_server, "go"), clean_env(tmp_path, RA_CONFIG=str(config)))
    assert result.returncode == 0, result.stderr
    assert "warning" in result.stderr and str(config) in result.stderr and "RA_TEST_NOT_SET" in result.stderr


@pytest.mark.parametrize(
    "rule", ["mcp__notes", "mcp__notes__touch", "mcp__*", "mcp__notes__*", "mcp__notes__touch(*touched)"]
)
def test_a_deny_rule_on_mcp_tools_blocks_the_call(replay_server: ReplayServer, tmp_path: Path, rule: str) -> None:
    marker = tmp_path / "touched"
    enqueue_tools(replay_server, ("c1", "mcp__notes__touch", {"path": str(marker)}))
    enqueue_text(replay_server, "done")
    result = run_ra(
        args(replay_server, "--mcp-config", mcp_json(notes=notes()), "--disallowed-tools", rule, "touch it"),
        clean_env(tmp_path),
    )
    assert not marker.exists(), f"{rule} did not stop the call"
    assert result.returncode == 0, result.stderr
    (answer,) = tool_messages(chat_requests(replay_server)[1])
    assert "created" not in answer["content"]


def test_a_deny_rule_on_one_server_leaves_another_alone(replay_server: ReplayServer, tmp_path: Path) -> None:
    denied, allowed = tmp_path / "denied", tmp_path / "allowed"
    enqueue_tools(replay_server, ("c1", "mcp__a__touch", {"path": str(denied)}))
    enqueue_tools(replay_server, ("c2", "mcp__b__touch", {"path": str(allowed)}))
    enqueue_text(replay_server, "done")
    servers = mcp_json(a=notes("a"), b=notes("b"))
    result = run_ra(
        args(replay_server, "--mcp-config", servers, "--disallowed-tools", "mcp__a", "go"), clean_env(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    assert not denied.exists() and allowed.exists()
    (refused,) = tool_messages(chat_requests(replay_server)[1])
    assert "Denied by the rule 'mcp__a'" in refused["content"]


def test_default_mode_denies_an_mcp_tool_without_a_terminal_and_an_allow_rule_lets_it_run(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    marker = tmp_path / "touched"
    for _ in range(2):
        enqueue_tools(replay_server, ("c1", "mcp__notes__touch", {"path": str(marker)}))
        enqueue_text(replay_server, "done")
    servers = mcp_json(notes=notes())
    asked = run_ra(
        args(replay_server, "--mcp-config", servers, "--permission-mode", "default", "go"), clean_env(tmp_path)
    )
    assert asked.returncode == 0, asked.stderr
    assert not marker.exists()
    assert "mcp__notes__touch" in asked.stderr and "--allowed-tools" in asked.stderr
    allowed = run_ra(
        args(replay_server, "--mcp-config", servers, "--allowed-tools", "mcp__notes__touch", "go"),
        clean_env(tmp_path),
    )
    assert allowed.returncode == 0, allowed.stderr
    assert marker.exists()


def test_plan_mode_runs_a_read_only_mcp_tool_and_refuses_an_unannotated_one(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    marker = tmp_path / "touched"
    enqueue_tools(replay_server, ("c1", "mcp__notes__peek", {}))
    enqueue_tools(replay_server, ("c2", "mcp__notes__touch", {"path": str(marker)}))
    enqueue_text(replay_server, "done")
    result = run_ra(
        args(replay_server, "--mcp-config", mcp_json(notes=notes()), "--permission-mode", "plan", "look"),
        clean_env(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert not marker.exists()
    (peek,) = tool_messages(chat_requests(replay_server)[1])
    assert "nothing to see" in peek["content"]
    touch = tool_messages(chat_requests(replay_server)[2])[-1]
    assert touch["tool_call_id"] == "c2" and "plan" in touch["content"].lower()


def test_stream_json_init_lists_the_servers(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "done")
    servers = mcp_json(notes=notes(), gone={"command": str(tmp_path / "no-such-program")})
    result = run_ra(
        args(replay_server, "--mcp-config", servers, "--output-format", "stream-json", "go"), clean_env(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    (init,) = [m for m in jsonl(result.stdout) if m["type"] == "system" and m.get("subtype") == "init"]
    status = {s["name"]: s["status"] for s in init["mcp_servers"]}
    assert status == {"notes": "connected", "gone": "failed"}
    assert "mcp__notes__echo" in init["tools"]


def test_secrets_in_env_and_headers_appear_in_no_output(replay_server: ReplayServer, tmp_path: Path) -> None:
    secret_env, secret_header, secret_url = "sk-env-0123456789", "sk-header-9876543210", "sk-url-5555"
    servers = mcp_json(
        gone={"command": str(tmp_path / "missing"), "env": {"API_TOKEN": secret_env}},
        web={
            "type": "http",
            "url": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": f"Bearer {secret_header}"},
        },
        userinfo={"type": "http", "url": f"http://user:{secret_url}@127.0.0.1:9/mcp?key={secret_url}"},
        notes={**notes(), "env": {"API_TOKEN": secret_env}},
    )
    records = tmp_path / "sessions"
    trajectory = tmp_path / "trajectory.jsonl"
    outputs = (
        ["--debug"],
        ["--json"],
        ["--output-format", "stream-json", "--debug"],
        ["--output-trajectory", str(trajectory)],
    )
    for flags in outputs:
        enqueue_text(replay_server, "done")
        env = clean_env(tmp_path, RA_SESSIONS_DIR=str(records))
        result = run_ra(args(replay_server, "--mcp-config", servers, *flags, "go"), env)
        assert result.returncode == 0, result.stderr
        seen = result.stdout + result.stderr + (trajectory.read_text() if trajectory.exists() else "")
        assert "gone" in seen and "web" in seen and "userinfo" in seen
        for secret in (secret_env, secret_header, secret_url):
            assert secret not in seen, f"{secret} printed with {flags}"
    start = jsonl(trajectory.read_text())[0]
    assert start["type"] == "run_start"
    assert start["mcp_servers"] == dict.fromkeys(("gone", "web", "userinfo", "notes"), "--mcp-config JSON #1")
    recorded = "".join(p.read_text() for p in records.rglob("*") if p.is_file())
    assert recorded.count('"type":"session"') == len(outputs)  # each run was recorded ...
    for secret in (secret_env, secret_header, secret_url):
        assert secret not in recorded  # ... with no secret
    for body in chat_requests(replay_server):
        assert all(secret not in json.dumps(body) for secret in (secret_env, secret_header, secret_url))


def test_no_server_process_outlives_the_run(replay_server: ReplayServer, tmp_path: Path) -> None:
    pidfile = tmp_path / "server.pid"
    enqueue_tools(replay_server, ("c1", "mcp__notes__peek", {}))
    enqueue_text(replay_server, "done")
    servers = mcp_json(notes=notes("notes", "--pidfile", str(pidfile)))
    result = run_ra(args(replay_server, "--mcp-config", servers, "go"), clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_an_untrusted_projects_file_runs_nothing_and_a_trusted_ones_servers_are_offered(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    project = tmp_path / "cloned"
    project.mkdir()
    marker = tmp_path / "pwned"
    code = f"open({str(marker)!r}, 'w').close()"
    (project / ".mcp.json").write_text(
        mcp_json(evil={"command": sys.executable, "args": ["-c", code]}, proj=notes("proj"))
    )
    config = tmp_path / "ra.toml"
    config.write_text("")
    env = clean_env(tmp_path, RA_CONFIG=str(config))
    enqueue_text(replay_server, "done")
    untrusted = run_ra(args(replay_server, "go"), env, cwd=project)
    assert untrusted.returncode == 0, untrusted.stderr
    assert not marker.exists()
    assert "not trusted" in untrusted.stderr
    assert not any(name.startswith("mcp__") for name in offered(replay_server))
    # Trusted: its servers start (the evil one too: trust is the user's call).
    config.write_text(f'trusted_mcp_projects = ["{project}"]\n')
    enqueue_text(replay_server, "done")
    trusted = run_ra(args(replay_server, "go"), env, cwd=project)
    assert trusted.returncode == 0, trusted.stderr
    assert marker.exists()
    assert "mcp__proj__echo" in [t["function"]["name"] for t in chat_requests(replay_server)[1]["tools"]]


def test_a_flags_rule_naming_no_configured_server_is_refused_before_anything_runs(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    """A mistyped deny rule would deny nothing: refused (exit 2), as a flag's rule naming no tool is."""
    pidfile = tmp_path / "server.pid"
    servers = mcp_json(notes=notes("notes", "--pidfile", str(pidfile)))
    for flag in ("--disallowed-tools", "--allowed-tools"):
        result = run_ra(args(replay_server, "--mcp-config", servers, flag, "mcp__notse", "go"), clean_env(tmp_path))
        assert result.returncode == 2
        assert f"{flag}: the rule 'mcp__notse' names no configured MCP server (configured: notes)" in result.stderr
    assert not pidfile.exists() and chat_requests(replay_server) == []


def test_a_config_files_rule_naming_no_configured_server_is_a_warning(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_text(replay_server, "done")
    config = tmp_path / "ra.toml"
    config.write_text('disallowed_tools = ["mcp__github__create_issue", "mcp__*__delete"]\n')
    result = run_ra(
        args(replay_server, "--mcp-config", mcp_json(notes=notes()), "go"), clean_env(tmp_path, RA_CONFIG=str(config))
    )
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "names no configured MCP server" in x]
    assert "mcp__github__create_issue" in line and "configured: notes" in line


def test_server_names_are_matched_as_the_model_sees_them(replay_server: ReplayServer, tmp_path: Path) -> None:
    """Server ``my.notes`` serves ``mcp__my_notes__*``: a rule in that form is accepted and takes effect."""
    marker = tmp_path / "touched"
    enqueue_tools(replay_server, ("c1", "mcp__my_notes__touch", {"path": str(marker)}))
    enqueue_text(replay_server, "done")
    servers = mcp_json(**{"my.notes": notes("dotted")})
    result = run_ra(
        args(replay_server, "--mcp-config", servers, "--disallowed-tools", "mcp__my_notes", "go"), clean_env(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    assert not marker.exists()


def test_a_config_files_command_hook_matching_mcp_tools_denies_the_call(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    script = tmp_path / "guard.sh"
    seen = tmp_path / "hook-input.json"
    script.write_text(f"#!/bin/sh\ncat > {seen}\necho 'no MCP writes' >&2\nexit 2\n")
    script.chmod(0o755)
    marker = tmp_path / "touched"
    enqueue_tools(replay_server, ("c1", "mcp__notes__touch", {"path": str(marker)}))
    enqueue_text(replay_server, "ok")
    config = tmp_path / "ra.toml"
    config.write_text(
        "[[hooks.PreToolUse]]\n"
        'matcher = "mcp__notes__.*"\n'
        f'hooks = [{{ type = "command", command = "{script}", timeout = 10 }}]\n'
    )
    result = run_ra(
        args(replay_server, "--mcp-config", mcp_json(notes=notes()), "go"), clean_env(tmp_path, RA_CONFIG=str(config))
    )
    assert result.returncode == 0, result.stderr
    assert not marker.exists()
    (denied,) = tool_messages(chat_requests(replay_server)[1])
    assert "no MCP writes" in denied["content"]
    hook_input = json.loads(seen.read_text())
    assert hook_input["tool_name"] == "mcp__notes__touch"
    assert hook_input["tool_input"] == {"path": str(marker)}


def test_reference_servers_ra_did_not_write_run_through_ra(replay_server: ReplayServer, tmp_path: Path) -> None:
    """mcp-server-time (PyPI) and server-everything (npm) configured the way their READMEs tell
    Claude Code users to, driven by the real command: both listed, both tools called, their
    answers reach the model. server-everything is left out only where there is no node."""
    from tests.mcp.support import npm_everything

    servers: dict[str, Any] = {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}}
    calls = [
        ("c1", "mcp__time__convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
    ]
    everything = npm_everything()
    if everything is not None:
        servers["everything"] = {"command": everything[0], "args": everything[1:]}
        calls.append(("c2", "mcp__everything__echo", {"message": "from ra"}))
    for call in calls:  # the ra command runs one tool call per step
        enqueue_tools(replay_server, call)
    enqueue_text(replay_server, "done")
    result = run_ra(
        args(replay_server, "--mcp-config", mcp_json(**servers), "what time is it in Tokyo"), clean_env(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"
    answers = {m["tool_call_id"]: m["content"] for m in tool_messages(chat_requests(replay_server)[-1])}
    assert "21:00" in answers["c1"], answers  # noon UTC is 21:00 in Tokyo (no daylight saving there)
    if everything is not None:
        assert "from ra" in answers["c2"], answers

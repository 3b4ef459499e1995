"""ra-spec's invariants, checked on the wire: the real ``ra`` command against a scripted server."""

from __future__ import annotations

from pathlib import Path

from tests.cli.support import (
    chat_requests,
    clean_env,
    enqueue_text,
    enqueue_tools,
    jsonl,
    run_ra,
    tool_messages,
)
from tests.support.replay import ReplayServer

RA_TOOLS = ["shell_command", "read_file", "list_dir", "grep_files", "apply_patch"]
SAMPLING = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "frequency_penalty")


def _args(server: ReplayServer, *more: str) -> list[str]:
    return ["--base-url", f"{server.base_url}/v1", "--model", "test-model", *more]


def _tool_names(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def test_every_request_disables_parallel_calls_uses_auto_and_sends_no_sampling(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo one"}))
    enqueue_tools(replay_server, ("c2", "list_dir", {"dir_path": "."}))
    enqueue_text(replay_server, "finished")
    result = run_ra(_args(replay_server, "do it"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "finished\n"
    bodies = chat_requests(replay_server)
    assert len(bodies) == 3
    for body in bodies:
        assert body["parallel_tool_calls"] is False
        assert body["tool_choice"] == "auto"
        assert body["model"] == "test-model"
        for key in SAMPLING:
            assert key not in body, key
        assert "reasoning_effort" not in body
        # No web tools unless enabled; no submit tool unless submit mode.
        assert _tool_names(body) == RA_TOOLS


def test_sampling_parameters_are_sent_only_when_configured(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "ok")
    args = _args(replay_server, "--temperature", "0.2", "--top-p", "0.9", "--max-tokens", "321")
    args += ["--reasoning-effort", "low", "hello"]
    result = run_ra(args, clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (body,) = chat_requests(replay_server)
    assert body["temperature"] == 0.2
    assert body["top_p"] == 0.9
    assert body["max_tokens"] == 321
    assert body["reasoning_effort"] == "low"
    assert body["parallel_tool_calls"] is False


def test_web_tools_only_with_web_flag_and_submit_only_in_submit_mode(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_tools(replay_server, ("s1", "submit", {"answer": "42"}))
    result = run_ra(_args(replay_server, "--web", "--submit", "q"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (body,) = chat_requests(replay_server)
    assert _tool_names(body) == [*RA_TOOLS, "web_search", "web_open", "web_find", "submit"]
    params = {t["function"]["name"]: t["function"]["parameters"] for t in body["tools"]}
    assert set(params["web_search"]["properties"]) == {"query", "max_results"}
    assert set(params["web_open"]["properties"]) == {"url", "offset", "limit"}
    assert set(params["web_find"]["properties"]) == {"url", "pattern", "max_results", "context_lines"}
    assert params["submit"]["required"] == ["answer"]


def test_tool_parameters_have_ra_spec_names_and_bounds(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "ok")
    assert run_ra(_args(replay_server, "hi"), clean_env(tmp_path), cwd=tmp_path).returncode == 0
    (body,) = chat_requests(replay_server)
    params = {t["function"]["name"]: t["function"]["parameters"] for t in body["tools"]}
    assert set(params["shell_command"]["properties"]) == {"command", "workdir", "timeout_ms", "max_output_chars"}
    assert set(params["read_file"]["properties"]) == {"file_path", "offset", "limit"}
    assert set(params["list_dir"]["properties"]) == {"dir_path", "offset", "limit", "depth"}
    assert set(params["grep_files"]["properties"]) == {"pattern", "path", "include", "limit"}
    assert set(params["apply_patch"]["properties"]) == {"patch"}
    # 1-indexed offsets, limit/depth >= 1.
    assert params["read_file"]["properties"]["offset"]["minimum"] == 1
    assert params["read_file"]["properties"]["limit"]["minimum"] == 1
    assert params["list_dir"]["properties"]["depth"]["minimum"] == 1
    assert params["list_dir"]["properties"]["limit"]["minimum"] == 1


def test_only_the_first_tool_call_of_a_step_is_executed(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(
        replay_server,
        ("c1", "shell_command", {"command": "echo first > first.txt"}),
        ("c2", "shell_command", {"command": "echo second > second.txt"}),
        ("c3", "read_file", {"file_path": "first.txt"}),
    )
    enqueue_text(replay_server, "done")
    trajectory = tmp_path / "t.jsonl"
    args = _args(replay_server, "--output-trajectory", str(trajectory), "go")
    result = run_ra(args, clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "first.txt").read_text() == "first\n"
    assert not (tmp_path / "second.txt").exists()
    follow_up = chat_requests(replay_server)[1]
    results = tool_messages(follow_up)
    assert [m["tool_call_id"] for m in results] == ["c1", "c2", "c3"]
    assert "Exit code: 0" in results[0]["content"]
    for skipped in results[1:]:
        assert skipped["content"].startswith("Not executed")
        assert "at most 1 tool call" in skipped["content"]
    ends = [r for r in jsonl(trajectory.read_text()) if r["type"] == "tool_call_end"]
    assert [bool(r.get("skipped")) for r in ends] == [False, True, True]


def test_system_prompt_tool_list_environment_constraint_and_agents_md_chain(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    outer = tmp_path / "outer"
    inner = outer / "mid" / "inner"
    inner.mkdir(parents=True)
    (outer / "AGENTS.md").write_text("OUTER-RULE: use tabs\n")
    (outer / "mid" / "AGENTS.md").write_text("MIDDLE-RULE: write tests\n")
    (inner / "AGENTS.md").write_text("INNER-RULE: be brief\n")
    enqueue_text(replay_server, "ok")
    result = run_ra(_args(replay_server, "-C", str(inner), "the task"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (body,) = chat_requests(replay_server)
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == "the task"
    system = messages[0]["content"]
    assert "at most one tool call per step" in system
    assert f"Working directory: {inner}" in system
    for name in RA_TOOLS:
        assert f"- {name}:" in system
    # Outermost first, every directory of the chain.
    positions = [system.index(rule) for rule in ("OUTER-RULE", "MIDDLE-RULE", "INNER-RULE")]
    assert positions == sorted(positions)


def test_tool_outputs_are_bounded_for_the_model_but_complete_in_the_trajectory(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    command = "python3 -c \"print('x' * 200000)\""
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": command}))
    enqueue_text(replay_server, "done")
    trajectory = tmp_path / "t.jsonl"
    args = _args(replay_server, "--output-trajectory", str(trajectory), "big")
    result = run_ra(args, clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (message,) = tool_messages(chat_requests(replay_server)[1])
    assert len(message["content"]) < 40_000
    assert "truncated" in message["content"].lower()
    (end,) = [r for r in jsonl(trajectory.read_text()) if r["type"] == "tool_call_end"]
    assert end["output"].count("x") >= 200_000

"""Submit mode, --max-steps, --time-limit and context pruning, through the real command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ra.profiles.ra import CONTINUE_MESSAGE
from tests.cli.support import SSE, chat_requests, clean_env, enqueue_text, enqueue_tools, jsonl, run_ra, sse_tools
from tests.support.replay import ReplayServer

CONTEXT_ERROR = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. "
        "However, your messages resulted in 9100 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


def _args(server: ReplayServer, *more: str) -> list[str]:
    return ["--base-url", f"{server.base_url}/v1", "--model", "test-model", *more]


def test_submit_mode_continues_after_text_and_ends_with_the_submitted_answer(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_text(replay_server, "I think the answer is 42.")
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo checking"}))
    enqueue_tools(replay_server, ("s1", "submit", {"answer": "The answer is 42."}))
    result = run_ra(_args(replay_server, "--submit", "what is it?"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "The answer is 42.\n"
    bodies = chat_requests(replay_server)
    assert len(bodies) == 3
    second = bodies[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": "I think the answer is 42."}
    assert second[-1] == {"role": "user", "content": CONTINUE_MESSAGE}
    # The text-only reply was shown as progress, not as the answer.
    assert "I think the answer is 42." in result.stderr


def test_submit_as_first_call_ends_the_run_and_later_calls_are_not_executed(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    enqueue_tools(
        replay_server,
        ("s1", "submit", {"answer": "done early"}),
        ("c2", "shell_command", {"command": "touch should_not_exist"}),
    )
    result = run_ra(_args(replay_server, "--submit", "task"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "done early\n"
    assert not (tmp_path / "should_not_exist").exists()
    assert len(chat_requests(replay_server)) == 1


def test_without_submit_mode_a_text_reply_is_the_answer(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "plain answer")
    result = run_ra(_args(replay_server, "task"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == "plain answer\n"
    assert "plain answer" not in result.stderr  # only once, on stdout
    assert len(chat_requests(replay_server)) == 1


def test_max_steps_stops_with_exit_1(replay_server: ReplayServer, tmp_path: Path) -> None:
    for n in range(3):
        enqueue_tools(replay_server, (f"c{n}", "shell_command", {"command": f"echo {n}"}))
    result = run_ra(_args(replay_server, "--max-steps", "2", "loop"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(chat_requests(replay_server)) == 2
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("ra: error:")]
    assert error_lines == ["ra: error: step limit reached: 2 step(s) (--max-steps) without a final answer"]


def test_an_answer_cut_at_max_tokens_mid_tool_call_is_one_clear_line(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    """A model that keeps running past ``--max-tokens`` inside a tool call: the cut call never
    runs (the model is told and may retry smaller, a bounded number of times in a row), then the
    run ends with exit 1, status ``max_tokens`` and a line that names the limit (it was "the run
    stopped: max_tokens" before)."""
    from ra.agent.output_limit import MAX_CUT_RESPONSES

    cut = sse_tools(("c1", "write_file", {"file_path": "x.txt", "content": "a long"}))
    cut = cut.replace('"finish_reason": "tool_calls"', '"finish_reason": "length"')
    for _ in range(MAX_CUT_RESPONSES + 1):
        replay_server.enqueue(200, cut, SSE, chunking="events")
    trajectory = tmp_path / "t.jsonl"
    result = run_ra(
        _args(replay_server, "--max-tokens", "32", "--output-trajectory", str(trajectory), "write x"),
        clean_env(tmp_path),
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("ra: error:")]
    assert errors == [
        "ra: error: output token limit reached (32 tokens, --max-tokens): "
        "the answer was cut and its tool calls did not run"
    ]
    assert not (tmp_path / "x.txt").exists()
    assert len(chat_requests(replay_server)) == MAX_CUT_RESPONSES + 1
    [final] = [r for r in jsonl(trajectory.read_text()) if r["type"] == "result"]
    assert final["status"] == "max_tokens" and final["exit_code"] == 1


@pytest.mark.parametrize("where", ["config", "env"])
def test_the_step_limit_message_names_where_the_limit_was_set(
    replay_server: ReplayServer, tmp_path: Path, where: str
) -> None:
    for n in range(3):
        enqueue_tools(replay_server, (f"c{n}", "shell_command", {"command": f"echo {n}"}))
    config = tmp_path / "ra.toml"
    config.write_text("max_steps = 2\n" if where == "config" else "")
    env = clean_env(tmp_path, RA_CONFIG=str(config))
    if where == "env":
        env["RA_MAX_STEPS"] = "2"
    result = run_ra(_args(replay_server, "loop"), env, cwd=tmp_path)
    assert result.returncode == 1
    named = f"max_steps in {config}" if where == "config" else "RA_MAX_STEPS"
    assert f"ra: error: step limit reached: 2 step(s) ({named}) without a final answer" in result.stderr
    assert "--max-steps" not in result.stderr


def test_max_steps_in_submit_mode_counts_continue_steps(replay_server: ReplayServer, tmp_path: Path) -> None:
    for _ in range(3):
        enqueue_text(replay_server, "still thinking")
    result = run_ra(_args(replay_server, "--submit", "--max-steps", "3", "x"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 1
    assert len(chat_requests(replay_server)) == 3
    assert "step limit reached" in result.stderr


def test_time_limit_interrupts_a_running_command_with_exit_1(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "sleep 30", "timeout_ms": 60000}))
    result = run_ra(_args(replay_server, "--time-limit", "1", "wait"), clean_env(tmp_path), cwd=tmp_path, timeout=20)
    assert result.returncode == 1
    assert "ra: error: time limit reached: 1s (--time-limit)" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(chat_requests(replay_server)) == 1


def test_time_limit_cancels_a_stalled_model_call(replay_server: ReplayServer, tmp_path: Path) -> None:
    replay_server.enqueue(200, sse_tools(("c1", "list_dir", {"dir_path": "."})), SSE, chunking="events", stall_after=1)
    result = run_ra(_args(replay_server, "--time-limit", "0.5", "x"), clean_env(tmp_path), cwd=tmp_path, timeout=20)
    assert result.returncode == 1
    assert "time limit reached" in result.stderr


def test_context_overflow_compacts_and_retries(replay_server: ReplayServer, tmp_path: Path) -> None:
    """The command compacts on overflow: a summary call (the real system prompt, no tools), then the
    same call again with the summary, the task verbatim and the newest call/result pair whole."""
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "echo " + "a" * 3000}))
    enqueue_tools(replay_server, ("c2", "shell_command", {"command": "echo " + "b" * 3000}))
    enqueue_tools(replay_server, ("c3", "shell_command", {"command": "echo ccc"}))
    replay_server.enqueue(400, CONTEXT_ERROR)
    summary = "GOAL: the original task. PROGRESS: echoed a, b and c."
    replay_server.enqueue(200, _completion(summary))  # the summary call is not streamed
    enqueue_text(replay_server, "recovered")
    result = run_ra(_args(replay_server, "--json", "the original task"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    bodies = chat_requests(replay_server)
    assert len(bodies) == 6
    refused, summarise, retried = bodies[3]["messages"], bodies[4], bodies[5]["messages"]
    assert summarise["messages"][0] == refused[0] and "tools" not in summarise
    assert len(retried) < len(refused)
    assert retried[0] == refused[0]  # the system prompt stays
    text = json.dumps(retried)
    assert summary in text
    assert {"role": "user", "content": "the original task"} in retried  # the task, verbatim
    ids = [m["tool_call_id"] for m in retried if m["role"] == "tool"]
    calls = [c["id"] for m in retried if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    assert ids == calls and "c3" in ids and "c1" not in ids
    assert '"type":"compaction_end"' in result.stdout


def _completion(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-summary",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 300, "completion_tokens": 30, "total_tokens": 330},
    }


def test_context_overflow_that_compaction_cannot_fix_is_a_clear_error(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    replay_server.enqueue(400, CONTEXT_ERROR)
    result = run_ra(_args(replay_server, "tiny task"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("ra: error:")]
    assert len(errors) == 1
    assert "context overflow" in errors[0] and "Start a new session or shorten the task" in errors[0]
    assert "Traceback" not in result.stderr


def test_other_profiles_over_chat_completions_with_submit(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_tools(replay_server, ("c1", "shell", {"command": "echo via-shell"}))
    enqueue_tools(replay_server, ("s1", "submit", {"answer": "codex-style done"}))
    args = ["--profile", "openai", "--provider", "openai-compatible", *_args(replay_server, "--submit", "t")]
    result = run_ra(args, clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "codex-style done\n"
    first, second = chat_requests(replay_server)
    names = [t["function"]["name"] for t in first["tools"]]
    assert names[:2] == ["read_file", "apply_patch"] and "shell" in names and names[-1] == "submit"
    assert "via-shell" in second["messages"][-1]["content"]

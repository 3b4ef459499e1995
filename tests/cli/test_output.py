"""What the command prints: plain text, live output on a terminal, --json, --quiet, trajectories."""

from __future__ import annotations

import re
from pathlib import Path

import pexpect

from tests.cli.support import clean_env, enqueue_text, enqueue_tools, jsonl, ra_command, run_ra
from tests.support.replay import ReplayServer

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _args(server: ReplayServer, *more: str) -> list[str]:
    return ["--base-url", f"{server.base_url}/v1", "--model", "gpt-4o", *more]


def _script_two_steps(server: ReplayServer) -> None:
    enqueue_tools(server, ("c1", "shell_command", {"command": "printf 'alpha\\nbeta\\n'"}), text="Listing first.")
    enqueue_text(server, "The **answer** is beta.", prompt_tokens=1200, completion_tokens=30)


def test_plain_output_answer_on_stdout_progress_on_stderr(replay_server: ReplayServer, tmp_path: Path) -> None:
    _script_two_steps(replay_server)
    result = run_ra(_args(replay_server, "which?"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "The **answer** is beta.\n"
    err = result.stderr
    assert not ANSI.search(err) and not ANSI.search(result.stdout)
    assert "Listing first." in err
    assert "> shell_command printf 'alpha\\nbeta\\n'" in err
    assert "ok (exit 0" in err
    assert "  | alpha" in err and "  | beta" in err
    # Tokens and cost at the end (gpt-4o is in the catalog, so the cost is known).
    summary = err.strip().splitlines()[-1]
    assert "2 steps · 1 tool call · tokens 1,300 in / 50 out" in summary
    assert re.search(r"cost \$\d+\.\d{4}", summary)


def test_quiet_prints_only_the_answer(replay_server: ReplayServer, tmp_path: Path) -> None:
    _script_two_steps(replay_server)
    result = run_ra(_args(replay_server, "-q", "which?"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == "The **answer** is beta.\n"
    assert result.stderr == ""


def test_json_prints_one_event_per_line_and_a_result(replay_server: ReplayServer, tmp_path: Path) -> None:
    _script_two_steps(replay_server)
    result = run_ra(_args(replay_server, "--json", "which?"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    records = jsonl(result.stdout)
    types = [r["type"] for r in records]
    assert types[0] == "session_start"
    assert types[-1] == "result"
    for kind in (
        "user_input",
        "turn_start",
        "assistant_text_delta",
        "assistant_text_end",
        "tool_call_start",
        "tool_call_end",
        "usage",
        "turn_end",
        "processing_end",
        "session_end",
    ):
        assert kind in types, kind
    assert types.index("tool_call_start") < types.index("tool_call_end") < types.index("processing_end")
    start = next(r for r in records if r["type"] == "tool_call_start")
    assert start["tool_name"] == "shell_command" and start["arguments"] == {"command": "printf 'alpha\\nbeta\\n'"}
    end = next(r for r in records if r["type"] == "tool_call_end")
    assert "alpha\nbeta" in end["output"] and end["is_error"] is False
    final = records[-1]
    assert final["status"] == "completed" and final["exit_code"] == 0
    assert final["text"] == "The **answer** is beta."
    assert final["usage"]["input_tokens"] == 1300 and final["steps"] == 2
    assert all(isinstance(r.get("timestamp"), float) for r in records)


def test_json_records_the_error_and_exit_code(replay_server: ReplayServer, tmp_path: Path) -> None:
    replay_server.enqueue(404, {"error": {"message": "The model `gpt-4o` does not exist", "code": "model_not_found"}})
    result = run_ra(_args(replay_server, "--json", "x"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 3
    records = jsonl(result.stdout)
    error = next(r for r in records if r["type"] == "error")
    assert error["error"]["type"] == "NotFoundError" and error["error"]["status_code"] == 404
    assert records[-1]["type"] == "result" and records[-1]["exit_code"] == 3
    assert "was not found" in records[-1]["error"]
    assert result.stderr.startswith("ra: error: model 'gpt-4o' was not found")


def test_output_trajectory_has_every_event_with_full_outputs(replay_server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 5001)))
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": "cat big.txt"}))
    enqueue_text(replay_server, "read it")
    path = tmp_path / "run.jsonl"
    result = run_ra(_args(replay_server, "--output-trajectory", str(path), "read"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    records = jsonl(path.read_text())
    assert records[0]["type"] == "run_start"
    assert records[0]["task"] == "read" and records[0]["model"] == "gpt-4o"
    assert records[0]["tools"][:2] == ["shell_command", "read_file"]
    assert records[-1]["type"] == "result" and records[-1]["text"] == "read it"
    assert "at most one tool call per step" in records[-1]["system_prompt"]
    types = [r["type"] for r in records]
    assert "session_end" in types and "assistant_text_delta" in types
    (end,) = [r for r in records if r["type"] == "tool_call_end"]
    assert "line 1\n" in end["output"] and "line 2500\n" in end["output"] and "line 5000" in end["output"]
    assert end["truncated"] is True  # the model saw a bounded copy; the log has it all
    # The trajectory does not replace the normal output.
    assert result.stdout == "read it\n"


def test_unwritable_trajectory_is_a_usage_error(replay_server: ReplayServer, tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "dir" / "t.jsonl"
    result = run_ra(_args(replay_server, "--output-trajectory", str(path), "x"), clean_env(tmp_path))
    assert result.returncode == 2
    assert "cannot write the trajectory file" in result.stderr


def _run_in_pty(args: list[str], env: dict[str, str], cwd: Path) -> tuple[str, int]:
    command = ra_command()
    child = pexpect.spawn(
        command[0], [*command[1:], *args], env=env, cwd=str(cwd), encoding="utf-8", dimensions=(40, 120)
    )
    child.expect(pexpect.EOF, timeout=30)
    child.close()
    return child.before, child.exitstatus


def test_live_output_on_a_terminal(replay_server: ReplayServer, tmp_path: Path) -> None:
    _script_two_steps(replay_server)
    text, status = _run_in_pty(_args(replay_server, "which?"), clean_env(tmp_path, TERM="xterm"), tmp_path)
    assert status == 0
    assert ANSI.search(text)  # colours, cursor control: rich is live
    plain = ANSI.sub("", text)
    assert "✓ shell_command printf" in plain
    assert "alpha" in plain
    assert "The answer is beta." in plain  # markdown rendered on the terminal
    assert "tokens 1,300 in / 50 out" in plain


def test_no_color_on_a_terminal_gives_plain_output(replay_server: ReplayServer, tmp_path: Path) -> None:
    _script_two_steps(replay_server)
    text, status = _run_in_pty(
        _args(replay_server, "which?"), clean_env(tmp_path, TERM="xterm", NO_COLOR="1"), tmp_path
    )
    assert status == 0
    assert not ANSI.search(text)
    assert "> shell_command printf" in text
    assert "The **answer** is beta." in text


def test_json_reports_errors_before_the_run_as_a_result_record(tmp_path: Path) -> None:
    result = run_ra(["--json", "--provider", "gemini", "task"], clean_env(tmp_path))
    assert result.returncode == 3
    (record,) = jsonl(result.stdout)
    assert record["type"] == "result" and record["exit_code"] == 3 and record["status"] == "error"
    assert "GEMINI_API_KEY" in record["error"]
    assert result.stderr.startswith("ra: error: no API key for provider gemini")

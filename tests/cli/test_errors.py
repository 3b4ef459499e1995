"""Documented exit codes and one-line errors (never a traceback unless --debug)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.cli.support import chat_requests, clean_env, enqueue_text, run_ra
from tests.support.replay import ReplayServer


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ra: error:")]


def _one_clear_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    (line,) = _error_lines(stderr)
    return line


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _no_retries(home: Path) -> None:
    config = home / ".config" / "ra"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("max_retries = 0\n")


def test_done_is_exit_0(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "fine")
    result = run_ra(["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "t"], clean_env(tmp_path))
    assert (result.returncode, result.stdout) == (0, "fine\n")
    assert _error_lines(result.stderr) == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--bogus-flag", "task"], "unrecognized arguments: --bogus-flag"),
        (["--max-steps", "0", "task"], "--max-steps: must be at least 1"),
        (["--max-steps", "many", "task"], "--max-steps: expected a whole number"),
        (["--time-limit", "-3", "task"], "--time-limit"),
        (["--provider", "nope", "task"], "--provider: invalid choice"),
        (["--profile", "nope", "task"], "--profile: invalid choice"),
        (["--temperature", "hot", "task"], "--temperature: expected a number"),
        (["--temperature", "7", "--base-url", "http://127.0.0.1:1/v1", "task"], "temperature must be between 0 and 2"),
        (["-C", "/does/not/exist", "--base-url", "http://127.0.0.1:1/v1", "task"], "does not exist"),
        (["--base-url", "ftp://x", "task"], "base URL must start with http"),
    ],
)
def test_usage_errors_exit_2_with_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    result = run_ra(args, clean_env(tmp_path))
    assert result.returncode == 2, result.stderr
    assert needle in _one_clear_line(result.stderr)
    assert result.stdout == ""


@pytest.mark.parametrize("args", [["-"], [], ["--json"], [""], ["--model", "m", ""], ["  "]])
def test_an_empty_stdin_is_not_a_task(tmp_path: Path, args: list[str]) -> None:
    # Without a terminal on stdin, no TASK (or '-', or an empty one) means: read the task from
    # stdin - never an interactive session on a pipe.
    result = run_ra(args, clean_env(tmp_path), stdin="")
    assert result.returncode == 2
    assert "stdin was empty" in _one_clear_line(result.stderr)


def test_task_from_stdin(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "read it")
    args = ["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "-"]
    result = run_ra(args, clean_env(tmp_path), stdin="the task\nfrom a pipe\n")
    assert result.returncode == 0, result.stderr
    assert chat_requests(replay_server)[0]["messages"][1]["content"] == "the task\nfrom a pipe"


def test_missing_key_is_exit_3(tmp_path: Path) -> None:
    result = run_ra(["--provider", "anthropic", "task"], clean_env(tmp_path))
    assert result.returncode == 3
    line = _one_clear_line(result.stderr)
    assert "no API key for provider anthropic" in line and "ANTHROPIC_API_KEY" in line


def test_openai_compatible_without_url_or_key_is_exit_3(tmp_path: Path) -> None:
    result = run_ra(["--provider", "openai-compatible", "task"], clean_env(tmp_path))
    assert result.returncode == 3
    assert "--base-url" in _one_clear_line(result.stderr)


def test_unreachable_base_url_is_exit_3(tmp_path: Path) -> None:
    _no_retries(tmp_path)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = run_ra(["--base-url", url, "--model", "m", "task"], clean_env(tmp_path))
    assert result.returncode == 3
    line = _one_clear_line(result.stderr)
    assert line.startswith(f"ra: error: cannot reach openai-compatible at {url}")


def test_unreachable_base_url_while_listing_models_is_exit_3(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    result = run_ra(["--base-url", url, "task"], clean_env(tmp_path))
    assert result.returncode == 3
    assert "cannot reach" in _one_clear_line(result.stderr)


def test_unknown_model_is_exit_3(replay_server: ReplayServer, tmp_path: Path) -> None:
    replay_server.enqueue(
        404,
        {
            "error": {
                "message": "The model `no-such-model` does not exist or you do not have access to it.",
                "type": "invalid_request_error",
                "code": "model_not_found",
            }
        },
    )
    args = ["--base-url", f"{replay_server.base_url}/v1", "--model", "no-such-model", "task"]
    result = run_ra(args, clean_env(tmp_path))
    assert result.returncode == 3
    line = _one_clear_line(result.stderr)
    assert "model 'no-such-model' was not found" in line and "--model" in line


def test_debug_shows_the_traceback(replay_server: ReplayServer, tmp_path: Path) -> None:
    replay_server.enqueue(404, {"error": {"message": "unknown model", "code": "model_not_found"}})
    args = ["--debug", "--base-url", f"{replay_server.base_url}/v1", "--model", "x", "task"]
    result = run_ra(args, clean_env(tmp_path))
    assert result.returncode == 3
    assert "Traceback" in result.stderr
    assert "NotFoundError" in result.stderr


def test_bad_key_is_exit_3(replay_server: ReplayServer, tmp_path: Path) -> None:
    replay_server.enqueue(401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}})
    env = clean_env(tmp_path, OPENAI_COMPATIBLE_API_KEY="sk-wrong")
    result = run_ra(["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "task"], env)
    assert result.returncode == 3
    line = _one_clear_line(result.stderr)
    assert "authentication failed" in line and "OPENAI_COMPATIBLE_API_KEY" in line
    assert replay_server.requests[0].headers["authorization"] == "Bearer sk-wrong"


def test_server_errors_are_retried_then_exit_3(replay_server: ReplayServer, tmp_path: Path) -> None:
    config = tmp_path / ".config" / "ra"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("max_retries = 1\n")
    replay_server.enqueue(503, {"error": {"message": "overloaded"}}, {"retry-after": "0"})
    replay_server.enqueue(503, {"error": {"message": "overloaded"}}, {"retry-after": "0"})
    result = run_ra(["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "task"], clean_env(tmp_path))
    assert result.returncode == 3
    assert len(chat_requests(replay_server)) == 2
    assert "retrying" in result.stderr
    assert "overloaded" in _one_clear_line(result.stderr)


def test_nothing_configured_falls_back_to_the_local_model_and_says_so(tmp_path: Path) -> None:
    # The local provider is chosen when nothing else is configured; a missing model file is a
    # provider error with one clear line.
    from ra.cli.config import local_model_available

    if not local_model_available():
        result = run_ra(["task"], clean_env(tmp_path))
        assert result.returncode == 3
        assert "no model provider is configured" in _one_clear_line(result.stderr)
        return
    result = run_ra(["task"], clean_env(tmp_path, RA_LOCAL_MODEL=str(tmp_path / "missing.gguf")))
    assert result.returncode == 3
    assert "using the local in-process model" in result.stderr
    assert "missing.gguf" in _one_clear_line(result.stderr)


def test_version_and_help_exit_0(tmp_path: Path) -> None:
    from ra import __version__

    result = run_ra(["--version"], clean_env(tmp_path))
    assert (result.returncode, result.stdout.strip()) == (0, f"ra {__version__}")
    result = run_ra(["--help"], clean_env(tmp_path))
    assert result.returncode == 0
    for needle in ("--provider", "--max-steps", "--output-trajectory", "exit codes:", "130"):
        assert needle in result.stdout


def test_ctrl_c_in_a_one_shot_run_is_exit_130(replay_server: ReplayServer, tmp_path: Path) -> None:
    import signal
    import subprocess
    import time

    from tests.cli.support import enqueue_tools, ra_command

    marker = tmp_path / "running"
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": f"touch {marker}; sleep 30", "timeout_ms": 60000}))
    trajectory = tmp_path / "t.jsonl"
    args = ["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "--output-trajectory", str(trajectory), "t"]
    proc = subprocess.Popen(
        [*ra_command(), *args],
        env=clean_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 15
        while not marker.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the command never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert out == ""
    assert _one_clear_line(err) == "ra: error: interrupted"
    from tests.cli.support import jsonl

    records = jsonl(trajectory.read_text())
    assert records[-1]["status"] == "interrupted" and records[-1]["exit_code"] == 130


def test_a_deleted_current_directory_is_a_usage_error(replay_server: ReplayServer, tmp_path: Path) -> None:
    """The shell's directory was removed before ``ra`` started: there is no current directory to
    run in (before: "[Errno 2] No such file or directory (internal error ...)", exit 1)."""
    import shlex
    import subprocess

    from tests.cli.support import ra_command

    gone = tmp_path / "gone"
    gone.mkdir()
    command = shlex.join([*ra_command(), "--base-url", f"{replay_server.base_url}/v1", "--model", "m", "t"])
    result = subprocess.run(
        ["sh", "-c", f'cd "$1" && rmdir "$1" && exec {command}', "sh", str(gone)],
        env=clean_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2, result.stderr
    line = _one_clear_line(result.stderr)
    assert "the current directory no longer exists" in line and "-C DIR" in line
    assert "internal error" not in line
    assert replay_server.requests == []


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_fallback_model_is_a_usage_error(replay_server: ReplayServer, tmp_path: Path, value: str) -> None:
    """Before: "fallback_models entries are ... (internal error ...)", exit 1."""
    args = ["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "--fallback-model", value, "t"]
    result = run_ra(args, clean_env(tmp_path))
    assert result.returncode == 2, result.stderr
    line = _one_clear_line(result.stderr)
    assert "--fallback-model: a model name is empty" in line and "internal error" not in line
    assert replay_server.requests == []


def test_an_empty_fallback_model_in_the_config_file_is_a_usage_error(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    config = tmp_path / ".config" / "ra"
    config.mkdir(parents=True)
    (config / "config.toml").write_text('fallback_models = ["m2", ""]\n')
    result = run_ra(["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "t"], clean_env(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "'fallback_models': a model name is empty" in _one_clear_line(result.stderr)

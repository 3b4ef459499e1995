"""The installed ``ra`` command on a real model, as a user runs it.

* With no provider configuration at all (no API keys, no base URLs, no ``RA_*`` variables, an empty
  config directory) ``ra`` must fall back to the in-process local model, say so once on stderr,
  and end with exit 0 (an answer on stdout) or 1 (a limit, said on stderr), never a traceback.
* ``ra --base-url http://127.0.0.1:<port>/v1 --model gemma`` against the live ``llama_cpp.server``
  must run the same way through the Chat Completions adapter, and leave the server healthy.

Both runs write a trajectory (``--output-trajectory``), which is where steps and tool calls are
read from for the report. ``ra`` is started in a session of its own, so the check that no process
is left behind also covers commands the agent started in the background.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.live.conftest import LiveReport, LlamaServer, TaskOutcome, require_local_model

pytestmark = pytest.mark.live

#: Small limits: a 270M model rarely finishes, and a limit reached is a fine outcome here. The
#: reply cap keeps a tool call whose arguments run on under the grammar from taking minutes.
MAX_STEPS = "3"
MAX_TOKENS = "96"
TIME_LIMIT = "120"
RUN_TIMEOUT_S = 200

CREATE_TASK = "Create a file named hello.txt whose whole content is the line: Hello from ra"
LOCAL_NOTICE = "local in-process model"

_PROVIDER_PREFIXES = ("OPENAI", "ANTHROPIC", "GEMINI", "GOOGLE", "BRAVE", "RA_")


def ra_command() -> Path:
    """The console script installed next to this interpreter (``.venv/bin/ra``)."""
    command = Path(sys.executable).parent / "ra"
    if not command.exists():
        pytest.skip(f"the ra command is not installed next to {sys.executable}")
    return command


def clean_env(tmp_path: Path) -> dict[str, str]:
    """This process's environment without any provider setting, with empty config/state dirs."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.endswith(("_API_KEY", "_BASE_URL")) and not key.startswith(_PROVIDER_PREFIXES)
    }
    config, state = tmp_path / "config", tmp_path / "state"
    config.mkdir()
    state.mkdir()
    env.update(XDG_CONFIG_HOME=str(config), XDG_STATE_HOME=str(state), NO_COLOR="1", TERM="dumb")
    return env


def processes_in_session(sid: int) -> list[int]:
    """Processes (not zombies) whose session id is ``sid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        # state ppid pgrp session ...
        if len(fields) > 3 and fields[3] == str(sid) and fields[0] != "Z":
            found.append(int(entry))
    return found


class CliRun:
    def __init__(self, proc: subprocess.CompletedProcess[str], trajectory: Path, seconds: float) -> None:
        self.code = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.seconds = seconds
        self.records: list[dict[str, Any]] = []
        if trajectory.exists():
            self.records = [json.loads(line) for line in trajectory.read_text().splitlines() if line.strip()]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("type") == kind]

    @property
    def result(self) -> dict[str, Any]:
        [result] = self.of("result")
        return result

    @property
    def run_start(self) -> dict[str, Any]:
        [start] = self.of("run_start")
        return start

    def tool_calls(self) -> list[str]:
        """Each call as ``name(main argument)``, ``!`` marking a failed one, for the report."""
        arguments = {r["call_id"]: r.get("arguments") for r in self.of("tool_call_start")}
        out = []
        for end in self.of("tool_call_end"):
            given = arguments.get(end["call_id"])
            first = next(iter(given.values()), "") if isinstance(given, dict) and given else ""
            shown = " ".join(str(first).split())
            shown = shown if len(shown) <= 32 else shown[:31] + "…"
            out.append(f"{end['tool_name']}({shown}){'!' if end.get('is_error') else ''}")
        return out

    def explain(self) -> str:
        return f"exit {self.code}\n--- stdout ---\n{self.stdout[-2000:]}\n--- stderr ---\n{self.stderr[-3000:]}"


def run_ra(args: list[str], workspace: Path, env: dict[str, str], trajectory: Path) -> CliRun:
    command = [str(ra_command()), "--max-steps", MAX_STEPS, "--max-tokens", MAX_TOKENS, "--time-limit", TIME_LIMIT]
    command += ["--output-trajectory", str(trajectory), *args]
    started = time.perf_counter()
    proc = subprocess.Popen(
        command,
        cwd=workspace,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        stdout, stderr = proc.communicate()
        pytest.fail(f"ra did not finish within {RUN_TIMEOUT_S} s:\n{stderr[-3000:]}")
    seconds = time.perf_counter() - started
    left = processes_in_session(proc.pid)
    if left:
        os.killpg(proc.pid, 9)
    assert not left, f"ra left processes behind: {left}"
    return CliRun(subprocess.CompletedProcess(command, proc.returncode, stdout, stderr), trajectory, seconds)


def assert_clean_run(run: CliRun) -> None:
    """Exit 0 or 1, no traceback, and a trajectory whose tool calls all ended."""
    assert run.code in (0, 1), run.explain()
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout, run.explain()
    result = run.result
    assert result["exit_code"] == run.code
    assert result["steps"] <= int(MAX_STEPS)
    started = [r["call_id"] for r in run.of("tool_call_start")]
    ended = [r["call_id"] for r in run.of("tool_call_end")]
    assert started == ended and result["tool_calls"] == len(ended)
    assert run.of("session_end"), "the session did not end"
    if run.code == 0:
        # The answer alone on stdout (llama_cpp.server's tool handler can make it empty).
        assert run.stdout.strip() == (result["text"] or "").strip(), run.explain()
    else:
        # A limit reached: one clear line on stderr saying which. A base model may also run past
        # --max-tokens inside a tool call (the cut call does not run): a limit too.
        errors = [line for line in run.stderr.splitlines() if line.startswith("ra: error:")]
        assert len(errors) == 1 and "limit" in errors[0], run.explain()
        assert result["status"] in ("turn_limit", "time_limit", "max_tokens"), result["status"]


def record(report: LiveReport, task: str, path: str, run: CliRun, matched: bool | None) -> None:
    result = run.result if run.of("result") else {}
    notes = f"exit {run.code}"
    if result.get("error"):
        notes += f": {result['error']}"
    report.add(
        TaskOutcome(
            task=task,
            path=path,
            profile="ra",
            steps=int(result.get("steps", 0)),
            tool_calls=run.tool_calls(),
            matched=matched,
            stop=str(result.get("status", "?")),
            seconds=run.seconds,
            notes=notes,
        )
    )


def created(workspace: Path) -> bool:
    path = workspace / "hello.txt"
    return path.is_file() and path.read_text().strip() == "Hello from ra"


def test_ra_without_configuration_uses_the_local_model(tmp_path: Path, live_report: LiveReport) -> None:
    require_local_model()
    workspace = tmp_path / "work"
    workspace.mkdir()
    run = run_ra([CREATE_TASK], workspace, clean_env(tmp_path), tmp_path / "trajectory.jsonl")
    record(live_report, "cli: create-file", "ra CLI, no config -> local", run, created(workspace))

    notices = [line for line in run.stderr.splitlines() if LOCAL_NOTICE in line]
    assert len(notices) == 1, run.explain()
    assert run.run_start["provider"] == "local", run.run_start
    assert_clean_run(run)
    if run.code == 0:
        assert run.stdout.strip(), "exit 0 without an answer"


def test_ra_against_llama_server(tmp_path: Path, llama_server: LlamaServer, live_report: LiveReport) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    args = ["--base-url", llama_server.base_url, "--model", llama_server.model, CREATE_TASK]
    run = run_ra(args, workspace, clean_env(tmp_path), tmp_path / "trajectory.jsonl")
    record(live_report, "cli: create-file", "ra CLI --base-url -> llama_cpp.server", run, created(workspace))

    assert LOCAL_NOTICE not in run.stderr, run.explain()
    start = run.run_start
    assert start["provider"] == "openai-compatible" and start["base_url"] == llama_server.base_url, start
    assert_clean_run(run)
    assert llama_server.healthy(), llama_server.log_tail()

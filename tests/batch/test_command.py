"""The real ``ra batch`` command against the scripted Chat Completions server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.batch.support import TaskScripts, make_repo, read_results, write_tasks
from tests.cli.support import clean_env, ra_command, run_ra
from tests.support.replay import ReplayServer

#: The slow lane (``pytest -m slow``, which CI runs): the real `ra batch` with git working copies.
pytestmark = pytest.mark.slow


SECRET = "sk-batch-secret-0123456789"


@pytest.fixture
def server() -> Any:
    srv = ReplayServer().start()
    try:
        yield srv
    finally:
        srv.close()


def _args(server: ReplayServer, tasks: Path, out: Path, *more: str) -> list[str]:
    return ["batch", str(tasks), "--out", str(out), "--base-url", f"{server.base_url}/v1", "--model", "gpt-4o", *more]


def _env(tmp_path: Path) -> dict[str, str]:
    return clean_env(tmp_path / "home", OPENAI_COMPATIBLE_API_KEY=SECRET)


def test_ra_batch_runs_records_summarises_and_resumes(server: ReplayServer, tmp_path: Path) -> None:
    make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    server.responder = TaskScripts(
        {"Edit": [("shell", "echo b >> a.txt"), ("text", "Edited.")], "Skip": [("text", "Nothing.")]}
    )
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"id": "edit", "repo": "repo", "instruction": "Edit a.txt", "check": "grep -q b a.txt"},
            {"id": "skip", "repo": "repo", "instruction": "Skip it", "check": "grep -q b a.txt"},
        ],
    )
    out = tmp_path / "out"
    done = run_ra(_args(server, tasks, out, "--concurrency", "2"), _env(tmp_path), cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # a task failed its check
    assert "ra batch: 2 tasks, 0 already done, 2 to run" in done.stderr
    assert "edit: passed · check passed · 2 steps" in done.stderr
    assert "skip: failed · check failed · 1 steps" in done.stderr
    assert "tasks      2 (1 passed, 1 failed)" in done.stdout
    assert "pass rate  50.0%" in done.stdout and "tokens     300 in / 40 out" in done.stdout
    by_id = {r["id"]: r for r in read_results(out)}
    assert by_id["edit"]["status"] == "passed" and "+b" in by_id["edit"]["diff"]
    assert by_id["skip"]["status"] == "failed"
    # The key the tasks were run with is nowhere in what the batch wrote or printed.
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in done.stdout + done.stderr
    # The authorization header did carry it to the server.
    assert any(r.headers.get("authorization") == f"Bearer {SECRET}" for r in server.requests)

    # The session is recorded where docs/batch.md says, and `ra sessions` reads it there.
    env = {**_env(tmp_path), "RA_SESSIONS_DIR": str(out / "sessions")}
    shown = run_ra(["sessions", "show", by_id["edit"]["session_id"]], env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "Edit a.txt" in shown.stdout and "Edited." in shown.stdout

    asked = len(server.requests)
    again = run_ra(_args(server, tasks, out, "--json"), _env(tmp_path), cwd=tmp_path)
    assert again.returncode == 1
    summary = json.loads(again.stdout)
    assert summary["ran"] == 0 and summary["skipped"] == 2 and summary["counts"]["passed"] == 1
    assert len(server.requests) == asked

    server.responder = TaskScripts({"Skip": [("shell", "echo b >> a.txt"), ("text", "Done now.")]})
    retried = run_ra(_args(server, tasks, out, "--retry-failed", "--json"), _env(tmp_path), cwd=tmp_path)
    assert retried.returncode == 0, retried.stderr
    summary = json.loads(retried.stdout)
    assert summary["ran"] == 1 and summary["counts"]["passed"] == 2 and summary["pass_rate"] == 1.0


def test_ra_batch_refuses_a_bad_tasks_file_before_anything_runs(server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a", "directory": "d", "instruction": "x"}\n{"id": "b", "directory": "d"}\n')
    out = tmp_path / "out"
    done = run_ra(_args(server, tasks, out), _env(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    assert (
        done.stderr == "ra: error: ra batch: tasks.jsonl line 2 (id b): 'instruction' is required (see `ra --help`)\n"
        or ("tasks.jsonl line 2 (id b): 'instruction' is required" in done.stderr)
    )
    assert not out.exists() and not server.requests


def test_ra_batch_flags_are_checked(server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": "a", "directory": "d", "instruction": "x"}])
    done = run_ra(_args(server, tasks, tmp_path / "out", "--address", "ray://x:1"), _env(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and "--address is for --backend ray" in done.stderr
    done = run_ra(_args(server, tasks, tmp_path / "out", "--concurrency", "0"), _env(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and "--concurrency" in done.stderr
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = run_ra(_args(server, tasks, blocker / "out"), _env(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and "cannot use" in done.stderr and "Not a directory" in done.stderr, done.stderr
    assert "internal error" not in done.stderr and not server.requests
    help_text = run_ra(["batch", "--help"], _env(tmp_path), cwd=tmp_path)
    assert help_text.returncode == 0 and "--retry-failed" in help_text.stdout and "--backend" in help_text.stdout


def test_ctrl_c_stops_the_batch_records_interrupted_and_leaves_nothing_running(
    server: ReplayServer, tmp_path: Path
) -> None:
    (tmp_path / "d").mkdir()
    pids = tmp_path / "pids"
    server.responder = TaskScripts({"Sleep": [("shell", f"echo $$ >> {pids}; exec sleep 60"), ("text", "done")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [{"id": f"t{i}", "directory": "d", "instruction": "Sleep"} for i in range(4)]
    )
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [*ra_command(), *_args(server, tasks, out, "--concurrency", "2")],
        env=_env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not pids.exists() or len(pids.read_text().split()) < 2):
            time.sleep(0.05)
        assert pids.exists() and len(pids.read_text().split()) == 2
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 130, stderr
    statuses = sorted((r["id"], r["status"]) for r in read_results(out))
    assert statuses == [("t0", "interrupted"), ("t1", "interrupted")]
    assert "2 interrupted" in stdout and "interrupted)" in stdout
    for pid in pids.read_text().split():
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)
    assert not any((out / "work").iterdir())


def test_on_a_terminal_progress_is_live_and_the_summary_follows(server: ReplayServer, tmp_path: Path) -> None:
    import re

    import pexpect

    (tmp_path / "d").mkdir()
    server.responder = TaskScripts({"A": [("text", "a")], "B": [("text", "b")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"id": "a", "directory": "d", "instruction": "A", "check": "true"},
            {"id": "b", "directory": "d", "instruction": "B", "check": "exit 1"},
        ],
    )
    command = ra_command()
    child = pexpect.spawn(
        command[0],
        [*command[1:], *_args(server, tasks, tmp_path / "out")],
        env={**_env(tmp_path), "TERM": "xterm"},
        cwd=str(tmp_path),
        encoding="utf-8",
        dimensions=(40, 120),
    )
    child.expect(pexpect.EOF, timeout=60)
    child.close()
    text = child.before
    assert child.exitstatus == 1
    assert re.search(r"\x1b\[[0-9;?]*[A-Za-z]", text)  # rich drew the progress
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    assert "a: passed · check passed" in plain and "b: failed · check failed" in plain
    assert "pass rate  50.0%" in plain


def test_a_budget_on_a_model_without_a_price_is_refused_before_anything_runs(
    server: ReplayServer, tmp_path: Path
) -> None:
    (tmp_path / "d").mkdir()
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"id": "a", "directory": "d", "instruction": "x"},
            {"id": "b", "directory": "d", "instruction": "x", "model": "no-such-model-xyz", "max_budget_usd": 1},
        ],
    )
    out = tmp_path / "out"
    done = run_ra(_args(server, tasks, out), _env(tmp_path), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "tasks.jsonl line 2 (id b): a budget cannot be kept on model 'no-such-model-xyz'" in done.stderr
    assert not out.exists() and not server.requests
    done = run_ra(_args(server, tasks, out, "--max-budget-usd", "nan"), _env(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and "--max-budget-usd" in done.stderr

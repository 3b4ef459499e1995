"""``kill -9`` in the middle of a run, then ``ra --continue``: every step that completed before the
kill is in the record once, nothing is duplicated, and the resumed run's first request carries them.

The real ``ra`` command runs a task of several tool steps against the scripted Chat Completions
server; the fourth step's command blocks, so the process is killed (SIGKILL: no handler, no
flush, no cleanup) while a step is in flight. That step was never recorded, so it is lost, as the
record's guarantee says ("a crash loses at most the step in flight").
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from ra.agent.store import FileSessionStore, load_record
from tests.cli.support import chat_requests, clean_env, enqueue_text, enqueue_tools, jsonl, ra_command
from tests.support.replay import ReplayServer

#: Tool steps that complete before the kill.
DONE_STEPS = 3


def _entries(sessions: Path) -> list[dict[str, Any]]:
    """The entries of the one record under ``sessions`` (an empty list before it exists). The last
    line may be torn while the writer is mid-write: only whole lines count."""
    files = list(sessions.glob("*/*.jsonl"))
    if not files:
        return []
    (path,) = files
    out = []
    for line in path.read_text().split("\n")[:-1]:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _completed(entries: list[dict[str, Any]]) -> int:
    return sum(1 for e in entries if e.get("type") == "tool_results")


def test_kill_9_mid_run_then_continue_keeps_every_completed_step_once(
    tmp_path: Path, replay_server: ReplayServer
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    sessions = tmp_path / "sessions"
    pidfile = tmp_path / "blocked.pid"
    env = clean_env(tmp_path, RA_SESSIONS_DIR=str(sessions))
    for n in range(1, DONE_STEPS + 1):
        enqueue_tools(replay_server, (f"c{n}", "shell_command", {"command": f"echo step-{n}"}))
    # The step in flight when the process dies: its command blocks (and says where it is).
    blocking = f"echo $$ > {pidfile}; exec sleep 60"
    enqueue_tools(replay_server, ("c4", "shell_command", {"command": blocking, "timeout_ms": 120_000}))
    enqueue_text(replay_server, "Picked up where I was.")
    base = [*ra_command(), "--base-url", f"{replay_server.base_url}/v1", "--model", "m"]

    process = subprocess.Popen(
        [*base, "run the four steps"],
        env=env,
        cwd=project,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while _completed(_entries(sessions)) < DONE_STEPS or not (pidfile.exists() and pidfile.read_text().strip()):
            assert process.poll() is None, (
                f"ra exited early: {process.stderr.read().decode() if process.stderr else ''}"
            )
            assert time.monotonic() < deadline, f"only {_completed(_entries(sessions))} steps were recorded in 30 s"
            time.sleep(0.05)
        blocked_pid = pidfile.read_text()
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=10) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
        # The blocked command ran in its own process group and outlives ra's SIGKILL: end it.
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    requests_before = len(chat_requests(replay_server))
    assert requests_before == DONE_STEPS + 1

    resumed = subprocess.run(
        [*base, "--continue", "go on"], env=env, cwd=project, capture_output=True, text=True, timeout=60
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "Picked up where I was."

    # The record loads (a torn last line would be skipped; there is none to skip here).
    (path,) = sessions.glob("*/*.jsonl")
    sid = path.stem.split("_", 1)[1]
    record = asyncio.run(load_record(FileSessionStore(sessions), sid))
    entries = jsonl(path.read_text())
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)), "an entry was written twice"
    calls = [c["id"] for e in entries if e["type"] == "assistant" for c in e.get("tool_calls", [])]
    results = {r["tool_call_id"]: r for e in entries if e["type"] == "tool_results" for r in e["results"]}
    done = [f"c{n}" for n in range(1, DONE_STEPS + 1)]
    # Each completed step once. The step in flight is either lost (the record is written after a
    # step's tools ran) or, where the model's answer is written before its tools run, there once
    # with the "interrupted" result the resume gave it - never run again.
    assert calls in (done, [*done, "c4"])
    assert sorted(results) == sorted(calls) and len(results) == sum(
        len(e["results"]) for e in entries if e["type"] == "tool_results"
    )
    assert all(f"step-{n}" in str(results[f"c{n}"]["content"]) for n in range(1, DONE_STEPS + 1))
    if "c4" in calls:
        assert str(results["c4"]["content"]).startswith("Interrupted")
    users = [e["content"] for e in entries if e["type"] == "user"]
    assert users == ["run the four steps", "go on"]
    assert record.turn_count == len(calls) + 1  # the tool steps on record and the resumed answer

    # The resumed run's first request carries the completed steps, once each, in order.
    first_after = chat_requests(replay_server)[requests_before]
    messages = first_after["messages"][1:]
    sent_calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    sent_results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert sent_calls == calls and sent_results == calls  # once each, every call with its result
    outputs = [m["content"] for m in messages if m["role"] == "tool"]
    assert all(f"step-{n}" in out for n, out in zip(range(1, DONE_STEPS + 1), outputs[:DONE_STEPS], strict=True))
    assert pidfile.read_text() == blocked_pid  # the blocked command was not run again
    assert messages[0] == {"role": "user", "content": "run the four steps"}
    assert messages[-1] == {"role": "user", "content": "go on"}

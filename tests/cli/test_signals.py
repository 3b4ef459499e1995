"""SIGTERM and SIGHUP to ``ra`` stop the running command's whole tree, as Ctrl-C does, then
``ra`` exits with 128 + the signal. Commands run in their own process group, so before this a
``kill <ra>`` (or a closed terminal) left the command and everything it started running."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.support import clean_env, enqueue_tools, jsonl, ra_command
from tests.support.replay import ReplayServer


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is not running.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(predicate, seconds: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)], ids=["TERM", "HUP"])
def test_a_stop_signal_ends_the_running_commands_tree(
    replay_server: ReplayServer, tmp_path: Path, signum: int, code: int
) -> None:
    pids = tmp_path / "pids"
    # A child and a grandchild, each recording its pid; the grandchild ignores nothing special,
    # it only outlives its parent's shell unless its group is stopped.
    script = f"sh -c 'echo $$ >> {pids}; sleep 60' & echo $$ >> {pids}; sleep 60"
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": script, "timeout_ms": 120000}))
    trajectory = tmp_path / "t.jsonl"
    args = ["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "--output-trajectory", str(trajectory), "t"]
    proc = subprocess.Popen(
        [*ra_command(), *args],
        env=clean_env(tmp_path / "home"),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, 15, "the command tree never started")
        started = [int(p) for p in pids.read_text().split()]
        assert all(_alive(pid) for pid in started)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    try:
        _wait_for(lambda: not any(_alive(pid) for pid in started), 5, f"left running: {started}")
    finally:
        for pid in started:  # whatever the outcome, nothing of the test outlives it
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == code, err
    assert out == ""
    name = signal.Signals(signum).name
    assert f"ra: error: terminated by {name}" in err and "Traceback" not in err
    record = jsonl(trajectory.read_text())[-1]
    assert (record["status"], record["exit_code"]) == ("terminated", code)


def test_an_ignored_hangup_stays_ignored(replay_server: ReplayServer, tmp_path: Path) -> None:
    """Under ``nohup`` SIGHUP is ignored on purpose: the run goes on to its answer."""
    from tests.cli.support import enqueue_text

    marker = tmp_path / "running"
    enqueue_tools(replay_server, ("c1", "shell_command", {"command": f"touch {marker}; sleep 1"}))
    enqueue_text(replay_server, "finished anyway")
    args = ["--base-url", f"{replay_server.base_url}/v1", "--model", "m", "t"]
    proc = subprocess.Popen(
        ["nohup", *ra_command(), *args],
        env=clean_env(tmp_path / "home"),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(marker.exists, 15, "the command never started")
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out.strip() == "finished anyway"

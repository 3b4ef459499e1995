"""ra.batch on the local backend: real working copies, the scripted model over HTTP, real checks."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import ra.batch
from ra.batch import OutDirInUseError, TasksFileError
from tests.batch.support import TaskScripts, chat_client, git, make_repo, read_results, write_tasks
from tests.support.replay import ReplayServer

#: The slow lane (``pytest -m slow``, which CI runs): real git working copies and sessions per task.
pytestmark = pytest.mark.slow


@pytest.fixture
def server() -> Any:
    srv = ReplayServer().start()
    try:
        yield srv
    finally:
        srv.close()


def _factory(server: ReplayServer, *, crash: str | None = None) -> Any:
    return functools.partial(_crashing_client, chat_client(server), crash)


def _crashing_client(inner: Any, crash: str | None, task: Any) -> Any:
    if task.id == crash:
        raise RuntimeError("the client factory broke")
    return inner(task)


def _run(tasks: Any, out: Path, server: ReplayServer, **kw: Any) -> ra.batch.BatchReport:
    kw.setdefault("client_factory", _factory(server))
    kw.setdefault("model", "gpt-4o")
    kw.setdefault("provider", "openai-compatible")
    kw.setdefault("concurrency", 4)
    return ra.batch.run(tasks, out_dir=out, **kw)


def test_a_batch_of_outcomes(server: ReplayServer, tmp_path: Path) -> None:
    base = make_repo(tmp_path / "repo", {"README.md": "hello\n", "src/app.py": "x = 1\n"})
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("notes\n")
    server.responder = TaskScripts(
        {
            "Add hello": [("shell", "printf 'hi\\n' > hello.txt && printf 'x = 2\\n' > src/app.py"), ("text", "Done.")],
            "Do nothing": [("text", "Nothing to do.")],
            "Hang": [("stall", 30)],
            "Break": [("status", 400)],
            "Boom": [("text", "never asked")],
        }
    )
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"id": "pass", "repo": "repo", "instruction": "Add hello", "check": "test -f hello.txt"},
            {"id": "fail", "directory": "plain", "instruction": "Do nothing", "check": "echo checking; exit 3"},
            {"id": "slow", "repo": "repo", "instruction": "Hang", "timeout": 2},
            {"id": "broken", "directory": "plain", "instruction": "Break"},
            {"id": "crash", "directory": "plain", "instruction": "Boom"},
        ],
    )
    out = tmp_path / "out"
    began = time.monotonic()
    report = _run(tasks, out, server, client_factory=_factory(server, crash="crash"))
    assert time.monotonic() - began < 30
    by_id = {r["id"]: r for r in read_results(out)}
    assert set(by_id) == {"pass", "fail", "slow", "broken", "crash"}

    ok = by_id["pass"]
    assert ok["status"] == "passed" and ok["check"] == "passed" and ok["check_exit_code"] == 0
    assert ok["stop_reason"] == "completed" and ok["steps"] == 2 and ok["tool_calls"] == 1
    assert ok["input_tokens"] == 200 and ok["output_tokens"] == 30 and ok["cost_usd"] > 0
    assert ok["base"] == base
    assert "+++ b/hello.txt" in ok["diff"] and "+hi" in ok["diff"]  # a new file is in the diff
    assert "-x = 1" in ok["diff"] and "+x = 2" in ok["diff"]
    assert (out / "sessions").is_dir() and any(ok["session_id"] in p.name for p in (out / "sessions").rglob("*.jsonl"))

    bad = by_id["fail"]
    assert bad["status"] == "failed" and bad["check"] == "failed" and bad["check_exit_code"] == 3
    assert "checking" in bad["check_output"]
    assert bad["diff"] == ""

    slow = by_id["slow"]
    assert slow["status"] == "timeout" and slow["check"] is None
    assert slow["duration_s"] < 20

    broken = by_id["broken"]
    assert broken["status"] == "error" and broken["stop_reason"] == "error"
    assert "scripted failure" in broken["error"]

    crash = by_id["crash"]
    assert crash["status"] == "crashed" and "the client factory broke" in crash["error"]

    assert report.counts["passed"] == 1 and report.counts["failed"] == 1 and report.counts["timeout"] == 1
    assert report.counts["error"] == 1 and report.counts["crashed"] == 1
    assert report.pass_rate == pytest.approx(0.2)
    # Every working copy is gone, and the repository's worktree list is back to itself.
    assert not any((out / "work").iterdir())
    assert git("worktree", "list", "--porcelain", cwd=tmp_path / "repo").count("worktree ") == 1


def test_resume_skips_finished_tasks_and_retry_failed_runs_them_again(server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    server.responder = TaskScripts({"A": [("text", "a")], "B": [("text", "b")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"id": "a", "directory": "d", "instruction": "A", "check": "true"},
            {"id": "b", "directory": "d", "instruction": "B", "check": "false"},
        ],
    )
    out = tmp_path / "out"
    _run(tasks, out, server)
    assert [r["status"] for r in read_results(out)].count("passed") == 1
    asked = len(server.requests)

    again = _run(tasks, out, server)
    assert again.ran == 0 and again.skipped == 2 and len(server.requests) == asked
    assert len(read_results(out)) == 2
    assert {r["id"]: r["status"] for r in again.results} == {"a": "passed", "b": "failed"}

    retried = _run(tasks, out, server, retry_failed=True)
    assert retried.ran == 1 and retried.skipped == 1
    lines = read_results(out)
    assert [r["id"] for r in lines] in (["a", "b", "b"], ["b", "a", "b"])


def test_a_cut_last_line_is_dropped_and_its_task_runs_again(server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    server.responder = TaskScripts({"A": [("text", "a")], "B": [("text", "b")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"id": "a", "directory": "d", "instruction": "A"}, {"id": "b", "directory": "d", "instruction": "B"}],
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text(json.dumps({"id": "a", "status": "passed"}) + '\n{"id": "b", "sta')
    report = _run(tasks, out, server)
    assert report.ran == 1 and report.skipped == 1
    lines = read_results(out)
    assert [r["id"] for r in lines] == ["a", "b"] and lines[1]["status"] == "passed"


def test_a_damaged_results_file_is_refused_and_left_alone(server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": "a", "directory": "d", "instruction": "A"}])
    out = tmp_path / "out"
    out.mkdir()
    text = 'not json\n{"id": "a", "status": "passed"}\n'
    (out / "results.jsonl").write_text(text)
    with pytest.raises(ra.batch.ResultsFormatError, match="line 1"):
        _run(tasks, out, server)
    assert (out / "results.jsonl").read_text() == text
    assert not server.requests


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "a", "directory": "d"}', "line 2 (id a): 'instruction' is required"),
        ('{"id": "a", "directory": "d", "instruction": "x", "instructions": "y"}', "unknown field 'instructions'"),
        (
            '{"id": "x", "directory": "d", "instruction": "x"}',
            "line 2 (id x): id 'x' is already used (tasks.jsonl line 1",
        ),
        ('{"id": "../up", "directory": "d", "instruction": "x"}', "line 2: id '../up' must be"),
        ('{"id": "a", "repo": "d", "instruction": "x"}', "is not a git repository"),
        ('{"id": "a", "repo": "-uhack", "instruction": "x"}', "cannot start with '-'"),
        ('{"id": "a", "repo": "r", "base": "--output=/tmp/x", "instruction": "x"}', "'base' '--output=/tmp/x' is not"),
        ('{"id": "a", "directory": "d", "repo": "r", "instruction": "x"}', "exactly one of 'repo'"),
        ('{"id": "a", "directory": "missing", "instruction": "x"}', "'directory' missing is not a directory"),
        ('{"id": "a", "directory": "d", "instruction": "x", "timeout": 0}', "'timeout' must be a number > 0"),
        ('{"id": "a", "directory": "d", "instruction": "x", "max_turns": 1.5}', "'max_turns' must be a whole number"),
        ('{"id": "a", "directory": "d", "instruction": "x", "sandbox": "off"}', "'sandbox' 'off' is not one of"),
        ('{"id": "a", "directory": "d", "instruction": "x", "profile": "gpt"}', "'profile' 'gpt' is not one of"),
        ('["a"]', "line 2: a task is a JSON object"),
        ('{"id": "a", "directory": "d", "instruction": ', "line 2: not valid JSON"),
    ],
)
def test_a_bad_tasks_file_names_the_line_and_nothing_starts(
    server: ReplayServer, tmp_path: Path, line: str, message: str
) -> None:
    (tmp_path / "d").mkdir()
    make_repo(tmp_path / "r", {"f": "x"})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "x", "directory": "d", "instruction": "first"}\n' + line + "\n")
    out = tmp_path / "out"
    with pytest.raises(TasksFileError) as caught:
        _run(tasks, out, server)
    assert message in str(caught.value)
    assert not out.exists() and not server.requests


def test_an_empty_tasks_file_is_an_error(server: ReplayServer, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n\n")
    with pytest.raises(TasksFileError, match="no tasks"):
        _run(tasks, tmp_path / "out", server)


def test_a_second_batch_on_the_same_out_dir_is_refused(server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": "a", "directory": "d", "instruction": "A"}])
    out = tmp_path / "out"
    holder = ra.batch.results.ResultsFile(out)  # type: ignore[attr-defined]
    holder.open()
    try:
        with pytest.raises(OutDirInUseError, match=f"pid {os.getpid()}"):
            _run(tasks, out, server)
    finally:
        holder.close()
    assert not server.requests


def test_a_task_with_a_sandbox_is_an_error_result_while_ra_has_no_sandbox(server: ReplayServer, tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("ra.env.sandbox") is not None:
        pytest.skip("ra.env.sandbox exists: tests/batch/test_sandbox.py covers the sandboxed path")
    (tmp_path / "d").mkdir()
    server.responder = TaskScripts({"A": [("text", "a")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [{"id": "a", "directory": "d", "instruction": "A", "sandbox": "read-only"}]
    )
    report = _run(tasks, tmp_path / "out", server)
    (result,) = report.results
    assert result["status"] == "error"
    assert "sandbox 'read-only'" in result["error"] and "ra.env.sandbox" in result["error"]
    assert not server.requests  # nothing ran unconfined


def test_interrupting_stops_running_tasks_records_them_and_leaves_nothing_running(
    server: ReplayServer, tmp_path: Path
) -> None:
    (tmp_path / "d").mkdir()
    marker = tmp_path / "pid"
    server.responder = TaskScripts({"Sleep": [("shell", f"echo $$ > {marker}; exec sleep 60"), ("text", "done")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"id": f"t{i}", "directory": "d", "instruction": "Sleep"} for i in range(3)],
    )
    out = tmp_path / "out"

    async def main() -> None:
        run = asyncio.create_task(
            ra.batch.run_async(
                tasks,
                out_dir=out,
                concurrency=1,
                client_factory=_factory(server),
                model="gpt-4o",
                provider="openai-compatible",
            )
        )
        for _ in range(200):
            if marker.exists() and marker.read_text().strip():
                break
            await asyncio.sleep(0.05)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(run, 30)

    asyncio.run(main())
    pid = int(marker.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    lines = read_results(out)
    assert [(r["id"], r["status"]) for r in lines] == [("t0", "interrupted")]
    assert not any((out / "work").iterdir())
    # The interrupted task runs again next time (its session record stays).
    server.responder = TaskScripts({"Sleep": [("text", "done")]})
    report = _run(tasks, out, server)
    assert report.ran == 3 and report.all_passed


def test_what_the_agent_writes_into_git_metadata_never_runs(server: ReplayServer, tmp_path: Path) -> None:
    make_repo(tmp_path / "repo", {"README.md": "hello\n"})
    (tmp_path / "d").mkdir()
    pwned = tmp_path / "pwned"
    hook = f"#!/bin/sh\ntouch {pwned}\n"
    # The agent replaces the worktree's .git file with a repository whose config runs a command
    # (core.fsmonitor) and whose hooks would run on git add/commit.
    evil = (
        "rm -f .git && git init -q . && git config core.fsmonitor 'touch {p}; false' && "
        "printf '{h}' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo changed > README.md"
    ).format(p=pwned, h=hook.replace("\n", "\\n"))
    server.responder = TaskScripts({"Evil": [("shell", evil), ("text", "done")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"id": "wt", "repo": "repo", "instruction": "Evil"},
            {"id": "dir", "directory": "d", "instruction": "Evil"},
        ],
    )
    report = _run(tasks, tmp_path / "out", server)
    assert not pwned.exists()
    by_id = {r["id"]: r for r in report.results}
    assert "+changed" in by_id["wt"]["diff"] and "-hello" in by_id["wt"]["diff"]
    assert "+changed" in by_id["dir"]["diff"]


def test_a_directory_inside_which_the_batch_writes_is_not_copied_into_itself(
    server: ReplayServer, tmp_path: Path
) -> None:
    (tmp_path / "f.txt").write_text("x\n")
    server.responder = TaskScripts({"A": [("shell", "ls -a"), ("text", "a")]})
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": "a", "directory": ".", "instruction": "A"}])
    report = _run(tasks, tmp_path / "out", server, keep_worktrees=True)
    (result,) = report.results
    assert result["status"] == "passed", result
    copy = Path(result["working_copy"])
    assert (copy / "f.txt").exists() and not (copy / "out").exists()
    assert result["diff"] == ""


def test_a_big_diff_goes_to_a_file(server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    server.responder = TaskScripts({"Big": [("shell", "seq 1 200000 > big.txt"), ("text", "done")]})
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": "big", "directory": "d", "instruction": "Big"}])
    out = tmp_path / "out"
    report = _run(tasks, out, server)
    (result,) = report.results
    assert result["diff_truncated"] is True and len(result["diff"].encode()) <= 1_000_000
    whole = Path(result["diff_file"]).read_text()
    assert whole.startswith(result["diff"]) and "+200000" in whole


def test_a_url_repository_is_cloned_at_its_base(server: ReplayServer, tmp_path: Path) -> None:
    first = make_repo(tmp_path / "origin", {"v.txt": "1\n"})
    (tmp_path / "origin" / "v.txt").write_text("2\n")
    git("commit", "-qam", "two", cwd=tmp_path / "origin")
    server.responder = TaskScripts({"Read": [("text", "ok")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "id": "c",
                "repo": (tmp_path / "origin").as_uri(),
                "base": first,
                "instruction": "Read",
                "check": "grep -qx 1 v.txt",
            }
        ],
    )
    report = _run(tasks, tmp_path / "out", server)
    (result,) = report.results
    assert result["status"] == "passed" and result["base"] == first, result
    # The clone's git directory was outside the working copy, and both are gone.
    assert not any((tmp_path / "out" / "work").iterdir()) and not any((tmp_path / "out" / "git").iterdir())
    subprocess.run(["true"], check=True)


def test_without_ray_installed_the_backend_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "d").mkdir()
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": "a", "directory": "d", "instruction": "x"}])
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ra.batch.RayUnavailableError, match=r"pip install 'ra-agent\[ray\]'"):
        ra.batch.run(tasks, out_dir=tmp_path / "out", backend="ray")
    assert not (tmp_path / "out").exists()


def test_a_check_past_the_task_timeout_is_killed_and_the_task_timed_out(server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    pid = tmp_path / "pid"
    server.responder = TaskScripts({"A": [("text", "a")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"id": "a", "directory": "d", "instruction": "A", "timeout": 2, "check": f"echo $$ > {pid}; exec sleep 60"}],
    )
    began = time.monotonic()
    report = _run(tasks, tmp_path / "out", server)
    assert time.monotonic() - began < 20
    (result,) = report.results
    assert result["status"] == "timeout" and result["check"] == "failed" and result["stop_reason"] == "completed"
    assert "the check did not finish" in result["error"]
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid.read_text()), 0)


def test_limits_from_the_task_and_the_batch(server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    loop = [("shell", "true")]
    server.responder = TaskScripts({"Loop": loop, "Also": loop})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"id": "own", "directory": "d", "instruction": "Loop", "max_turns": 2},
            {"id": "default", "directory": "d", "instruction": "Also"},
        ],
    )
    report = _run(tasks, tmp_path / "out", server, max_turns=3)
    by_id = {r["id"]: r for r in report.results}
    assert by_id["own"]["status"] == "failed" and by_id["own"]["stop_reason"] == "turn_limit"
    assert by_id["own"]["steps"] == 2 and by_id["default"]["steps"] == 3

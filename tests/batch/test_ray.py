"""ra.batch on a local Ray (``ray.init()`` on this machine): the same tasks as Ray tasks.

Slow lane: starting Ray takes seconds. Ray is started small (2 CPUs, no dashboard, a small
object store) with a bound on its start, and shut down after the module.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ra.batch
from tests.batch.support import TaskScripts, chat_client, make_repo, read_results, write_tasks
from tests.support.replay import ReplayServer

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    # Workers import ra (this tree's) and the tests' client factory.
    paths = [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {"PYTHONPATH": os.pathsep.join(p for p in paths if p), "RAY_USAGE_STATS_ENABLED": "0"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    began = time.monotonic()
    try:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=80 * 2**20,
            log_to_driver=False,
            runtime_env={"env_vars": env},
        )
        assert time.monotonic() - began < 120, "ray.init took too long"
        yield ray
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    srv = ReplayServer().start()
    try:
        yield srv
    finally:
        srv.close()


def _options(server: ReplayServer) -> dict[str, Any]:
    return {
        "client_factory": chat_client(server),
        "model": "gpt-4o",
        "provider": "openai-compatible",
        "backend": "ray",
        "concurrency": 2,
    }


def test_ray_backend_runs_tasks_in_workers_and_records_a_dead_worker(
    local_ray: Any, server: ReplayServer, tmp_path: Path
) -> None:
    make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    server.responder = TaskScripts(
        {
            "Edit": [("shell", "echo b >> a.txt"), ("text", "Edited.")],
            "Skip": [("text", "Nothing.")],
            "Die": [("shell", "kill -9 $PPID"), ("text", "unreachable")],
        }
    )
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {"id": "edit", "repo": "repo", "instruction": "Edit", "check": "grep -q b a.txt"},
            {"id": "skip", "repo": "repo", "instruction": "Skip", "check": "grep -q b a.txt"},
            {"id": "die", "repo": "repo", "instruction": "Die"},
        ],
    )
    out = tmp_path / "out"
    began = time.monotonic()
    report = ra.batch.run(tasks, out_dir=out, **_options(server))
    assert time.monotonic() - began < 120
    by_id = {r["id"]: r for r in read_results(out)}
    assert by_id["edit"]["status"] == "passed" and "+b" in by_id["edit"]["diff"]
    assert by_id["edit"]["session_id"] and any(out.joinpath("sessions").rglob("*.jsonl"))
    assert by_id["skip"]["status"] == "failed" and by_id["skip"]["check"] == "failed"
    died = by_id["die"]
    assert died["status"] == "crashed" and "worker" in died["error"].lower(), died
    assert report.counts["passed"] == 1 and report.ran == 3
    # The worker ran in another process: the result says where it ran from the session record.
    again = ra.batch.run(tasks, out_dir=out, **_options(server))
    assert again.ran == 0 and again.skipped == 3
    assert ray.is_initialized()  # a Ray the caller started is left running


def test_cancelling_a_ray_batch_stops_its_tasks(local_ray: Any, server: ReplayServer, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    pids = tmp_path / "pids"
    server.responder = TaskScripts({"Sleep": [("shell", f"echo $$ >> {pids}; exec sleep 60"), ("text", "done")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl", [{"id": f"t{i}", "directory": "d", "instruction": "Sleep"} for i in range(3)]
    )
    out = tmp_path / "out"

    async def main() -> None:
        run = asyncio.create_task(ra.batch.run_async(tasks, out_dir=out, **_options(server)))
        for _ in range(600):  # 60 s at most
            if pids.exists() and len(pids.read_text().split()) >= 2:
                break
            await asyncio.sleep(0.1)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(run, 60)

    asyncio.run(main())
    assert sorted(r["status"] for r in read_results(out)) == ["interrupted", "interrupted"]
    assert not any((out / "work").iterdir())  # the workers cleaned up before they stopped
    for pid in pids.read_text().split():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the task's command {pid} is still running")


def test_ra_batch_backend_ray_starts_a_local_ray_and_stops_it(server: ReplayServer, tmp_path: Path) -> None:
    from tests.cli.support import clean_env, run_ra

    (tmp_path / "d").mkdir()
    server.responder = TaskScripts({"Write": [("shell", "echo x > new.txt"), ("text", "Written.")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"id": f"w{i}", "directory": "d", "instruction": "Write", "check": "test -f new.txt"} for i in range(3)],
    )
    out = tmp_path / "out"
    env = clean_env(tmp_path / "home", OPENAI_COMPATIBLE_API_KEY="k", RAY_USAGE_STATS_ENABLED="0")
    args = ["batch", str(tasks), "--out", str(out), "--backend", "ray", "--base-url", f"{server.base_url}/v1"]
    done = run_ra([*args, "--model", "gpt-4o", "--json"], env, cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr
    assert [r["status"] for r in read_results(out)] == ["passed"] * 3
    assert all("+x" in r["diff"] for r in read_results(out))
    # The workers read the key from the environment they inherited (it was not in the recipe).
    assert server.requests and {r.headers.get("authorization") for r in server.requests} == {"Bearer k"}

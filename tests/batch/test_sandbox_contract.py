"""A task's ``sandbox``: ra.batch builds the environment with part A's constructor
(``SandboxedExecutionEnvironment(LocalExecutionEnvironment(working_dir=...), SandboxPolicy(mode))``,
DESIGN-19) and runs the agent's commands and the check through it; a sandbox that cannot be had
is an error result and nothing runs unconfined.

Two tests put a stand-in module of that shape in its place (it confines nothing: it records what
it was given and what ran through it, or fails to start); the last runs the real sandbox, bwrap.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

import ra.batch
from tests.batch.support import TaskScripts, chat_client, read_results, write_tasks
from tests.support.replay import ReplayServer


@pytest.fixture
def server() -> Any:
    srv = ReplayServer().start()
    try:
        yield srv
    finally:
        srv.close()


class _Policy:
    def __init__(self, mode: str, network: bool = False, writable_roots: tuple[str, ...] = ()) -> None:
        if mode not in ("read-only", "workspace-write", "danger-full-access"):
            raise ValueError(mode)
        self.mode = mode


class _Unavailable(Exception):
    pass


def _stand_in(built: list[Any], ran: list[str], unavailable: bool = False) -> types.ModuleType:
    class Sandboxed:
        def __init__(self, inner: Any, policy: _Policy) -> None:
            if unavailable:
                raise _Unavailable("bwrap is missing: install bubblewrap")
            built.append((inner, policy))
            self._inner = inner

        async def exec_command(self, command: str, *args: Any, **kwargs: Any) -> Any:
            ran.append(command)
            return await self._inner.exec_command(command, *args, **kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    module = types.ModuleType("ra.env.sandbox")
    module.SandboxedExecutionEnvironment = Sandboxed  # type: ignore[attr-defined]
    module.SandboxPolicy = _Policy  # type: ignore[attr-defined]
    return module


def _run(tasks: Path, out: Path, server: ReplayServer) -> Any:
    return ra.batch.run(
        tasks,
        out_dir=out,
        client_factory=chat_client(server),
        model="gpt-4o",
        provider="openai-compatible",
    )


def test_a_sandboxed_task_runs_its_commands_and_check_through_the_sandbox(
    server: ReplayServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[Any] = []
    ran: list[str] = []
    monkeypatch.setitem(sys.modules, "ra.env.sandbox", _stand_in(built, ran))
    (tmp_path / "d").mkdir()
    server.responder = TaskScripts({"Touch": [("shell", "touch made.txt"), ("text", "ok")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "id": "s",
                "directory": "d",
                "instruction": "Touch",
                "sandbox": "workspace-write",
                "check": "test -f made.txt",
            }
        ],
    )
    out = tmp_path / "out"
    report = _run(tasks, out, server)
    (result,) = report.results
    assert result["status"] == "passed", result
    ((inner, policy),) = built
    assert type(inner).__name__ == "LocalExecutionEnvironment"
    assert inner.working_directory() == str(out / "work" / "s")
    assert policy.mode == "workspace-write"
    # Every command went through it: the profile's look at the tree, the agent's, the check.
    assert ran[-2:] == ["touch made.txt", "test -f made.txt"]


def test_a_sandbox_that_cannot_start_is_an_error_and_nothing_runs(
    server: ReplayServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ra.env.sandbox", _stand_in([], [], unavailable=True))
    (tmp_path / "d").mkdir()
    server.responder = TaskScripts({"Touch": [("shell", "touch made.txt"), ("text", "ok")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"id": "s", "directory": "d", "instruction": "Touch", "sandbox": "read-only", "check": "true"}],
    )
    out = tmp_path / "out"
    _run(tasks, out, server)
    (result,) = read_results(out)
    assert result["status"] == "error" and result["check"] is None
    assert "sandbox 'read-only': bwrap is missing: install bubblewrap" in result["error"]
    assert not server.requests


def test_a_read_only_task_under_real_bwrap_writes_nothing(server: ReplayServer, tmp_path: Path) -> None:
    """The real sandbox: the agent's write in a read-only task fails, so does the check that wants
    the file, and nothing reaches the working copy or the diff."""
    from tests.env.sandbox.support import require_bwrap

    require_bwrap()
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "kept.txt").write_text("kept\n")
    server.responder = TaskScripts({"Touch": [("shell", "echo new > made.txt; echo more >> kept.txt"), ("text", "ok")]})
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [{"id": "ro", "directory": "d", "instruction": "Touch", "sandbox": "read-only", "check": "test -f made.txt"}],
    )
    out = tmp_path / "out"
    _run(tasks, out, server)
    (result,) = read_results(out)
    assert result["status"] == "failed" and result["check"] == "failed", result
    assert not result["diff"], result["diff"]

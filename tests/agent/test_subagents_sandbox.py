"""Subagents of a sandboxed session stay in the sandbox: they share the parent's environment
(directly, or scoped to a ``working_dir``), and its commands and file tools are confined."""

from __future__ import annotations

from pathlib import Path

import pytest

from ra.agent.events import EventKind as E
from ra.env import LocalExecutionEnvironment
from ra.env.sandbox import SandboxedExecutionEnvironment
from ra.llm.testing import call, calls, reply
from tests.env.sandbox.support import require_bwrap

from .support import Recorder
from .test_subagents import PARENT, file_tools, make_parent, wait_for, wrapped


@pytest.mark.parametrize("working_dir", [None, "sub"])
async def test_a_subagent_of_a_read_only_session_cannot_write(tmp_path: Path, working_dir: str | None) -> None:
    require_bwrap()
    (tmp_path / "sub").mkdir()
    env = SandboxedExecutionEnvironment(LocalExecutionEnvironment(tmp_path), "read-only")
    spawn = {"task": "child"} if working_dir is None else {"task": "child", "working_dir": working_dir}
    session, _, _ = make_parent(
        {
            PARENT: [call("spawn_agent", **spawn), wait_for(), reply("ok")],
            "child": [
                calls(
                    ("sh", {"command": "touch by-shell && echo wrote"}),
                    ("write", {"path": "by-tool.txt", "content": "x"}),
                ),
                reply("tried"),
            ],
        },
        env=env,
        extra_tools=file_tools(),
    )
    rec = Recorder(session)
    await session.submit(PARENT)
    await session.close()
    ends = [e for e in wrapped(rec) if e.kind is E.TOOL_CALL_END]
    shell, write = ends
    assert "Read-only file system" in shell["output"] and "wrote" not in shell["output"]
    assert write["is_error"] and "sandbox (read-only)" in write["output"]
    assert not await env.glob("**/by-*")

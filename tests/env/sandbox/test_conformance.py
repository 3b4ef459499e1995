"""The conformance kit against the sandbox: a sandboxed environment keeps every promise of the
local one (typed errors, whole-tree kill on timeout and abort, output capture, secret filtering)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ra.agent.subagents import ChildExecutionEnvironment
from ra.env import ExecutionEnvironment, ScopedExecutionEnvironment
from ra.env.testing import EnvironmentConformance

from .support import CAP, GRACE_MS, sandboxed

#: The slow lane (``pytest -m slow``, which CI runs): real bwrap sandboxes, the whole conformance kit.
pytestmark = pytest.mark.slow


class _Fast(EnvironmentConformance):
    kill_grace_s = GRACE_MS / 1000
    output_memory_cap = CAP
    check_timeout_s = 30.0


class TestWorkspaceWrite(_Fast):
    async def make_environment(self, root: Path) -> ExecutionEnvironment:
        return sandboxed(root, "workspace-write")


class TestWorkspaceWriteWithNetwork(_Fast):
    async def make_environment(self, root: Path) -> ExecutionEnvironment:
        return sandboxed(root, "workspace-write", network=True)


class TestSubagentInSandbox(_Fast):
    """What a subagent with a working_dir gets from a sandboxed session."""

    async def make_environment(self, root: Path) -> ExecutionEnvironment:
        (root / "work").mkdir()
        return ChildExecutionEnvironment(ScopedExecutionEnvironment(sandboxed(root, "workspace-write"), "work"))

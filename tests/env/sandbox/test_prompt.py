"""The model is told about the sandbox (mode, what it may change, the network) in its system
prompt - also a subagent's, whose environment wraps the parent's - so a refused write or download
is not retried blindly; an unconfined session's prompt has no such block."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ra.agent.subagents import ChildExecutionEnvironment
from ra.env import LocalExecutionEnvironment, ScopedExecutionEnvironment
from ra.profiles.prompting import assemble_system_prompt, load_base_prompt

from .support import sandboxed


def prompt(env: object) -> str:
    return asyncio.run(assemble_system_prompt(base=load_base_prompt("anthropic"), env=env, model="m", tools=()))  # type: ignore[arg-type]


def test_the_prompt_names_the_sandbox(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    env = sandboxed(tmp_path, "workspace-write")
    text = prompt(env)
    block = text[text.index("<sandbox>") : text.index("</sandbox>")]
    assert "workspace-write sandbox" in block and str(tmp_path.resolve()) in block and "network access is off" in block
    assert text.index("</environment>") < text.index("<sandbox>")
    child = ChildExecutionEnvironment(ScopedExecutionEnvironment(env, "sub"))
    assert block in prompt(child)
    assert "network access is on" in prompt(sandboxed(tmp_path / "sub", "read-only", network=True))


def test_no_sandbox_no_block(tmp_path: Path) -> None:
    assert "<sandbox>" not in prompt(LocalExecutionEnvironment(tmp_path))
    assert "<sandbox>" not in prompt(sandboxed(tmp_path, "danger-full-access"))

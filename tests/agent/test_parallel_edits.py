"""Parallel tool rounds never lose an edit (hardening issue, item 1).

The provider profiles run a round's calls concurrently. With an environment whose file I/O really
awaits (any remote environment; local files past the worker-thread threshold), concurrent
read-modify-write edits of one file all "succeed" and only the last write survives. Editing
tools (``ToolEffect.EDIT``) therefore run alone and in the model's order, while reads and
commands still run together.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ra.agent import Session, SessionConfig
from ra.env.local import LocalExecutionEnvironment
from ra.env.wrappers import DelegatingExecutionEnvironment
from ra.llm.client import Client
from ra.llm.testing import ScriptedAdapter, calls, reply
from ra.profiles import create_anthropic_profile, create_openai_profile
from ra.tools.registry import RegisteredTool, ToolEffect, ToolRegistry

from .support import FAST_RETRY

LINES = [f"line {i}\n" for i in range(1, 9)]


class SlowIO(DelegatingExecutionEnvironment):
    """Every file read and write yields to the event loop for a while, as a remote one does."""

    def __init__(self, inner: LocalExecutionEnvironment, delay: float = 0.02) -> None:
        super().__init__(inner)
        self.delay = delay
        self.active = 0
        self.peak = 0

    async def _slow(self, call):  # type: ignore[no-untyped-def]
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(self.delay)
            return await call
        finally:
            self.active -= 1

    async def read_bytes(self, path: str) -> bytes:
        return await self._slow(self.inner.read_bytes(path))

    async def read_file(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        return await self._slow(self.inner.read_file(path, offset, limit))

    async def write_file(self, path: str, content: str | bytes) -> None:
        await self._slow(self.inner.write_file(path, content))

    async def file_exists(self, path: str) -> bool:
        return await self._slow(self.inner.file_exists(path))


def _session(profile, env, script, provider: str) -> tuple[Session, ScriptedAdapter]:  # type: ignore[no-untyped-def]
    model = ScriptedAdapter(script)
    session = Session(profile, env, Client(providers={provider: model}), SessionConfig(retry_policy=FAST_RETRY))
    return session, model


def _tool_results(model: ScriptedAdapter) -> list[str]:
    messages = model.requests[-1].messages
    return [m.content[0].tool_result.content for m in messages if m.role == "tool"]  # type: ignore[union-attr]


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, SlowIO]:
    (tmp_path / "notes.txt").write_text("".join(LINES))
    return tmp_path, SlowIO(LocalExecutionEnvironment(tmp_path))


async def test_four_parallel_edit_file_calls_all_land(workspace: tuple[Path, SlowIO]) -> None:
    root, env = workspace
    profile = create_anthropic_profile(model="m")
    assert profile.supports_parallel_tool_calls
    edits = [
        ("edit_file", {"file_path": "notes.txt", "old_string": f"line {i}\n", "new_string": f"LINE {i}\n"})
        for i in (1, 3, 5, 7)
    ]
    session, model = _session(profile, env, [calls(*edits), reply("done")], "anthropic")
    result = await session.submit("edit")
    assert result.stop_reason == "completed"
    text = (root / "notes.txt").read_text()
    assert [line for line in text.splitlines() if line.startswith("LINE")] == ["LINE 1", "LINE 3", "LINE 5", "LINE 7"]
    assert not any("rror" in r for r in _tool_results(model))


async def test_four_parallel_apply_patch_calls_all_land(workspace: tuple[Path, SlowIO]) -> None:
    root, env = workspace
    profile = create_openai_profile(model="m")
    assert profile.supports_parallel_tool_calls

    def patch(i: int) -> str:
        return f"*** Begin Patch\n*** Update File: notes.txt\n@@\n-line {i}\n+PATCHED {i}\n*** End Patch\n"

    session, model = _session(
        profile, env, [calls(*(("apply_patch", {"input": patch(i)}) for i in (2, 4, 6, 8))), reply("ok")], "openai"
    )
    await session.submit("patch")
    text = (root / "notes.txt").read_text()
    assert [ln for ln in text.splitlines() if ln.startswith("PATCHED")] == [f"PATCHED {i}" for i in (2, 4, 6, 8)]
    assert all("notes.txt" in r for r in _tool_results(model))


async def test_parallel_writes_land_in_the_models_order(workspace: tuple[Path, SlowIO]) -> None:
    """write_file, then edit_file of what it wrote, then another write: the last call wins, as the
    model asked. Concurrent, the edit would read the old file and overwrite the first write."""
    root, env = workspace
    profile = create_anthropic_profile(model="m")
    round_ = calls(
        ("write_file", {"file_path": "out.txt", "content": "alpha\n"}),
        ("edit_file", {"file_path": "out.txt", "old_string": "alpha", "new_string": "beta"}),
        ("write_file", {"file_path": "log.txt", "content": "first\n"}),
        ("write_file", {"file_path": "log.txt", "content": "second\n"}),
    )
    session, model = _session(profile, env, [round_, reply("ok")], "anthropic")
    await session.submit("write")
    assert (root / "out.txt").read_text() == "beta\n"
    assert (root / "log.txt").read_text() == "second\n"
    assert not any(r.startswith(("Error", "Tool error")) for r in _tool_results(model))


async def test_read_only_calls_still_run_together(workspace: tuple[Path, SlowIO]) -> None:
    root, env = workspace
    for name in "abcd":
        (root / f"{name}.txt").write_text(name)
    profile = create_anthropic_profile(model="m")
    reads = [("read_file", {"file_path": f"{name}.txt"}) for name in "abcd"]
    session, _ = _session(profile, env, [calls(*reads), reply("ok")], "anthropic")
    await session.submit("read")
    assert env.peak >= 2  # the four reads overlapped


async def test_a_read_after_an_edit_sees_the_edit(workspace: tuple[Path, SlowIO]) -> None:
    _root, env = workspace
    profile = create_anthropic_profile(model="m")
    round_ = calls(
        ("read_file", {"file_path": "notes.txt"}),
        ("edit_file", {"file_path": "notes.txt", "old_string": "line 2\n", "new_string": "CHANGED\n"}),
        ("read_file", {"file_path": "notes.txt"}),
    )
    session, model = _session(profile, env, [round_, reply("ok")], "anthropic")
    await session.submit("go")
    before, _, after = _tool_results(model)
    assert "line 2" in before and "CHANGED" not in before
    assert "CHANGED" in after


def test_effect_is_declared_by_every_builtin_tool() -> None:
    profile = create_anthropic_profile(model="m")
    effects = {tool.name: tool.effect for tool in profile.tool_registry}
    assert effects["read_file"] is ToolEffect.READ
    assert effects["edit_file"] is ToolEffect.EDIT and effects["write_file"] is ToolEffect.EDIT
    assert effects["shell"] is ToolEffect.EXECUTE
    assert all(effect is not None for effect in effects.values()), effects


def test_effect_accepts_strings_and_rejects_unknown_values() -> None:
    registry = ToolRegistry()
    tool = registry.add("t", "", None, lambda args, ctx: "", effect="edit")
    assert tool.effect is ToolEffect.EDIT and tool.mutating and tool.exclusive
    shell = registry.add("s", "", None, lambda args, ctx: "", effect=ToolEffect.EXECUTE)
    assert shell.mutating and not shell.exclusive
    undeclared = registry.add("u", "", None, lambda args, ctx: "")
    assert undeclared.mutating and not undeclared.exclusive
    with pytest.raises(ValueError, match="effect must be one of"):
        RegisteredTool(registry.get("t").definition, lambda a, c: "", effect="destroy")  # type: ignore[arg-type,union-attr]

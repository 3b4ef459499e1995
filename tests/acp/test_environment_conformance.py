"""``AcpEnvironment`` against the environment conformance kit: file reads and writes go through a
real ACP connection (the package's agent and client sides over a socket pair, in process) to an
editor that serves them from disk; commands, listing and search fall to the local environment
underneath (the checks of those confirm the delegation). The editor's terminal is tested with
the real ``ra acp`` in test_acp_agent.py."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

from acp.core import AgentSideConnection, ClientSideConnection

import acp
from ra.acp.environment import AcpEnvironment
from ra.env.local import LocalExecutionEnvironment
from ra.env.testing import EnvironmentConformance
from tests.acp.support import Editor

#: The connections of the environments made here (referenced, so none is collected while used).
_OPEN: list[tuple[Any, Any]] = []


class _NoAgent:
    """The agent side's handler: this test only sends requests from the agent to the editor."""

    def on_connect(self, conn: Any) -> None:
        pass


async def connected_environment(root: Path, editor: Editor) -> AcpEnvironment:
    """An AcpEnvironment over a real connection to ``editor``; the connection lives as long as
    the event loop (as an agent's lives as long as its process: ``cleanup`` leaves it open)."""
    a, b = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=a)
    client_reader, client_writer = await asyncio.open_connection(sock=b)
    agent_side = AgentSideConnection(_NoAgent(), agent_writer, agent_reader)
    client_side = ClientSideConnection(editor, client_writer, client_reader)
    local = LocalExecutionEnvironment(str(root), kill_grace_ms=300, output_memory_cap=64 * 1024)
    env = AcpEnvironment(local, agent_side, "s1", read=True, write=True, terminal=False)
    _OPEN.append((agent_side, client_side))
    return env


class TestAcpEnvironment(EnvironmentConformance):
    kill_grace_s = 0.3
    output_memory_cap = 64 * 1024

    async def make_environment(self, root: Path) -> AcpEnvironment:
        self.editor = Editor()
        return await connected_environment(root, self.editor)


async def test_reads_see_the_editor_buffer_and_writes_reach_the_editor(tmp_path: Path) -> None:
    editor = Editor()
    env = await connected_environment(tmp_path, editor)
    try:
        path = tmp_path / "a.txt"
        path.write_text("disk\r\n")
        assert await asyncio.wait_for(env.read_bytes("a.txt"), 10) == b"disk\r\n"  # same text: the file's bytes
        editor.buffers[str(path)] = "buffer one\nbuffer two\n"
        assert await asyncio.wait_for(env.read_file("a.txt"), 10) == "1 | buffer one\n2 | buffer two"
        assert await asyncio.wait_for(env.read_file("a.txt", offset=2), 10) == "2 | buffer two"
        assert await asyncio.wait_for(env.read_bytes("a.txt"), 10) == b"buffer one\nbuffer two\n"
        await asyncio.wait_for(env.write_file("new/b.txt", "written"), 10)
        assert editor.writes == [(str(tmp_path / "new" / "b.txt"), "written")]
        await asyncio.wait_for(env.write_file("c.bin", b"\xff\x00"), 10)  # not text: written locally
        assert (tmp_path / "c.bin").read_bytes() == b"\xff\x00" and len(editor.writes) == 1
    finally:
        await env.cleanup()


async def test_an_editor_that_refuses_a_write_is_an_os_error(tmp_path: Path) -> None:
    class Refusing(Editor):
        async def write_text_file(self, content: str, path: str, session_id: str, **kw: Any) -> Any:
            raise acp.RequestError.invalid_params({"message": "read-only buffer"})

    env = await connected_environment(tmp_path, Refusing())
    try:
        try:
            await asyncio.wait_for(env.write_file("a.txt", "x"), 10)
        except OSError as exc:
            assert "did not write" in str(exc)
        else:
            raise AssertionError("the refused write was reported as done")
        assert not (tmp_path / "a.txt").exists()
    finally:
        await env.cleanup()

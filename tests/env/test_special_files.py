"""File tools never block the event loop on special files (hardening issue, item 6).

Opening a FIFO for reading waits for a writer, and for writing waits for a reader; a character
device such as /dev/zero never ends. Each must give a clear error at once, and the event loop -
which abort, interrupt, timeouts and the time limit run on - must keep running meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import pytest

from ra.agent import SessionConfig, StopReason
from ra.env.local import LocalExecutionEnvironment
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, call, reply

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


async def ticking(seconds: float) -> int:
    """How often the loop got to run during ``seconds`` (a frozen loop gives ~0)."""
    ticks = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        await asyncio.sleep(0.01)
        ticks += 1
    return ticks


async def _bounded(awaitable):  # type: ignore[no-untyped-def]
    return await asyncio.wait_for(awaitable, 2)


@pytest.mark.parametrize("operation", ["read_file", "read_bytes"])
async def test_reading_a_fifo_is_a_clear_error_not_a_hang(tmp_path: Path, fifo: Path, operation: str) -> None:
    env = LocalExecutionEnvironment(tmp_path)
    ticks = asyncio.create_task(ticking(0.3))
    with pytest.raises(ValueError, match="named pipe"):
        await _bounded(getattr(env, operation)("pipe"))
    assert await ticks > 10


async def test_writing_a_fifo_is_a_clear_error_not_a_hang(tmp_path: Path, fifo: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path)
    with pytest.raises(ValueError, match="named pipe"):
        await _bounded(env.write_file("pipe", "data"))


async def test_grep_on_a_fifo_is_refused(tmp_path: Path, fifo: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path)
    with pytest.raises(ValueError, match="named pipe"):
        await _bounded(env.grep("x", "pipe"))
    (tmp_path / "a.txt").write_text("needle\n")
    out = await _bounded(env.grep("needle", "."))  # a FIFO inside a searched directory is skipped
    assert "a.txt" in out


async def test_devices_and_sockets_are_refused(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path)
    with pytest.raises(ValueError, match="character device"):
        await _bounded(env.read_bytes("/dev/zero"))
    with pytest.raises(ValueError, match="character device"):
        await _bounded(env.read_file("/dev/zero"))
    sock_path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        with pytest.raises(ValueError, match="socket"):
            await _bounded(env.read_file("s.sock"))
    finally:
        server.close()


async def test_proc_files_still_read(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path)
    text = await _bounded(env.read_file("/proc/self/status"))
    assert "Pid:" in text


async def test_a_session_stays_stoppable_when_the_model_reads_a_fifo(tmp_path: Path, fifo: Path) -> None:
    from ra.agent import Session
    from ra.profiles import create_anthropic_profile

    model = ScriptedAdapter([call("read_file", file_path="pipe"), reply("ok")])
    config = SessionConfig(prices={"m": ModelPrice.free()}, time_limit_s=5)
    session = Session(
        create_anthropic_profile(model="m"),
        LocalExecutionEnvironment(tmp_path),
        Client(providers={"anthropic": model}),
        config,
    )
    result = await asyncio.wait_for(session.submit("read it"), 3)
    assert result.stop_reason is StopReason.COMPLETED
    tool_result = next(m for m in model.requests[1].messages if m.role == "tool").content[0].tool_result
    assert tool_result.is_error and "named pipe" in tool_result.content  # type: ignore[union-attr]

"""ra.env.pipes: a child that trickles small writes is read in fewer pieces, and nothing is lost
or reordered; a child that writes fast is not held back."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from ra.env import LocalExecutionEnvironment
from ra.env.pipes import PipeReader, make_pipe

#: Writes 600 numbered lines, one write each, a fraction of a millisecond apart.
TRICKLE = "import os, time\nfor i in range(600):\n    os.write(1, b'%d\\n' % i)\n    time.sleep(0.0001)\n"
EXPECTED = "".join(f"{i}\n" for i in range(600))


async def test_a_trickle_reaches_on_output_whole_in_fewer_pieces(tmp_path: Path) -> None:
    (tmp_path / "trickle.py").write_text(TRICKLE)
    env = LocalExecutionEnvironment(tmp_path)
    pieces: list[str] = []
    started = time.monotonic()
    result = await env.exec_command(f"{sys.executable} trickle.py", on_output=lambda s, t: pieces.append(t))
    elapsed_ms = (time.monotonic() - started) * 1000
    assert result.stdout == EXPECTED and "".join(pieces) == EXPECTED
    # Past the first few, a short read is followed by a 1 ms pause: at most about one piece per
    # millisecond, however many writes the child made (it used to be close to one per write).
    assert len(pieces) <= elapsed_ms + 10, (len(pieces), elapsed_ms)


async def test_pipe_reader_gathers_a_trickle_and_keeps_its_order() -> None:
    read_fd, write_fd = make_pipe()
    try:
        child = await asyncio.create_subprocess_exec(sys.executable, "-c", TRICKLE, stdout=write_fd)
    finally:
        os.close(write_fd)
    reader = PipeReader(read_fd)
    pieces: list[bytes] = []
    started = time.monotonic()
    try:
        while piece := await asyncio.wait_for(reader.read(), 10):
            pieces.append(piece)
    finally:
        reader.close()
        await asyncio.wait_for(child.wait(), 10)
    elapsed_ms = (time.monotonic() - started) * 1000
    assert b"".join(pieces).decode() == EXPECTED
    assert len(pieces) <= elapsed_ms + 10, (len(pieces), elapsed_ms)
    assert await reader.read() == b""  # closed: the end, not an error


async def test_a_fast_writer_is_read_in_large_pieces(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path, output_memory_cap=64 * 1024 * 1024)
    sizes: list[int] = []
    result = await env.exec_command("head -c 30000000 /dev/zero", on_output=lambda s, t: sizes.append(len(t)))
    assert result.total_bytes == 30_000_000 and sum(sizes) == 30_000_000
    assert len(sizes) < 30_000_000 / (64 * 1024)  # fewer pieces than 64 KiB reads would give

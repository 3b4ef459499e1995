"""Command output read through ra's own pipes (``ra.env.pipes``): what the capture gives back is
unchanged, byte for byte, on the inputs large reads could break, and no descriptor leaks."""

from __future__ import annotations

import asyncio
import collections
import os
import sys
from pathlib import Path

import pytest

from ra.env import LocalExecutionEnvironment
from ra.env.pipes import PIPE_SIZE

from .procs import kill_quietly, needs_proc


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def pipe_max_size() -> int:
    try:
        with open("/proc/sys/fs/pipe-max-size") as fh:
            return int(fh.read())
    except OSError:
        return 0


@needs_proc
@pytest.mark.skipif(pipe_max_size() < PIPE_SIZE, reason="pipes cannot be enlarged this far here")
async def test_the_command_writes_into_enlarged_pipes(tmp_path: Path) -> None:
    """A fast producer is drained in pieces of up to a MiB instead of 64 KiB."""
    env = LocalExecutionEnvironment(tmp_path)
    probe = "import fcntl, sys; print(fcntl.fcntl(1, 1032), fcntl.fcntl(2, 1032))"  # F_GETPIPE_SZ
    result = await env.exec_command(f"{sys.executable} -c '{probe}'")
    assert result.stdout.split() == [str(PIPE_SIZE), str(PIPE_SIZE)], result.stderr


@needs_proc
async def test_the_child_holds_no_other_end_of_its_pipes(tmp_path: Path) -> None:
    """The read ends stay in ra: a child holding one would keep its own output pipe open."""
    env = LocalExecutionEnvironment(tmp_path)
    (tmp_path / "probe.py").write_text(
        "import os\n"
        "def pipe(fd):\n"
        "    try:\n"
        "        return os.readlink(f'/proc/self/fd/{fd}')\n"
        "    except OSError:\n"
        "        return None\n"
        "ours = {pipe(1), pipe(2)}\n"
        "print(sorted(str(fd) for fd in range(1024) if pipe(fd) in ours))\n"
    )
    result = await env.exec_command(f"{sys.executable} probe.py")
    assert result.stdout.strip() == "['1', '2']", result.stderr


@needs_proc
async def test_no_descriptor_is_left_open_whatever_way_a_command_ends(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path, output_memory_cap=64 * 1024, background_grace_ms=100)
    await env.exec_command("true")
    before = set(os.listdir("/proc/self/fd"))
    await env.exec_command("echo out; echo err >&2")
    await env.exec_command("head -c 300000 /dev/zero")  # spilled
    await env.exec_command("sleep 5", timeout_ms=100)  # timed out
    await env.exec_command("sleep 5 & echo started")  # a background child holds the pipes
    # One that escaped the tree (a new session, no cookie) still holds them when the call returns.
    escaped = await env.exec_command("env -i setsid sleep 5 & echo $!")
    try:
        assert set(os.listdir("/proc/self/fd")) == before
    finally:
        kill_quietly(int(escaped.stdout.strip()))
    task = asyncio.ensure_future(env.exec_command("sleep 5"))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await env.cleanup()
    assert set(os.listdir("/proc/self/fd")) == before


def all_bytes(size: int) -> bytes:
    """Every byte value, in runs that make valid, cut and invalid UTF-8 sequences."""
    pattern = bytes(range(256)) + "é€😀\r\n".encode() + b"\xe2\x82" + b"\xf0\x9f\x98" + b"\n\xc3"
    return (pattern * (size // len(pattern) + 1))[:size]


@pytest.mark.parametrize("size", [10_000, 3_000_000], ids=["small", "several-reads"])
async def test_binary_output_is_decoded_as_a_whole_and_streamed_whole(tmp_path: Path, size: int) -> None:
    data = all_bytes(size)
    (tmp_path / "data.bin").write_bytes(data)
    env = LocalExecutionEnvironment(tmp_path, output_memory_cap=8 * 1024 * 1024)
    streamed: list[str] = []
    result = await env.exec_command("cat data.bin", on_output=lambda stream, text: streamed.append(text))
    expected = data.decode("utf-8", errors="replace")
    assert result.stdout == expected
    assert "".join(streamed) == expected  # no sequence split by a read is mangled
    assert result.total_bytes == size and result.full_output_path is None


async def test_multibyte_text_split_by_large_reads_is_streamed_whole(tmp_path: Path) -> None:
    text = "".join(f"{i} é€😀 " for i in range(400_000))  # ~6 MB, no replacement character in it
    (tmp_path / "text.txt").write_text(text)
    env = LocalExecutionEnvironment(tmp_path, output_memory_cap=1024 * 1024)
    streamed: list[str] = []
    result = await env.exec_command("cat text.txt", on_output=lambda stream, chunk: streamed.append(chunk))
    assert "".join(streamed) == text
    assert result.full_output_path is not None
    assert read_bytes(result.full_output_path).decode() == text
    head, _, tail = result.stdout.partition("\n\n[... ")
    assert "\ufffd" not in head and "\ufffd" not in tail.partition("...]\n\n")[2]
    assert text.startswith(head) and text.endswith(tail.partition("...]\n\n")[2])


@pytest.mark.parametrize("extra", [0, 1], ids=["exactly-the-cap", "one-byte-more"])
async def test_spill_starts_one_byte_past_the_cap(tmp_path: Path, extra: int) -> None:
    cap = 256 * 1024
    data = all_bytes(cap + extra)
    (tmp_path / "data.bin").write_bytes(data)
    env = LocalExecutionEnvironment(tmp_path, output_memory_cap=cap)
    result = await env.exec_command("cat data.bin; printf '' >&2")
    assert result.total_bytes == cap + extra
    if extra:
        assert result.full_output_path is not None
        assert read_bytes(result.full_output_path) == data
        assert f"({cap + extra} bytes in all)" in result.stdout
    else:
        assert result.full_output_path is None
        assert result.stdout == data.decode("utf-8", errors="replace")


async def test_a_long_crlf_line_keeps_its_ends_and_the_spill_file_every_byte(tmp_path: Path) -> None:
    line = b"start" + b"0123456789" * 500_000 + b"end\r\n"  # 5 MB, no newline before its end
    (tmp_path / "line.txt").write_bytes(line * 2)
    env = LocalExecutionEnvironment(tmp_path, output_memory_cap=1024 * 1024)
    result = await env.exec_command("cat line.txt; echo tail >&2")
    assert result.full_output_path is not None
    spilled = read_bytes(result.full_output_path)
    assert spilled.count(b"tail\n") == 1 and spilled.replace(b"tail\n", b"") == line * 2
    assert result.stdout.startswith("start0123456789") and result.stdout.endswith("789end\r\n")
    assert len(result.stdout.encode()) < 1024 * 1024 and result.stderr == "tail\n"


#: Writes numbered blocks of 50 KB to stdout and stderr in turn, each block's bytes its own.
ALTERNATE = """
import os, sys
for i in range(120):
    fd = 1 + i % 2
    block = (b"%s%05d|" % (b"OE"[i % 2 : i % 2 + 1], i)) * 7_000
    view = memoryview(block)
    while view:
        view = view[os.write(fd, view) :]
"""


def alternate_expected() -> tuple[bytes, bytes]:
    out, err = [], []
    for i in range(120):
        (out if i % 2 == 0 else err).append((b"%s%05d|" % (b"OE"[i % 2 : i % 2 + 1], i)) * 7_000)
    return b"".join(out), b"".join(err)


@pytest.mark.parametrize("callback", [False, True], ids=["spliced", "read"])
async def test_both_streams_keep_their_own_tail_past_the_cap(tmp_path: Path, callback: bool) -> None:
    """Past the cap, bytes go from the pipes into the spill file without passing through Python
    (when no callback wants them): each stream's tail is read back from its own places in the
    file, interleaved as the two streams were."""
    (tmp_path / "alternate.py").write_text(ALTERNATE)
    cap = 256 * 1024
    env = LocalExecutionEnvironment(tmp_path, output_memory_cap=cap)
    seen: list[str] = []
    result = await env.exec_command(
        f"{sys.executable} alternate.py", on_output=(lambda s, t: seen.append(t)) if callback else None
    )
    out, err = alternate_expected()
    assert result.total_bytes == len(out) + len(err)
    assert result.full_output_path is not None
    spilled = read_bytes(result.full_output_path)
    assert collections.Counter(spilled) == collections.Counter(out + err)  # every byte, both streams
    for text, data, name in ((result.stdout, out, "stdout"), (result.stderr, err, "stderr")):
        head, marker, tail = text.partition("\n\n[... ")
        assert marker and f"bytes of {name} omitted" in tail
        tail = tail.partition("...]\n\n")[2]
        assert data.decode().startswith(head) and len(head) == cap // 4
        assert data.decode().endswith(tail) and len(tail) == cap // 4
    await env.cleanup()

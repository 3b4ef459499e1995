"""A real full disk: a 256 KiB tmpfs mounted for the test (root only; CI runs as root).

Every file tool must fail with a clear error and leave what was on disk as it was; a command
whose output no longer fits the spill directory must still end with a result.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ra.tools.builtin import apply_patch_tool, edit_file_tool, shell_command_tool, write_file_tool

from .builtin_support import Runner, local_env


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


pytestmark = pytest.mark.skipif(not _can_mount(), reason="mounting a tmpfs needs root")

SIZE = 256 * 1024


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A tiny tmpfs with ``keep.txt`` and ``other.txt`` on it, then filled to the last byte."""
    root = tmp_path / "disk"
    root.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(root)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        (root / "keep.txt").write_text("line one\nline two\nline three\n")
        (root / "other.txt").write_text("alpha\nbeta\n")
        fd = os.open(root / "filler", os.O_WRONLY | os.O_CREAT)
        try:  # take every free block
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)


def _spill_files(root: Path) -> list[Path]:
    return list(root.rglob("command-*.log"))


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.name != "filler"}


async def test_write_file_on_a_full_disk_keeps_the_old_content(full_disk: Path) -> None:
    before = _snapshot(full_disk)
    run = Runner(write_file_tool(), local_env(full_disk))
    out = await run(file_path="keep.txt", content="x" * 100_000)
    assert out.is_error and "No space left on device" in out.content
    assert _snapshot(full_disk) == before  # the old content whole, and no temporary file left
    out = await run(file_path="new.txt", content="y" * 100_000)
    assert out.is_error and "No space left on device" in out.content
    assert _snapshot(full_disk) == before


async def test_edit_file_on_a_full_disk_keeps_the_old_content(full_disk: Path) -> None:
    before = _snapshot(full_disk)
    run = Runner(edit_file_tool(), local_env(full_disk))
    out = await run(file_path="keep.txt", old_string="line two", new_string="z" * 100_000)
    assert out.is_error and "No space left on device" in out.content
    assert _snapshot(full_disk) == before


async def test_apply_patch_on_a_full_disk_changes_nothing(full_disk: Path) -> None:
    before = _snapshot(full_disk)
    big = "\n".join("+" + "p" * 80 for _ in range(2000))
    patch = (
        "*** Begin Patch\n"
        "*** Update File: other.txt\n@@\n-alpha\n+ALPHA\n"
        f"*** Add File: added.txt\n{big}\n"
        "*** Update File: keep.txt\n@@\n-line one\n+LINE ONE\n"
        "*** End Patch"
    )
    out = await Runner(apply_patch_tool(), local_env(full_disk))(input=patch)
    assert out.is_error and "No space left on device" in out.content
    assert _snapshot(full_disk) == before


async def test_a_command_whose_output_cannot_be_spilled_still_ends(
    full_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The spill directory lives on the full disk: 4 MiB of output, 1 MiB kept in memory.
    monkeypatch.setattr(tempfile, "tempdir", str(full_disk))
    work = tmp_path / "work"
    work.mkdir()
    env = local_env(work, output_memory_cap=1024 * 1024)
    out = await Runner(shell_command_tool(), env)(
        command="head -c 4194304 /dev/zero | tr '\\0' 'a'; echo; echo the-end", timeout_ms=30_000
    )
    assert "the-end" in out.content  # the tail of the output survived
    assert "Exit code: 0" in out.content
    # The environment's own result says why there is no file with the whole output.
    result = await env.exec_command("head -c 4194304 /dev/zero | tr '\\0' 'b'; echo; echo done", timeout_ms=30_000)
    assert result.exit_code == 0 and result.full_output_path is None
    assert result.stdout.endswith("done\n") and result.total_bytes == 4 * 1024 * 1024 + 6
    assert "the full output could not be kept (No space left on device)" in result.stdout
    assert not _spill_files(full_disk)  # no partial spill file left behind
    await env.cleanup()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An empty 1 MiB tmpfs: a spill file fills it part of the way through a command's output."""
    root = tmp_path / "small"
    root.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(root)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)


@pytest.mark.parametrize("callback", [False, True], ids=["spliced", "read"])
@pytest.mark.parametrize("left", [8 * 1024, 3 * 1024 * 1024], ids=["near-the-end", "early"])
async def test_a_disk_that_fills_while_the_output_is_spilled_keeps_the_tail(
    small_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, callback: bool, left: int
) -> None:
    """The spill file takes the whole MiB, then the disk is full with ``left`` bytes still to
    come: the tail is still the end of the output - near the end, part of it is read back from
    the file before it is removed (bytes that went there straight from the pipe) - and no
    partial file is left."""
    monkeypatch.setattr(tempfile, "tempdir", str(small_disk))
    work = tmp_path / "work"
    work.mkdir()
    data = "".join(f"{i}\n" for i in range(1, 600_000)).encode()[: 1024 * 1024 + left]
    (work / "data.txt").write_bytes(data)
    # Written in 64 KiB pieces a little apart, so the pipe does not hold it all at once: past the
    # cap, the pieces go into the spill file one by one until the disk is full.
    (work / "pieces.py").write_text(
        "import os, time\n"
        "data = open('data.txt', 'rb').read()\n"
        "for start in range(0, len(data), 65536):\n"
        "    view = memoryview(data)[start : start + 65536]\n"
        "    while view:\n"
        "        view = view[os.write(1, view) :]\n"
        "    time.sleep(0.005)\n"
    )
    env = local_env(work, output_memory_cap=64 * 1024)
    on_output = (lambda stream, text: None) if callback else None
    result = await env.exec_command(f"{sys.executable} pieces.py", timeout_ms=30_000, on_output=on_output)
    assert result.exit_code == 0 and result.full_output_path is None
    assert result.total_bytes == len(data)
    assert "the full output could not be kept (No space left on device)" in result.stdout
    tail = result.stdout.partition("...]\n\n")[2]
    assert tail.encode() == data[-16 * 1024 :]
    assert not _spill_files(small_disk)
    await env.cleanup()

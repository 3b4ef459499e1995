"""File operations of the local environment on real files in tmp_path."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ra.env import DirEntry, ExecutionEnvironment, LocalExecutionEnvironment


@pytest.fixture
def env(tmp_path: Path) -> LocalExecutionEnvironment:
    return LocalExecutionEnvironment(tmp_path)


def test_implements_the_protocol(env: LocalExecutionEnvironment) -> None:
    assert isinstance(env, ExecutionEnvironment)


def test_resolve(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    assert env.resolve("a/b.txt") == str(tmp_path / "a" / "b.txt")
    assert env.resolve("a/../c") == str(tmp_path / "c")
    assert env.resolve("/etc/hosts") == "/etc/hosts"
    assert env.resolve("~") == os.path.expanduser("~")
    with pytest.raises(ValueError):
        env.resolve("")


def test_missing_working_dir_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError, match="nope"):
        LocalExecutionEnvironment(tmp_path / "nope")


async def test_read_file_numbers_lines(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("alpha\nbeta\ngamma\n")
    assert await env.read_file("f.txt") == "1 | alpha\n2 | beta\n3 | gamma"


async def test_read_file_offset_limit_and_width(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 151)))
    out = await env.read_file("f.txt", offset=98, limit=4)
    # Numbers are right-aligned to the width of the largest one shown.
    assert out.splitlines() == [" 98 | line 98", " 99 | line 99", "100 | line 100", "101 | line 101"]
    assert (await env.read_file("f.txt", offset=149)).splitlines() == ["149 | line 149", "150 | line 150"]


async def test_read_file_default_limit_is_2000(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x\n" * 2500)
    lines = (await env.read_file("big.txt")).splitlines()
    assert len(lines) == 2000
    assert lines[0] == "   1 | x" and lines[-1] == "2000 | x"


async def test_read_file_line_endings_bom_and_last_line(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    (tmp_path / "crlf.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nno newline")
    assert await env.read_file("crlf.txt") == "1 | one\n2 | two\n3 | no newline"
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9\n")
    assert await env.read_file("latin.txt") == "1 | caf\ufffd"


async def test_read_file_empty_and_past_end(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    assert await env.read_file("empty.txt") == ""
    (tmp_path / "two.txt").write_text("a\nb\n")
    with pytest.raises(ValueError, match=r"past the end.*2 lines"):
        await env.read_file("two.txt", offset=5)
    with pytest.raises(ValueError, match="offset"):
        await env.read_file("two.txt", offset=0)
    with pytest.raises(ValueError, match="limit"):
        await env.read_file("two.txt", limit=0)


async def test_read_file_errors(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "missing.txt"))):
        await env.read_file("missing.txt")
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError, match="directory"):
        await env.read_file("d")
    (tmp_path / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(ValueError, match="binary file"):
        await env.read_file("img.png")
    # Images are the tool layer's business; the raw bytes are available.
    assert await env.read_bytes("img.png") == b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores file permissions")
async def test_read_file_permission_denied(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    secret.chmod(0)
    try:
        with pytest.raises(PermissionError, match=r"secret\.txt"):
            await env.read_file("secret.txt")
    finally:
        secret.chmod(0o644)


async def test_write_file_creates_parents_and_encodes_utf8(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    await env.write_file("deep/er/f.txt", "h\u00e9llo\r\nkept as is")
    assert (tmp_path / "deep/er/f.txt").read_bytes() == "h\u00e9llo\r\nkept as is".encode()
    await env.write_file("deep/er/f.txt", b"\x00\x01")
    assert (tmp_path / "deep/er/f.txt").read_bytes() == b"\x00\x01"
    with pytest.raises(IsADirectoryError):
        await env.write_file("deep", "x")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="parent"):
        await env.write_file("file/child.txt", "x")
    with pytest.raises(TypeError):
        await env.write_file("x.txt", 42)  # type: ignore[arg-type]


async def test_write_file_replaces_whole_and_keeps_what_the_file_is(
    env: LocalExecutionEnvironment, tmp_path: Path
) -> None:
    """An overwrite goes through a temporary file and a rename (a failed write loses nothing:
    tests/tools/test_full_disk.py): the mode stays, a symlink stays a link to the changed target,
    hard-linked files are written in place so every name sees the change, nothing is left over."""
    script = tmp_path / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o751)
    await env.write_file("run.sh", "echo new\n")
    assert script.read_text() == "echo new\n" and (script.stat().st_mode & 0o777) == 0o751

    (tmp_path / "target.txt").write_text("old")
    (tmp_path / "link.txt").symlink_to("target.txt")
    await env.write_file("link.txt", "through the link")
    assert (tmp_path / "link.txt").is_symlink()
    assert (tmp_path / "target.txt").read_text() == "through the link"

    (tmp_path / "a.txt").write_text("shared")
    os.link(tmp_path / "a.txt", tmp_path / "b.txt")
    await env.write_file("a.txt", "both names")
    assert (tmp_path / "b.txt").read_text() == "both names"

    if os.geteuid() == 0:  # root may give the new file the old one's owner, setuid bit and all
        os.chown(script, 65534, 65534)
        script.chmod(0o4755)
        await env.write_file("run.sh", "echo newer\n")
        assert (script.stat().st_uid, script.stat().st_gid) == (65534, 65534)
        assert (script.stat().st_mode & 0o7777) == 0o4755

    long_name = "n" * 250 + ".txt"  # 254 bytes: the file may exist, a longer temporary name may not
    (tmp_path / long_name).write_text("old")
    await env.write_file(long_name, "new")
    assert (tmp_path / long_name).read_text() == "new"

    old_umask = os.umask(0o027)
    try:
        await env.write_file("fresh.txt", "new file")
    finally:
        os.umask(old_umask)
    assert ((tmp_path / "fresh.txt").stat().st_mode & 0o777) == 0o640  # the umask applies
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".ra-tmp")]


async def test_delete_and_exists(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    assert await env.file_exists("f") and await env.file_exists("d")
    assert await env.is_directory("d") and not await env.is_directory("f")
    await env.delete_file("f")
    assert not await env.file_exists("f")
    with pytest.raises(FileNotFoundError, match="File not found"):
        await env.delete_file("f")
    with pytest.raises(IsADirectoryError):
        await env.delete_file("d")


async def test_move_file(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("A")
    (tmp_path / "b.txt").write_text("B")
    await env.move_file("a.txt", "new/dir/a.txt")
    assert (tmp_path / "new/dir/a.txt").read_text() == "A" and not (tmp_path / "a.txt").exists()
    await env.move_file("b.txt", "new/dir/a.txt")  # replaces
    assert (tmp_path / "new/dir/a.txt").read_text() == "B"
    with pytest.raises(FileNotFoundError):
        await env.move_file("gone.txt", "x.txt")
    (tmp_path / "c.txt").write_text("C")
    with pytest.raises(IsADirectoryError):
        await env.move_file("c.txt", "new")
    assert (tmp_path / "c.txt").read_text() == "C"


async def test_list_directory(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "m.py").write_text("12345")
    (tmp_path / "src" / "a.py").write_text("abc")
    (tmp_path / "README").write_text("r")
    (tmp_path / ".env").write_text("e")
    assert await env.list_directory(".") == [
        DirEntry(".env", False, 1),
        DirEntry("README", False, 1),
        DirEntry("src", True, None),
    ]
    assert await env.list_directory(".", depth=3) == [
        DirEntry(".env", False, 1),
        DirEntry("README", False, 1),
        DirEntry("src", True, None),
        DirEntry("src/a.py", False, 3),
        DirEntry("src/pkg", True, None),
        DirEntry("src/pkg/m.py", False, 5),
    ]
    assert await env.list_directory("src", depth=1) == [DirEntry("a.py", False, 3), DirEntry("pkg", True, None)]
    with pytest.raises(FileNotFoundError):
        await env.list_directory("missing")
    with pytest.raises(NotADirectoryError):
        await env.list_directory("README")


async def test_list_directory_does_not_follow_symlink_loops(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "loop").symlink_to(tmp_path / "d")
    entries = await env.list_directory(".", depth=5)
    assert entries == [DirEntry("d", True, None), DirEntry("d/loop", True, None)]


_READ_ONLY_PROBE = """
import asyncio, os, sys
from ra.env.local import LocalExecutionEnvironment
env = LocalExecutionEnvironment(sys.argv[1])
try:
    asyncio.run(env.write_file("ro.txt", "new\\n"))
    print("wrote")
except PermissionError as exc:
    print("denied:", exc)
"""


def test_write_file_refuses_a_read_only_file(tmp_path: Path) -> None:
    """A file ra may not write stays as it is, even though a rename could replace it. As root the
    probe runs without the capabilities that override file permissions (what a normal user has)."""
    import subprocess
    import sys

    target = tmp_path / "ro.txt"
    target.write_text("old\n")
    target.chmod(0o444)
    command = [sys.executable, "-c", _READ_ONLY_PROBE, str(tmp_path)]
    if os.geteuid() == 0:
        command = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if done.returncode != 0 and done.stderr.startswith("setpriv:"):
        pytest.skip(f"cannot drop capabilities here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("denied: Permission denied"), done.stdout
    assert target.read_text() == "old\n" and (target.stat().st_mode & 0o777) == 0o444

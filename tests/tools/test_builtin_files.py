"""read_file, write_file, edit_file on a real directory, through the real tool pipeline."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest

from ra.agent.config import SessionConfig
from ra.tools.builtin import edit_file_tool, read_file_tool, write_file_tool
from ra.tools.builtin.files import sniff_image_type

from .builtin_support import Runner, local_env


def tiny_png() -> bytes:
    """A real 1x1 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


@pytest.fixture
def read(tmp_path: Path) -> Runner:
    return Runner(read_file_tool(), local_env(tmp_path), SessionConfig())


# -- read_file -----------------------------------------------------------------------------------


async def test_read_numbers_lines_and_pages(tmp_path: Path, read: Runner) -> None:
    (tmp_path / "a.py").write_text("".join(f"line {i}\n" for i in range(1, 13)))
    out = await read(file_path=str(tmp_path / "a.py"))
    assert not out.is_error
    assert out.content.splitlines()[0] == " 1 | line 1"
    assert out.content.splitlines()[-1] == "12 | line 12"
    out = await read(file_path="a.py", offset=10, limit=2)
    assert out.content.splitlines() == [
        "10 | line 10",
        "11 | line 11",
        "[The file continues after line 11: call read_file with offset=12 to read on.]",
    ]
    out = await read(file_path="a.py", offset=11, limit=2)
    assert out.content == "11 | line 11\n12 | line 12"  # ends exactly at the last line: no note


async def test_read_default_limit_of_the_factory(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("x\n" * 30)
    run = Runner(read_file_tool(default_limit=5), local_env(tmp_path))
    out = await run(file_path="long.txt")
    assert out.content.count(" | x") == 5
    assert "offset=6" in out.content


async def test_read_validation_rejects_bad_offset_and_limit(read: Runner) -> None:
    out = await read(file_path="a.py", offset=0)
    assert out.is_error and "offset" in out.content and "minimum" in out.content.lower()
    out = await read(file_path="a.py", limit=0)
    assert out.is_error and "limit" in out.content
    out = await read(offset=1)
    assert out.is_error and "missing required field 'file_path'" in out.content


async def test_read_missing_file_suggests_close_names(tmp_path: Path, read: Runner) -> None:
    (tmp_path / "config.yaml").write_text("a: 1\n")
    out = await read(file_path="config.yml")
    assert out.is_error
    assert f"File not found: {tmp_path / 'config.yml'}" in out.content
    assert str(tmp_path / "config.yaml") in out.content
    out = await read(file_path="nowhere/x.txt")
    assert out.is_error and "does not exist either" in out.content


async def test_read_directory_binary_offset_and_empty(tmp_path: Path, read: Runner) -> None:
    (tmp_path / "sub").mkdir()
    out = await read(file_path="sub")
    assert out.is_error and "is a directory" in out.content
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02garbage" * 10)
    out = await read(file_path="blob.bin")
    assert out.is_error and "binary file" in out.content
    (tmp_path / "two.txt").write_text("a\nb\n")
    out = await read(file_path="two.txt", offset=5)
    assert out.is_error and "past the end" in out.content
    (tmp_path / "empty.txt").write_text("")
    out = await read(file_path="empty.txt")
    assert not out.is_error and out.content == f"[{tmp_path / 'empty.txt'} is empty]"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
async def test_read_permission_denied(tmp_path: Path, read: Runner) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("x\n")
    secret.chmod(0)
    try:
        out = await read(file_path="secret.txt")
    finally:
        secret.chmod(0o600)
    assert out.is_error and "Permission denied" in out.content


async def test_read_image_by_extension_and_by_magic(tmp_path: Path, read: Runner) -> None:
    png = tiny_png()
    (tmp_path / "dot.png").write_bytes(png)
    out = await read(file_path="dot.png")
    assert not out.is_error
    assert out.image_data == png and out.image_media_type == "image/png"
    assert "PNG" in out.content and str(len(png)) in out.content
    message = out.to_message()
    assert message.content[0].tool_result.image_data == png  # travels to the model
    # No image extension: the binary check finds it and the magic bytes say PNG.
    (tmp_path / "screenshot").write_bytes(png)
    out = await read(file_path="screenshot")
    assert out.image_media_type == "image/png" and out.image_data == png
    # An image extension on a text file: read as text.
    (tmp_path / "notes.png").write_text("not really an image\n")
    out = await read(file_path="notes.png")
    assert out.image_data is None and out.content == "1 | not really an image"


async def test_read_refuses_oversized_image(tmp_path: Path, read: Runner) -> None:
    from ra.tools.builtin.files import IMAGE_MAX_BYTES

    (tmp_path / "huge.png").write_bytes(tiny_png() + b"\0" * IMAGE_MAX_BYTES)
    out = await read(file_path="huge.png")
    assert out.is_error and "larger than" in out.content and out.image_data is None


def test_sniff_image_type() -> None:
    assert sniff_image_type(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert sniff_image_type(b"GIF89a....") == "image/gif"
    assert sniff_image_type(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff_image_type(b"RIFF\x00\x00\x00\x00WAVEfmt ") is None
    assert sniff_image_type(b"plain text") is None


async def test_large_read_is_truncated_for_the_model_only(tmp_path: Path, read: Runner) -> None:
    (tmp_path / "big.txt").write_text("x" * 100_000)
    out = await read(file_path="big.txt")
    assert len(out.full_output) > 100_000
    assert "Tool output was truncated" in out.content and len(out.content) < 51_000


# -- write_file ----------------------------------------------------------------------------------


async def test_write_creates_parents_and_reports_bytes(tmp_path: Path) -> None:
    run = Runner(write_file_tool(), local_env(tmp_path))
    out = await run(file_path="deep/er/new.txt", content="héllo\n")
    assert not out.is_error
    assert out.content == f"Wrote 7 bytes to {tmp_path / 'deep/er/new.txt'} (created)."
    assert (tmp_path / "deep/er/new.txt").read_text() == "héllo\n"
    out = await run(file_path=str(tmp_path / "deep/er/new.txt"), content="")
    assert "Wrote 0 bytes" in out.content and "(replaced)" in out.content
    diff = out.metadata.pop("diff")  # for the host's display (ra.tools.file_diff)
    assert out.metadata == {"path": str(tmp_path / "deep/er/new.txt"), "bytes": 0, "created": False}
    assert (diff["status"], diff["added"], diff["removed"]) == ("modified", 0, 1)
    assert diff["unified"].endswith("@@ -1 +0,0 @@\n-héllo\n")


async def test_write_errors(tmp_path: Path) -> None:
    run = Runner(write_file_tool(), local_env(tmp_path))
    (tmp_path / "adir").mkdir()
    out = await run(file_path="adir", content="x")
    assert out.is_error and "is a directory" in out.content.lower()
    (tmp_path / "afile").write_text("x")
    out = await run(file_path="afile/child.txt", content="x")
    assert out.is_error and "existing file" in out.content
    out = await run(file_path="x.txt")
    assert out.is_error and "missing required field 'content'" in out.content


# -- edit_file -----------------------------------------------------------------------------------


async def test_edit_replaces_and_counts(tmp_path: Path) -> None:
    run = Runner(edit_file_tool(), local_env(tmp_path))
    target = tmp_path / "m.py"
    target.write_text("a = 1\nb = 1\nc = 1\n")
    out = await run(file_path="m.py", old_string="b = 1", new_string="b = 2")
    assert not out.is_error and "Replaced 1 occurrence" in out.content and "line 2" in out.content
    assert target.read_text() == "a = 1\nb = 2\nc = 1\n"
    out = await run(file_path="m.py", old_string="= 1", new_string="= 3", replace_all=True)
    assert "Replaced 2 occurrences" in out.content and out.metadata["replacements"] == 2
    assert target.read_text() == "a = 3\nb = 2\nc = 3\n"


async def test_edit_reports_fuzzy_match(tmp_path: Path) -> None:
    run = Runner(edit_file_tool(), local_env(tmp_path))
    target = tmp_path / "f.py"
    target.write_text("def f():\n    return 1   \n")
    out = await run(file_path="f.py", old_string="def f():\n    return 1\n", new_string="def f():\n    return 2\n")
    assert not out.is_error
    assert "Note: old_string did not match exactly" in out.content
    assert out.metadata["fuzzy"]
    assert "return 2" in target.read_text()


async def test_edit_errors_leave_the_file_alone(tmp_path: Path) -> None:
    run = Runner(edit_file_tool(), local_env(tmp_path))
    target = tmp_path / "g.py"
    target.write_text("x = 1\nx = 1\n")
    out = await run(file_path="g.py", old_string="x = 1", new_string="x = 2")
    assert out.is_error and out.metadata["code"] == "not_unique"
    assert not out.content.startswith("Tool error")
    out = await run(file_path="g.py", old_string="y = 1", new_string="y = 2")
    assert out.is_error and out.metadata["code"] == "not_found"
    assert target.read_text() == "x = 1\nx = 1\n"
    out = await run(file_path="missing.py", old_string="a", new_string="b")
    assert out.is_error and "does not exist" in out.content
    out = await run(file_path="new.py", old_string="", new_string="print(1)\n")
    assert not out.is_error and (tmp_path / "new.py").read_text() == "print(1)\n"


async def test_write_and_edit_report_the_environment_refusal(tmp_path: Path) -> None:
    from ra.env import ReadOnlyExecutionEnvironment

    (tmp_path / "keep.txt").write_text("a\n")
    env = ReadOnlyExecutionEnvironment(local_env(tmp_path))
    out = await Runner(write_file_tool(), env)(file_path="new.txt", content="x")
    assert out.is_error and "read-only" in out.content and not (tmp_path / "new.txt").exists()
    out = await Runner(edit_file_tool(), env)(file_path="keep.txt", old_string="a", new_string="b")
    assert out.is_error and "read-only" in out.content and (tmp_path / "keep.txt").read_text() == "a\n"

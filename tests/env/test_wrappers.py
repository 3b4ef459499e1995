"""Logging, read-only and scoped wrappers around a real local environment."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ra.env import (
    EnvCallRecord,
    ExecutionEnvironment,
    LocalExecutionEnvironment,
    LoggingExecutionEnvironment,
    ReadOnlyExecutionEnvironment,
    ScopedExecutionEnvironment,
)


@pytest.fixture
def local(tmp_path: Path) -> LocalExecutionEnvironment:
    return LocalExecutionEnvironment(tmp_path)


async def test_logging_wrapper_records_calls(
    local: LocalExecutionEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    records: list[EnvCallRecord] = []
    env = LoggingExecutionEnvironment(local, on_call=records.append)
    assert isinstance(env, ExecutionEnvironment)
    with caplog.at_level(logging.INFO, logger="ra.env"):
        await env.write_file("a.txt", "hello\n")
        assert await env.read_file("a.txt") == "1 | hello"
        result = await env.exec_command("exit 4")
        with pytest.raises(FileNotFoundError):
            await env.read_file("missing.txt")
    assert [r.operation for r in records] == ["write_file", "read_file", "exec_command", "read_file"]
    assert records[2].result is result and result.exit_code == 4
    assert isinstance(records[3].error, FileNotFoundError)
    messages = [r.getMessage() for r in caplog.records]
    assert "exec: exit 4" in messages
    assert any(m.startswith("exit: 4 in ") for m in messages)
    assert any("read_file missing.txt" in m and "failed" in m for m in messages)


async def test_read_only_refuses_mutations(local: LocalExecutionEnvironment, tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("original")
    env = ReadOnlyExecutionEnvironment(local)
    with pytest.raises(PermissionError, match="read-only mode"):
        await env.write_file("keep.txt", "changed")
    with pytest.raises(PermissionError, match="read-only mode"):
        await env.write_file("new.txt", "x")
    with pytest.raises(PermissionError, match="read-only mode"):
        await env.delete_file("keep.txt")
    with pytest.raises(PermissionError, match="read-only mode"):
        await env.move_file("keep.txt", "moved.txt")
    assert (tmp_path / "keep.txt").read_text() == "original"
    assert not (tmp_path / "new.txt").exists()
    # Reads, search and commands still work.
    assert await env.read_file("keep.txt") == "1 | original"
    assert await env.glob("*.txt") == [str(tmp_path / "keep.txt")]
    assert (await env.exec_command("cat keep.txt")).stdout == "original"


@pytest.fixture
def scoped_tree(tmp_path: Path) -> tuple[ScopedExecutionEnvironment, Path]:
    scope = tmp_path / "work"
    (scope / "src").mkdir(parents=True)
    (scope / "src" / "m.py").write_text("inside\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    (scope / "escape").symlink_to(tmp_path / "outside.txt")
    (scope / "escape_dir").symlink_to(tmp_path)
    (scope / "alias.py").symlink_to(scope / "src" / "m.py")
    return ScopedExecutionEnvironment(LocalExecutionEnvironment(tmp_path), "work"), scope


async def test_scoped_resolves_inside_the_scope(scoped_tree: tuple[ScopedExecutionEnvironment, Path]) -> None:
    env, scope = scoped_tree
    assert env.working_directory() == str(scope)
    assert env.resolve("src/m.py") == str(scope / "src" / "m.py")
    assert await env.read_file("src/m.py") == "1 | inside"
    assert await env.read_file(str(scope / "src" / "m.py")) == "1 | inside"
    assert await env.read_file("alias.py") == "1 | inside"  # a symlink that stays inside is fine
    await env.write_file("new/file.txt", "x")
    assert (scope / "new" / "file.txt").read_text() == "x"
    assert [e.name for e in await env.list_directory(".")] == ["alias.py", "escape", "escape_dir", "new", "src"]
    assert (await env.exec_command("pwd")).stdout.strip() == str(scope)
    assert (await env.exec_command("pwd", working_dir="src")).stdout.strip() == str(scope / "src")


@pytest.mark.parametrize(
    "path", ["../outside.txt", "src/../../outside.txt", "/etc/hostname", "escape", "escape_dir/outside.txt"]
)
async def test_scoped_rejects_escapes(scoped_tree: tuple[ScopedExecutionEnvironment, Path], path: str) -> None:
    env, _ = scoped_tree
    with pytest.raises(PermissionError, match="outside the allowed directory"):
        await env.read_file(path)
    with pytest.raises(PermissionError):
        await env.write_file(path, "x")
    with pytest.raises(PermissionError):
        await env.file_exists(path)


async def test_scoped_rejects_escaping_dirs_for_commands_and_search(
    scoped_tree: tuple[ScopedExecutionEnvironment, Path],
) -> None:
    env, _ = scoped_tree
    with pytest.raises(PermissionError):
        await env.exec_command("pwd", working_dir="..")
    with pytest.raises(PermissionError):
        await env.grep("secret", "..")
    with pytest.raises(PermissionError):
        await env.list_directory("escape_dir")
    assert await env.glob("../*.txt") == []
    assert "inside" in await env.grep("inside")


async def test_scoped_delete_of_a_link_removes_only_the_link(
    scoped_tree: tuple[ScopedExecutionEnvironment, Path], tmp_path: Path
) -> None:
    env, scope = scoped_tree
    await env.delete_file("escape")
    assert not (scope / "escape").is_symlink()
    assert (tmp_path / "outside.txt").read_text() == "secret\n"
    with pytest.raises(PermissionError):
        await env.move_file("src/m.py", "../stolen.py")
    with pytest.raises(PermissionError):
        await env.delete_file("../outside.txt")
    assert (scope / "src" / "m.py").exists()


def test_scope_root_must_exist(local: LocalExecutionEnvironment) -> None:
    with pytest.raises(NotADirectoryError):
        ScopedExecutionEnvironment(local, "nope")


def write_text(path: str, text: str) -> None:
    Path(path).write_text(text)


async def test_scoped_reads_and_searches_the_spill_file_of_its_own_command(tmp_path: Path) -> None:
    """The shell tool tells the model to page through ``full_output_path`` with read_file and grep;
    the spill file lies outside the scope (in a temporary directory) but is the scope's own output."""
    (tmp_path / "work").mkdir()
    env = ScopedExecutionEnvironment(LocalExecutionEnvironment(tmp_path, output_memory_cap=1024), "work")
    result = await env.exec_command("seq 1 2000")
    spill = result.full_output_path
    assert spill is not None and not spill.startswith(str(tmp_path))
    assert await env.read_bytes(spill) == "".join(f"{i}\n" for i in range(1, 2001)).encode()
    assert await env.read_file(spill, 1000, 1) == "1000 | 1000"
    assert await env.grep("^1500$", spill) == f"{spill}:1500:1500"
    assert await env.file_exists(spill)
    # Only that file: a sibling in the same directory, and writes to it, stay refused.
    sibling = str(Path(spill).with_name("other.log"))
    write_text(sibling, "not ours\n")
    with pytest.raises(PermissionError, match="outside the allowed directory"):
        await env.read_file(sibling)
    with pytest.raises(PermissionError):
        await env.write_file(spill, "overwritten")
    with pytest.raises(PermissionError):
        await env.delete_file(spill)
    await env.cleanup()

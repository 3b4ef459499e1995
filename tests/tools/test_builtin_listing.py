"""list_dir (codex / ra-spec) and read_many_files (gemini-cli) on real trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from ra.tools.builtin import list_dir_tool, read_many_files_tool

from .builtin_support import Runner, local_env


def make_tree(root: Path) -> None:
    (root / "b_dir" / "inner").mkdir(parents=True)
    (root / "b_dir" / "inner" / "deep.txt").write_text("deep\n")
    (root / "b_dir" / "one.txt").write_text("one\n")
    (root / "a.txt").write_text("alpha\n")
    (root / "c.txt").write_text("gamma\n")


# -- list_dir ------------------------------------------------------------------------------------


async def test_list_dir_tree_with_depth(tmp_path: Path) -> None:
    make_tree(tmp_path)
    run = Runner(list_dir_tool(), local_env(tmp_path))
    out = await run(dir_path=str(tmp_path))
    assert out.content.splitlines() == [
        f"Absolute path: {tmp_path}",
        "a.txt",
        "b_dir/",
        "  inner/",
        "  one.txt",
        "c.txt",
    ]
    out = await run(dir_path=".", depth=3)
    assert "    deep.txt" in out.content.splitlines()
    out = await run(dir_path="b_dir", depth=1)
    assert out.content.splitlines() == [f"Absolute path: {tmp_path / 'b_dir'}", "inner/", "one.txt"]


async def test_list_dir_pages(tmp_path: Path) -> None:
    for index in range(7):
        (tmp_path / f"f{index}.txt").write_text("")
    run = Runner(list_dir_tool(), local_env(tmp_path))
    out = await run(dir_path=".", limit=3)
    assert out.content.splitlines()[1:] == [
        "f0.txt",
        "f1.txt",
        "f2.txt",
        "More than 3 entries found: showing 1-3 of 7; call again with offset=4 to see more.",
    ]
    out = await run(dir_path=".", offset=6, limit=3)
    assert out.content.splitlines()[1:] == ["f5.txt", "f6.txt"]
    out = await run(dir_path=".", offset=8)
    assert out.is_error and "offset 8 is past the last entry" in out.content


@pytest.mark.parametrize(
    ("arguments", "field"),
    [({"offset": 0}, "offset"), ({"limit": 0}, "limit"), ({"depth": 0}, "depth"), ({"depth": 99}, "depth")],
)
async def test_list_dir_validation(tmp_path: Path, arguments: dict, field: str) -> None:
    run = Runner(list_dir_tool(), local_env(tmp_path))
    out = await run(dir_path=".", **arguments)
    assert out.is_error and f"field '{field}'" in out.content


async def test_list_dir_errors_and_empty(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    run = Runner(list_dir_tool(), local_env(tmp_path))
    out = await run(dir_path="file.txt")
    assert out.is_error and "is not a directory" in out.content
    out = await run(dir_path="missing")
    assert out.is_error and out.content == f"Directory not found: {tmp_path / 'missing'}"
    out = await run(dir_path="empty")
    assert not out.is_error and out.content.endswith("(empty directory)")


# -- read_many_files -----------------------------------------------------------------------------


async def test_read_many_files_paths_dirs_and_globs(tmp_path: Path) -> None:
    make_tree(tmp_path)
    run = Runner(read_many_files_tool(), local_env(tmp_path))
    out = await run(paths=["c.txt", "b_dir", "*.txt"])
    assert not out.is_error
    headers = [line for line in out.content.splitlines() if line.startswith("--- ")]
    assert headers == [
        f"--- {tmp_path}/a.txt ---",
        f"--- {tmp_path}/b_dir/inner/deep.txt ---",
        f"--- {tmp_path}/b_dir/one.txt ---",
        f"--- {tmp_path}/c.txt ---",
        "--- End of content ---",
    ]
    assert f"--- {tmp_path}/a.txt ---\nalpha\n" in out.content
    assert out.metadata["read"] == [h[4:-4] for h in headers[:-1]]


async def test_read_many_files_include_exclude_and_defaults(tmp_path: Path) -> None:
    make_tree(tmp_path)
    (tmp_path / "node_modules" / "lib").mkdir(parents=True)
    (tmp_path / "node_modules" / "lib" / "x.txt").write_text("vendored\n")
    (tmp_path / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    run = Runner(read_many_files_tool(), local_env(tmp_path))
    out = await run(paths=["a.txt"], include=["b_dir/**/*.txt"], exclude=["**/deep.txt"])
    assert out.metadata["read"] == [f"{tmp_path}/a.txt", f"{tmp_path}/b_dir/one.txt"]
    out = await run(paths=["."])
    assert "vendored" not in out.content and "pic.png" not in out.content
    out = await run(paths=["."], useDefaultExcludes=False)
    assert "vendored" in out.content
    assert f"Skipped binary files (read images with read_file): {tmp_path}/pic.png" in out.content


async def test_read_many_files_budget_and_problems(tmp_path: Path) -> None:
    for index in range(4):
        (tmp_path / f"part{index}.txt").write_text(str(index) * 60 + "\n")
    run = Runner(read_many_files_tool(budget=100), local_env(tmp_path))
    out = await run(paths=["*.txt", "ghost.txt"])
    assert out.metadata["read"] == [f"{tmp_path}/part0.txt", f"{tmp_path}/part1.txt"]
    assert "[... cut here" in out.content  # the second file crossed the budget
    assert f"Not read (over the 100-character budget): {tmp_path}/part2.txt, {tmp_path}/part3.txt." in out.content
    assert "ghost.txt: not found" in out.content
    out = await run(paths=["ghost.txt"])
    assert out.is_error and "No files to read" in out.content
    out = await run(paths=[])
    assert out.is_error and "paths" in out.content

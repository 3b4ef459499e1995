"""grep, grep_files and glob against real trees (both grep backends where it matters)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ra.tools.builtin import glob_tool, grep_files_tool, grep_tool
from ra.tools.builtin.search import trim_context

from .builtin_support import Runner, local_env

BACKENDS = ["ripgrep", "python"]


def make_tree(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text(
        "import os\n\ndef main():\n    return helper()\n\n\ndef helper():\n    return 42\n"
    )
    (root / "src" / "util.py").write_text("def helper_two():\n    return 'HELPER'\n")
    (root / "README.md").write_text("Call helper() to get 42.\n")
    (root / ".hidden.py").write_text("def helper(): pass\n")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "ripgrep":
        from ra.env.search import find_ripgrep

        if find_ripgrep() is None:
            pytest.skip("ripgrep is not installed")
    return str(request.param)


# -- grep (spec) ---------------------------------------------------------------------------------


async def test_grep_content_with_spec_parameters(tmp_path: Path, backend: str) -> None:
    make_tree(tmp_path)
    run = Runner(grep_tool(), local_env(tmp_path, grep_backend=backend))
    out = await run(pattern=r"def helper")
    assert not out.is_error
    assert out.content.splitlines() == [
        f"{tmp_path}/src/app.py:7:def helper():",
        f"{tmp_path}/src/util.py:1:def helper_two():",
    ]
    out = await run(pattern="helper", path="src", glob_filter="util.py", case_insensitive=True)
    assert out.content.splitlines() == [
        f"{tmp_path}/src/util.py:1:def helper_two():",
        f"{tmp_path}/src/util.py:2:    return 'HELPER'",
    ]
    out = await run(pattern="helper", max_results=1)
    assert (
        out.content.startswith(f"{tmp_path}/README.md:1:")
        and "[Results truncated: showing the first 1 matches" in out.content
    )


async def test_grep_errors_and_empty_results(tmp_path: Path, backend: str) -> None:
    make_tree(tmp_path)
    run = Runner(grep_tool(), local_env(tmp_path, grep_backend=backend))
    out = await run(pattern="no_such_thing_anywhere")
    assert not out.is_error and out.content == f"No matches for /no_such_thing_anywhere/ in {tmp_path}."
    out = await run(pattern="(unclosed")
    assert out.is_error and "Invalid regex" in out.content
    out = await run(pattern="x", path="missing_dir")
    assert out.is_error and out.content == f"Path not found: {tmp_path / 'missing_dir'}"
    out = await run(pattern="x", max_results=0)
    assert out.is_error and "max_results" in out.content


async def test_grep_spec_variant_has_no_output_modes() -> None:
    props = grep_tool().definition.parameters["properties"]
    assert set(props) == {"pattern", "path", "glob_filter", "case_insensitive", "max_results"}
    props = grep_tool(output_modes=True).definition.parameters["properties"]
    assert {"output_mode", "-A", "-B", "-C"} <= set(props)
    assert props["output_mode"]["enum"] == ["content", "files_with_matches", "count"]


# -- grep with Claude Code output modes ----------------------------------------------------------


async def test_output_modes(tmp_path: Path, backend: str) -> None:
    make_tree(tmp_path)
    run = Runner(grep_tool(output_modes=True), local_env(tmp_path, grep_backend=backend))
    out = await run(pattern="helper")  # files_with_matches by default, as in Claude Code
    assert out.content.splitlines() == [f"{tmp_path}/README.md", f"{tmp_path}/src/app.py", f"{tmp_path}/src/util.py"]
    out = await run(pattern="helper", output_mode="count")
    assert out.content.splitlines() == [
        f"{tmp_path}/README.md:1",
        f"{tmp_path}/src/app.py:2",
        f"{tmp_path}/src/util.py:1",
    ]
    out = await run(pattern="return 42", output_mode="content", **{"-C": 1})
    assert out.content.splitlines() == [
        f"{tmp_path}/src/app.py-7-def helper():",
        f"{tmp_path}/src/app.py:8:    return 42",
    ]
    out = await run(pattern="x", output_mode="lines")
    assert out.is_error and "output_mode" in out.content


async def test_asymmetric_context(tmp_path: Path, backend: str) -> None:
    (tmp_path / "n.txt").write_text("".join(f"row {i}\n" for i in range(1, 21)))
    run = Runner(grep_tool(output_modes=True), local_env(tmp_path, grep_backend=backend))
    f = f"{tmp_path}/n.txt"
    out = await run(pattern=r"^row (5|12)$", output_mode="content", **{"-B": 2})
    assert out.content.splitlines() == [
        f"{f}-3-row 3",
        f"{f}-4-row 4",
        f"{f}:5:row 5",
        "--",
        f"{f}-10-row 10",
        f"{f}-11-row 11",
        f"{f}:12:row 12",
    ]
    out = await run(pattern=r"^row (5|12)$", output_mode="content", **{"-A": 1, "-C": 3})
    assert out.content.splitlines() == [
        f"{f}-2-row 2",
        f"{f}-3-row 3",
        f"{f}-4-row 4",
        f"{f}:5:row 5",
        f"{f}-6-row 6",
        "--",
        f"{f}-9-row 9",
        f"{f}-10-row 10",
        f"{f}-11-row 11",
        f"{f}:12:row 12",
        f"{f}-13-row 13",
    ]
    # Context is ignored outside content mode.
    out = await run(pattern="row 5", **{"-A": 3})
    assert out.content == f


def test_trim_context_reads_awkward_paths() -> None:
    # A path containing ":12:"- and "-3-"-like pieces must not confuse the parser.
    p = "/x/a-3-b:12:c.txt"
    text = "\n".join([f"{p}-1-one", f"{p}:2:two", f"{p}-3-three", f"{p}-4-four", "--", f"{p}:9:nine"])
    assert trim_context(text, before=0, after=1).split("\n") == [f"{p}:2:two", f"{p}-3-three", "--", f"{p}:9:nine"]
    assert trim_context(text, before=1, after=0).split("\n") == [f"{p}-1-one", f"{p}:2:two", "--", f"{p}:9:nine"]
    note = "\n[Results truncated: showing the first 2 matches. Narrow it.]"
    assert trim_context(text + note, before=0, after=0).endswith(note)
    # Something that is not grep output is left as it was.
    assert trim_context("just text\nmore", before=0, after=2) == "just text\nmore"


# -- grep_files (codex) --------------------------------------------------------------------------


async def test_grep_files_newest_first_with_include_and_limit(tmp_path: Path, backend: str) -> None:
    for index, name in enumerate(["a.py", "b.py", "c.py", "d.txt"]):
        target = tmp_path / name
        target.write_text("needle\n")
        os.utime(target, (1_000_000 + index, 1_000_000 + [10, 30, 20, 40][index]))
    run = Runner(grep_files_tool(), local_env(tmp_path, grep_backend=backend))
    out = await run(pattern="needle", include="*.py")
    assert out.content.splitlines() == [f"{tmp_path}/b.py", f"{tmp_path}/c.py", f"{tmp_path}/a.py"]
    out = await run(pattern="needle", limit=2)
    assert out.content.splitlines()[:2] == [f"{tmp_path}/d.txt", f"{tmp_path}/b.py"]
    assert "[2 matching files not shown" in out.content
    out = await run(pattern="nothing-here")
    assert out.content == "No matches found."


async def test_grep_files_validation(tmp_path: Path) -> None:
    run = Runner(grep_files_tool(), local_env(tmp_path))
    out = await run(pattern="x", limit=0)
    assert out.is_error and "limit" in out.content and "minimum" in out.content.lower()
    out = await run(pattern="x", limit=5000)
    assert out.is_error and "limit" in out.content
    out = await run(pattern="")
    assert out.is_error and "pattern must not be empty" in out.content
    out = await run(pattern="x", path="nope")
    assert out.is_error and "Path not found" in out.content


async def test_grep_files_keeps_path_order_without_a_shell(tmp_path: Path) -> None:
    from ra.env import DelegatingExecutionEnvironment

    class NoShell(DelegatingExecutionEnvironment):
        async def exec_command(self, *args: object, **kwargs: object):  # type: ignore[override]
            raise PermissionError("commands are disabled here")

    for name in ("z.txt", "a.txt"):
        (tmp_path / name).write_text("needle\n")
    run = Runner(grep_files_tool(), NoShell(local_env(tmp_path)))
    out = await run(pattern="needle")
    assert out.content.splitlines() == [f"{tmp_path}/a.txt", f"{tmp_path}/z.txt"]


# -- glob ----------------------------------------------------------------------------------------


async def test_glob_newest_first_and_bounded(tmp_path: Path) -> None:
    for index in range(5):
        target = tmp_path / "pkg" / f"m{index}.py"
        target.parent.mkdir(exist_ok=True)
        target.write_text("")
        os.utime(target, (1_000_000, 1_000_000 + index))
    run = Runner(glob_tool(max_results=3), local_env(tmp_path))
    out = await run(pattern="**/*.py")
    assert out.content.splitlines()[:3] == [f"{tmp_path}/pkg/m4.py", f"{tmp_path}/pkg/m3.py", f"{tmp_path}/pkg/m2.py"]
    assert "[2 more files match" in out.content
    out = await run(pattern="*.py", path="pkg")
    assert out.metadata == {"files": 5, "shown": 3}
    out = await run(pattern="*.rs")
    assert not out.is_error and out.content == f"No files match '*.rs' in {tmp_path}."
    out = await run(pattern="*.py", path="nowhere")
    assert out.is_error and out.content == f"Directory not found: {tmp_path / 'nowhere'}"
    out = await run(pattern="src/[a-")
    assert out.is_error and "invalid glob pattern" in out.content

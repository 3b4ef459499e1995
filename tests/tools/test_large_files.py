"""A 2 GB sparse file (no disk, all of it readable) must not cost 2 GB of memory in a tool.

Each case runs one tool call in a fresh interpreter and reports how much its peak RSS grew
(``ru_maxrss``); before, grep's Python backend, edit_file, write_file (reading the old text for
its diff), read_many_files and apply_patch read the whole file, and read_file a whole line
however long. The bound asserted, 400 MB, is far
under the file and far over what the tools now read (at most 64 MiB for grep's Python side)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SIZE = 2 * 1024**3
MAX_GROWTH_MB = 400

DRIVER = r"""
import asyncio, json, resource, sys
from ra.env import LocalExecutionEnvironment
from ra.llm.types import ToolCall
from ra.tools.pipeline import ToolPipeline
from ra.tools.registry import ToolRegistry
from ra.tools.builtin import files, batch, search, patch

root, backend, tool_name, arguments = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
tools = {
    "edit_file": files.edit_file_tool(),
    "write_file": files.write_file_tool(),
    "read_many_files": batch.read_many_files_tool(),
    "read_file": files.read_file_tool(),
    "grep": search.grep_tool(),
    "apply_patch": patch.apply_patch_tool(),
}


class Sink:
    def tool_start(self, call): pass
    def tool_output(self, call, stream, chunk): pass
    def tool_end(self, outcome): pass


async def main():
    env = LocalExecutionEnvironment(root, grep_backend=backend)
    pipeline = ToolPipeline(ToolRegistry([tools[tool_name]]), env, Sink())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outcome = await pipeline.run(ToolCall("c1", tool_name, arguments))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    growth = (after - before) / 1024
    text = outcome.full_output
    print(json.dumps({"growth_mb": growth, "error": outcome.is_error, "output": text[:300] + text[-300:]}))


asyncio.run(main())
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("large")
    with open(root / "sparse.bin", "wb") as fh:  # all zeros, no disk blocks
        fh.truncate(SIZE)
    with open(root / "log.txt", "wb") as fh:  # text first (no NUL in the first 64 KiB), then a hole
        fh.write(b"needle at the start\n" + b"hay\n" * 40_000)
        fh.truncate(SIZE)
    (root / "small.txt").write_text("needle\n")
    return root


def _run(root: Path, tool: str, arguments: dict[str, object], backend: str = "python") -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(root), backend, tool, json.dumps(arguments)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


CASES = {
    "grep-dir-python": ("grep", {"pattern": "needle", "path": "."}, "python"),
    "grep-dir-ripgrep": ("grep", {"pattern": "needle", "path": "."}, "ripgrep"),
    "grep-named-binary": ("grep", {"pattern": "needle", "path": "sparse.bin"}, "python"),
    "grep-named-text": ("grep", {"pattern": "needle", "path": "log.txt"}, "python"),
    "edit_file": ("edit_file", {"file_path": "log.txt", "old_string": "needle", "new_string": "pin"}, "python"),
    "write_file": ("write_file", {"file_path": "sparse.bin", "content": "small now\n"}, "python"),
    "read_many_files": ("read_many_files", {"paths": ["log.txt", "small.txt"]}, "python"),
    # Line 40002 is the hole: one line of almost 2 GB, read past when paging and when shown.
    "read_file": ("read_file", {"file_path": "log.txt", "offset": 40000, "limit": 5}, "python"),
    "apply_patch": (
        "apply_patch",
        {"patch": "*** Begin Patch\n*** Update File: log.txt\n@@\n-needle at the start\n+pin\n*** End Patch"},
        "python",
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_2gb_sparse_file_does_not_grow_memory_by_its_size(
    tree: Path, case: tuple[str, dict[str, object], str], tmp_path: Path
) -> None:
    tool, arguments, backend = case
    if tool == "write_file":  # it replaces its file: give it its own
        with open(tmp_path / "sparse.bin", "wb") as fh:
            fh.truncate(SIZE)
        tree = tmp_path
    report = _run(tree, tool, arguments, backend)
    assert report["growth_mb"] < MAX_GROWTH_MB, report
    output = str(report["output"])
    if tool in ("edit_file", "apply_patch"):
        assert report["error"] and "larger than the 16 MiB" in output, report
        assert (tree / "log.txt").stat().st_size == SIZE  # unchanged
    elif tool == "read_file":
        assert not report["error"] and "40001 | hay" in output, report
        assert "[... line cut here: it goes on past 64 MiB" in output, report
    elif tool == "read_many_files":
        assert "Not read (larger than 4 MiB" in output and "log.txt" in output and "needle" in output
    elif tool == "write_file":
        assert not report["error"] and (tree / "sparse.bin").read_text() == "small now\n"
    elif case is CASES["grep-named-text"]:  # read past the NULs as ripgrep does, up to the bound
        assert "needle at the start" in output and "only the first 64 MiB" in output, report
    elif case is CASES["grep-named-binary"]:
        assert "only the first 64 MiB" in output, report
    else:  # a directory: both backends stop at the hole's first NUL, as ripgrep does
        assert "needle at the start" in output and "stopped at binary data" in output, report

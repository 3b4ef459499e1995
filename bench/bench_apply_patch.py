"""Speed of ``apply_patch``: a 50-hunk v4a patch on a 100,000-line file.

Cases (each the median of ``--repeat`` runs, milliseconds):

* parse only;
* parse + apply, exact matches, hunks without hints;
* parse + apply, every hunk behind an ``@@ def ...`` hint;
* parse + apply where every file line has trailing spaces the patch lacks, so each hunk falls to
  the second rung of the matching ladder;
* the same 50 hunks as one unified diff (``git diff`` style, with line numbers);
* parse + apply through a real temporary directory (disk read and write included).

The in-memory cases use a dict-backed environment so they measure the engine, not the disk.
Run: ``python bench/bench_apply_patch.py [--lines N] [--hunks H] [--repeat R]``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from _memenv import MemEnv  # noqa: E402

from ra.tools.apply_patch import apply_patch, parse_patch  # noqa: E402


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)


class DiskEnv(MemEnv):
    """The same methods over a real directory (plain blocking calls, as a local environment makes)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def resolve(self, path: str) -> str:
        return os.path.normpath(os.path.join(self.root, path))

    async def read_bytes(self, path: str) -> bytes:
        return _read(self.resolve(path))

    async def write_file(self, path: str, content: str | bytes) -> None:
        _write(self.resolve(path), content.encode() if isinstance(content, str) else content)

    async def file_exists(self, path: str) -> bool:
        return _exists(self.resolve(path))

    async def is_directory(self, path: str) -> bool:
        return _isdir(self.resolve(path))


_exists = os.path.exists
_isdir = os.path.isdir


def make_file(n: int, trailing: str = "") -> str:
    out = []
    for i in range(n):
        if i % 20 == 0:
            out.append(f"def function_{i}(arg):{trailing}")
        else:
            out.append(f"    value_{i} = compute(arg, {i})  # step {i % 7}{trailing}")
    return "\n".join(out) + "\n"


def change_points(n: int, hunks: int) -> list[int]:
    """One changed line per hunk, in the middle of a 20-line function so its context stays inside."""
    step = n // hunks
    return [(k * step + step // 2) // 20 * 20 + 10 for k in range(hunks)]


def make_v4a(n: int, hunks: int, *, hints: bool) -> str:
    lines = make_file(n).splitlines()
    out = ["*** Begin Patch", "*** Update File: big.py"]
    for p in change_points(n, hunks):
        out.append(f"@@ {lines[p - p % 20]}" if hints else "@@")
        out.extend(" " + lines[j] for j in range(p - 3, p))
        out.append("-" + lines[p])
        out.append("+" + lines[p].replace("compute", "compute_fast"))
        out.extend(" " + lines[j] for j in range(p + 1, p + 4))
    out.append("*** End Patch")
    return "\n".join(out) + "\n"


def make_unified(n: int, hunks: int) -> str:
    lines = make_file(n).splitlines()
    out = ["diff --git a/big.py b/big.py", "--- a/big.py", "+++ b/big.py"]
    for p in change_points(n, hunks):
        out.append(f"@@ -{p - 2},7 +{p - 2},7 @@")
        out.extend(" " + lines[j] for j in range(p - 3, p))
        out.append("-" + lines[p])
        out.append("+" + lines[p].replace("compute", "compute_fast"))
        out.extend(" " + lines[j] for j in range(p + 1, p + 4))
    return "\n".join(out) + "\n"


def timed(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--hunks", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n, h, r = args.lines, args.hunks, args.repeat
    plain = make_file(n).encode()
    padded = make_file(n, trailing="  ").encode()
    patch = make_v4a(n, h, hints=False)
    hinted = make_v4a(n, h, hints=True)
    unified = make_unified(n, h)
    print(f"file: {n:,} lines, {len(plain) / 1e6:.1f} MB; patch: {h} hunks, {len(patch.splitlines()):,} lines")

    def apply_mem(text: str, data: bytes) -> None:
        env = MemEnv({"big.py": data})
        result = asyncio.run(apply_patch(text, env))
        assert result.changes[0].added == h, result.summary

    print(f"  parse only (v4a)                       {timed(lambda: parse_patch(patch), r):8.1f} ms")
    print(f"  parse + apply, exact                   {timed(lambda: apply_mem(patch, plain), r):8.1f} ms")
    print(f"  parse + apply, @@ hints                {timed(lambda: apply_mem(hinted, plain), r):8.1f} ms")
    print(f"  parse + apply, trailing-space fuzz     {timed(lambda: apply_mem(patch, padded), r):8.1f} ms")
    print(f"  parse + apply, unified diff            {timed(lambda: apply_mem(unified, plain), r):8.1f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        target = os.path.join(tmp, "big.py")

        def apply_disk() -> None:
            _write(target, plain)
            asyncio.run(apply_patch(patch, DiskEnv(tmp)))

        print(f"  parse + apply, real temp directory     {timed(apply_disk, r):8.1f} ms")


if __name__ == "__main__":
    main()

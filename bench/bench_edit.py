"""Speed of ``edit_file`` on a 10 MB file: the exact path and each fuzzy rung.

Cases (median of ``--repeat`` runs, milliseconds, including decode and encode of the whole file):

* exact, unique 3-line ``old_string`` near the end (LF file);
* exact, the same on a CRLF copy of the file (offsets mapped back past every ``\\r``);
* exact with ``replace_all`` over ~900 occurrences, LF and CRLF;
* fuzzy, trailing whitespace: the file's lines end in spaces the ``old_string`` lacks;
* fuzzy, indentation: the ``old_string`` is indented differently (replacement re-indented);
* fuzzy, punctuation: the file has typographic quotes where the ``old_string`` has ASCII;
* not found: the full ladder runs and the closest region is searched for the error message.

A dict-backed environment keeps the disk out of the figures.
Run: ``python bench/bench_edit.py [--mb M] [--repeat R]``. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from _memenv import MemEnv  # noqa: E402

from ra.tools.edit import EditError, edit_file  # noqa: E402


def make_text(n: int, *, trailing: str = "", quote: str = "'") -> str:
    lines: list[str] = []
    for i in range(n):
        if i % 25 == 0:
            line = f"def handler_{i}(request):{trailing}"
        elif i % 200 == 7:
            line = f"    log({quote}marker{quote}){trailing}"
        else:
            line = f"    result_{i} = process(request, {i}, mode={quote}fast{quote}){trailing}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def lines_for(target_bytes: int) -> int:
    """How many generated lines make ``target_bytes`` (the lines average ~52 bytes)."""
    n = target_bytes // 52
    while len(make_text(n)) > target_bytes:
        n -= n // 100 + 1
    return n


def timed(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    size = int(args.mb * 1_000_000)
    n = lines_for(size)
    text = make_text(n)
    padded = make_text(n, trailing="   ")
    curly = make_text(n, quote="\u2019")
    target = n - 1000 if (n - 1000) % 25 else n - 999
    old = "\n".join(text.splitlines()[target : target + 3])
    new = old.replace("process", "process_v2")
    reindented = "\n".join(line.strip() for line in old.split("\n"))
    files = {
        "lf": text.encode(),
        "crlf": text.replace("\n", "\r\n").encode(),
        "padded": padded.encode(),
        "curly": curly.encode(),
    }
    print(f"file: {len(files['lf']) / 1e6:.1f} MB, {n:,} lines; old_string: 3 lines at line {target + 1:,}")

    def run(kind: str, old_s: str, new_s: str, replace_all: bool = False, expect: str | None = None) -> None:
        env = MemEnv({"f.py": files[kind]})
        try:
            result = asyncio.run(edit_file(env, "f.py", old_s, new_s, replace_all))
        except EditError as exc:
            assert exc.code == expect, exc
            return
        assert expect is None and result.replacements >= 1

    cases: list[tuple[str, Callable[[], None]]] = [
        ("exact (LF)", lambda: run("lf", old, new)),
        ("exact (CRLF)", lambda: run("crlf", old, new)),
        ("exact, replace_all (~900 hits)", lambda: run("lf", "log('marker')", "log('MARK')", True)),
        ("exact, replace_all (CRLF)", lambda: run("crlf", "log('marker')", "log('MARK')", True)),
        ("fuzzy: trailing whitespace", lambda: run("padded", old, new)),
        ("fuzzy: indentation", lambda: run("lf", reindented, reindented.replace("process", "p2"))),
        ("fuzzy: typographic quotes", lambda: run("curly", old.replace("'", "'"), new)),
        ("not found (whole ladder + hint)", lambda: run("lf", old + "\nnowhere()", new, expect="not_found")),
    ]
    for label, fn in cases:
        print(f"  {label:<34} {timed(fn, args.repeat):8.1f} ms")


if __name__ == "__main__":
    main()

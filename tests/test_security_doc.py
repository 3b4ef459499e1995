"""docs/security.md names a test for every attack it lists: each name must be a test that exists.

A row whose test was renamed or deleted would claim a protection nothing checks any more; this
keeps the table honest. ``name...`` stands for any test whose name starts with ``name``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tests() -> tuple[set[str], set[str]]:
    files = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")}
    names: set[str] = set()
    for name in files:
        names.update(re.findall(r"^\s*(?:async\s+)?def (test_\w+)", (ROOT / name).read_text(), re.M))
    return files, names


def test_every_test_the_security_table_names_exists() -> None:
    files, names = _tests()
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    cited = 0
    problems = []
    for cell in re.findall(r"`([^`]+)`", text):
        for path in re.findall(r"tests/[\w/]+\.py", cell):
            cited += 1
            if path not in files:
                problems.append(f"no file {path}")
        for name, prefix in re.findall(r"(?<![\w/])(test_\w+)(\.\.\.)?(?!\.py)", cell):
            cited += 1
            if prefix and not any(n.startswith(name) for n in names):
                problems.append(f"no test starts with {name}")
            elif not prefix and name not in names:
                problems.append(f"no test {name}")
    assert cited > 40, "the table names its tests"
    assert not problems, "\n".join(problems)

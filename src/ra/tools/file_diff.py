"""What an editing tool changed in one file, as a unified diff record for the host (never the model).

``apply_patch``, ``edit_file`` and ``write_file`` put one such record per file in their
``ToolOutput.metadata`` (it reaches hosts in ``TOOL_CALL_END``). Only the tool sees the file both
before and after the change, so the diff is made here; a display (``ra``'s terminal renderer, an
editor plugin) then needs no file access of its own, and ``--json`` / trajectory readers get the
same data. The model's text result is unchanged.

The record is plain JSON::

    {"path": "/abs/a.py", "status": "modified", "added": 4, "removed": 1,
     "unified": "--- /abs/a.py\\n+++ /abs/a.py\\n@@ -3,7 +3,10 @@\\n ...", "truncated": true}

``status`` is ``created``, ``modified`` or ``deleted``; ``old_path`` is set for a rename;
``truncated`` is present (true) when ``unified`` was cut at :data:`MAX_DIFF_LINES` lines (the
counts still cover the whole change). A file whose earlier content is unknown (binary, unreadable)
gets ``"unified": null`` and no counts.

Cost stays linear for the common case: lines shared at both ends are skipped before
:mod:`difflib` compares the middle, and a middle too large for its quadratic matcher is shown as
one replacement instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONTEXT_LINES", "MAX_DIFF_LINES", "change_record", "unknown_change_record"]

#: Unchanged lines shown around each change (as ``diff -u``).
CONTEXT_LINES = 3
#: Longest ``unified`` text kept in a record, in lines; the rest is counted, not stored.
MAX_DIFF_LINES = 2000
#: Above this many line pairs in the differing middle, skip difflib's matcher (quadratic).
_MATCH_LIMIT = 4_000_000

_NO_NEWLINE = "\\ No newline at end of file\n"


def change_record(
    path: str,
    before: str | None,
    after: str | None,
    *,
    old_path: str | None = None,
    context: int = CONTEXT_LINES,
    max_lines: int = MAX_DIFF_LINES,
) -> dict[str, Any]:
    """The record for ``path`` going from ``before`` to ``after`` (``None``: the file did not /
    no longer exists)."""
    status = "created" if before is None else "deleted" if after is None else "modified"
    a = split_lines(before or "")
    b = split_lines(after or "")
    opcodes = _opcodes(a, b)
    added = sum(j2 - j1 for tag, _, _, j1, j2 in opcodes if tag != "equal")
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in opcodes if tag != "equal")
    source = old_path or path
    lines = [
        "--- " + ("/dev/null" if before is None else source) + "\n",
        "+++ " + ("/dev/null" if after is None else path) + "\n",
    ]
    truncated = False
    for group in _groups(opcodes, len(a), len(b), context):
        lines.extend(_hunk(group, a, b))
        if len(lines) > max_lines:
            truncated = True
            del lines[max_lines:]
            break
    record: dict[str, Any] = {"path": path, "status": status, "added": added, "removed": removed}
    if old_path and old_path != path:
        record["old_path"] = old_path
    record["unified"] = "".join(lines) if added or removed else ""
    if truncated:
        record["truncated"] = True
    return record


def unknown_change_record(path: str, *, status: str = "modified") -> dict[str, Any]:
    """A change whose diff cannot be shown (the earlier content was binary or unreadable)."""
    return {"path": path, "status": status, "added": None, "removed": None, "unified": None}


def split_lines(text: str) -> list[str]:
    """``text`` as lines that keep their ending (only ``\\n`` ends a line; ``\\r\\n`` stays whole)."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


# -- diffing ---------------------------------------------------------------------------------------

Opcode = tuple[str, int, int, int, int]


def _opcodes(a: list[str], b: list[str]) -> list[Opcode]:
    """difflib-style opcodes for ``a`` -> ``b``, matching only the part between common ends."""
    n, m = len(a), len(b)
    lo = 0
    while lo < n and lo < m and a[lo] == b[lo]:
        lo += 1
    hi = 0
    while hi < n - lo and hi < m - lo and a[n - 1 - hi] == b[m - 1 - hi]:
        hi += 1
    ops: list[Opcode] = []
    if lo:
        ops.append(("equal", 0, lo, 0, lo))
    mid_a, mid_b = n - hi - lo, m - hi - lo
    if mid_a and mid_b and mid_a * mid_b <= _MATCH_LIMIT:
        from difflib import SequenceMatcher

        matcher = SequenceMatcher(None, a[lo : n - hi], b[lo : m - hi])
        ops.extend((tag, i1 + lo, i2 + lo, j1 + lo, j2 + lo) for tag, i1, i2, j1, j2 in matcher.get_opcodes())
    elif mid_a or mid_b:
        tag = "replace" if mid_a and mid_b else "delete" if mid_a else "insert"
        ops.append((tag, lo, n - hi, lo, m - hi))
    if hi:
        ops.append(("equal", n - hi, n, m - hi, m))
    return ops


def _groups(opcodes: list[Opcode], n: int, m: int, context: int) -> list[list[Opcode]]:
    """The opcodes cut into hunks: each change with up to ``context`` equal lines either side;
    changes closer than ``2 * context`` lines share a hunk."""
    groups: list[list[Opcode]] = []
    current: list[Opcode] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag != "equal":
            current.append((tag, i1, i2, j1, j2))
            continue
        if current:
            if i2 - i1 <= 2 * context and (i2 < n or j2 < m):
                current.append((tag, i1, i2, j1, j2))  # a short gap inside the hunk
                continue
            keep = min(context, i2 - i1)
            current.append((tag, i1, i1 + keep, j1, j1 + keep))
            groups.append(current)
            current = []
        keep = min(context, i2 - i1)
        if keep:
            current.append((tag, i2 - keep, i2, j2 - keep, j2))
    if current and any(op[0] != "equal" for op in current):
        groups.append(current)
    return groups


def _range(start: int, length: int) -> str:
    first = start + 1 if length else start
    return str(first) if length == 1 else f"{first},{length}"


def _hunk(group: list[Opcode], a: list[str], b: list[str]) -> list[str]:
    i1, j1 = group[0][1], group[0][3]
    i2, j2 = group[-1][2], group[-1][4]
    out = [f"@@ -{_range(i1, i2 - i1)} +{_range(j1, j2 - j1)} @@\n"]
    for tag, x1, x2, y1, y2 in group:
        if tag == "equal":
            out.extend(_marked(" ", a[x1:x2]))
            continue
        out.extend(_marked("-", a[x1:x2]))
        out.extend(_marked("+", b[y1:y2]))
    return out


def _marked(marker: str, lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(marker + line)
        else:
            out.append(marker + line + "\n")
            out.append(_NO_NEWLINE)
    return out

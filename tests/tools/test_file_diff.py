"""Diff records of file changes (ra.tools.file_diff): valid unified diffs, exact counts, bounded size."""

from __future__ import annotations

import random
import re

from ra.tools.file_diff import change_record, split_lines

_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$")


def _apply(before: str, unified: str) -> str:
    """Apply ``unified`` to ``before`` strictly: every context and removed line must match, and
    every hunk's header must agree with its body."""
    old = split_lines(before)
    lines = unified.split("\n")[:-1]
    assert lines[0].startswith("--- ") and lines[1].startswith("+++ ")
    out: list[str] = []
    pos = 0
    i = 2
    while i < len(lines):
        match = _HEADER.match(lines[i])
        assert match, lines[i]
        old_start, old_len = int(match[1]), int(match[2] or 1)
        new_start, new_len = int(match[3]), int(match[4] or 1)
        start = old_start - 1 if old_len else old_start
        assert start >= pos
        out.extend(old[pos:start])
        pos = start
        assert len(out) == (new_start - 1 if new_len else new_start)
        i += 1
        seen_old = seen_new = 0
        while i < len(lines) and not lines[i].startswith("@@"):
            marker, text = lines[i][0], lines[i][1:] + "\n"
            if i + 1 < len(lines) and lines[i + 1].startswith("\\ No newline"):
                text = text[:-1]
            if marker in " -":
                assert old[pos] == text, (old[pos], text)
                pos += 1
                seen_old += 1
            if marker in " +":
                out.append(text)
                seen_new += 1
            i += 1
        assert (seen_old, seen_new) == (old_len, new_len)
    out.extend(old[pos:])
    return "".join(out)


def test_random_edits_give_diffs_that_turn_before_into_after() -> None:
    rng = random.Random(7)
    for _ in range(400):
        before_lines = [f"v{rng.randint(0, 6)}\n" for _ in range(rng.randint(0, 40))]
        after_lines = list(before_lines)
        for _ in range(rng.randint(1, 5)):
            roll = rng.random()
            if roll < 0.3 and after_lines:
                del after_lines[rng.randrange(len(after_lines))]
            elif roll < 0.6:
                after_lines.insert(rng.randint(0, len(after_lines)), f"n{rng.randint(0, 4)}\n")
            elif after_lines:
                after_lines[rng.randrange(len(after_lines))] = f"x{rng.randint(0, 4)}\n"
        if after_lines and rng.random() < 0.2:
            after_lines[-1] = after_lines[-1].rstrip("\n")  # no final newline
        before, after = "".join(before_lines), "".join(after_lines)
        record = change_record("f.txt", before, after)
        if before == after:
            assert (record["unified"], record["added"], record["removed"]) == ("", 0, 0)
            continue
        assert _apply(before, record["unified"]) == after
        body = record["unified"].split("\n")[2:]
        assert record["added"] == sum(1 for line in body if line.startswith("+"))
        assert record["removed"] == sum(1 for line in body if line.startswith("-"))


def test_a_small_edit_is_one_hunk_with_three_lines_of_context() -> None:
    before = "".join(f"line {n}\n" for n in range(1, 21))
    after = before.replace("line 10\n", "line ten\n")
    record = change_record("/w/a.py", before, after)
    assert record == {
        "path": "/w/a.py",
        "status": "modified",
        "added": 1,
        "removed": 1,
        "unified": "--- /w/a.py\n+++ /w/a.py\n@@ -7,7 +7,7 @@\n line 7\n line 8\n line 9\n-line 10\n"
        "+line ten\n line 11\n line 12\n line 13\n",
    }


def test_created_deleted_renamed_and_final_newline() -> None:
    created = change_record("n.txt", None, "a\nb")
    assert created["status"] == "created" and created["added"] == 2
    assert created["unified"] == "--- /dev/null\n+++ n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n"
    deleted = change_record("d.txt", "gone\n", None)
    assert deleted["status"] == "deleted" and deleted["removed"] == 1
    assert deleted["unified"] == "--- d.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n"
    moved = change_record("new.txt", "x\n", "y\n", old_path="old.txt")
    assert moved["old_path"] == "old.txt" and moved["unified"].startswith("--- old.txt\n+++ new.txt\n")
    # Only the final newline changed: still a change, and the diff says so.
    eol = change_record("e.txt", "a\nb", "a\nb\n")
    assert (eol["added"], eol["removed"]) == (1, 1)
    assert _apply("a\nb", eol["unified"]) == "a\nb\n"


def test_crlf_lines_stay_whole() -> None:
    record = change_record("w.txt", "a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n")
    assert (record["added"], record["removed"]) == (1, 1)
    assert "-b\r\n+B\r\n" in record["unified"]


def test_large_changes_are_bounded() -> None:
    rng = random.Random(3)
    before = "".join(f"{rng.random()}\n" for _ in range(5000))
    after = "".join(f"{rng.random()}\n" for _ in range(5000))
    record = change_record("big.txt", before, after, max_lines=100)
    # The counts cover everything; the stored diff is cut, and says so.
    assert (record["added"], record["removed"]) == (5000, 5000)
    assert record["truncated"] is True
    assert len(record["unified"].splitlines()) == 100

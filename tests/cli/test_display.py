"""What ``ra`` shows about tool calls: why a call failed, and what an edit changed.

The real ``ra`` runs against a scripted Chat Completions server on 127.0.0.1: in a pseudo-terminal
where the display matters (coloured diffs, dimmed errors, the interactive prompt), through pipes
elsewhere (plain lines, ``--verbose``, ``--json``). The ra profile edits with ``apply_patch``; the
anthropic profile (on the same Chat Completions server) has ``edit_file`` and ``write_file``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pexpect

from tests.cli.support import clean_env, enqueue_text, enqueue_tools, jsonl, ra_command, run_ra
from tests.support.replay import ReplayServer

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SGR_RUN = re.compile(r"(?:\x1b\[[0-9;]*m)+$")

#: A read_file call without its required argument: the pipeline rejects it with a two-line reason.
BAD_READ = ("bad", "read_file", {"nope": 1})
#: A patch whose context is not in the file: a long, multi-line reason.
BAD_PATCH = "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n zzz\n-yyy\n+xxx\n"
BAD_PATCH_LAST_LINE = "Re-read the file and copy the context lines exactly."


def _args(server: ReplayServer, *more: str) -> list[str]:
    return ["--base-url", f"{server.base_url}/v1", "--model", "m", *more]


def _anthropic(server: ReplayServer, *more: str) -> list[str]:
    return _args(server, "--profile", "anthropic", "--provider", "openai-compatible", *more)


def _numbered(path: Path, count: int) -> None:
    path.write_text("".join(f"line {n}\n" for n in range(1, count + 1)))


def _run_in_pty(args: list[str], cwd: Path, **env: str) -> tuple[str, int]:
    """Run ``ra`` in a pseudo-terminal to the end; its raw output (with escape codes) and exit status."""
    command = ra_command()
    child = pexpect.spawn(
        command[0],
        [*command[1:], *args],
        env=clean_env(cwd, TERM="xterm", **env),
        cwd=str(cwd),
        encoding="utf-8",
        dimensions=(40, 120),
        timeout=90,
    )
    try:
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    return child.before, child.exitstatus


def _styles_before(raw: str, text: str) -> set[str]:
    """The SGR parameters (``"31"``, ``"2"``, ...) written right before the first ``text``."""
    at = raw.find(text)
    assert at >= 0, f"{text!r} not in the output:\n{ANSI.sub('', raw)}"
    run = SGR_RUN.search(raw[:at])
    if run is None:
        return set()
    return {p for params in re.findall(r"\x1b\[([0-9;]*)m", run.group()) for p in params.split(";") if p}


# -- diffs on a terminal ---------------------------------------------------------------------------


def test_apply_patch_shows_a_coloured_diff_and_the_files_changed(replay_server: ReplayServer, tmp_path: Path) -> None:
    _numbered(tmp_path / "a.py", 80)
    small = "--- a/a.py\n+++ b/a.py\n@@ -4,3 +4,3 @@\n line 4\n-line 5\n+LINE FIVE\n line 6\n"
    # 20 lines replaced further down: 46 diff rows with the context, more than a glance shows.
    big = "--- a/a.py\n+++ b/a.py\n@@ -40,20 +40,20 @@\n"
    big += "".join(f"-line {n}\n" for n in range(40, 60)) + "".join(f"+new {n}\n" for n in range(40, 60))
    new = "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1,3 @@\n+import os\n+\n+print(os.getcwd())\n"
    enqueue_tools(replay_server, ("c1", "apply_patch", {"patch": small}))
    enqueue_tools(replay_server, ("c2", "apply_patch", {"patch": big}))
    enqueue_tools(replay_server, ("c3", "apply_patch", {"patch": new}))
    enqueue_text(replay_server, "Patched.")
    raw, status = _run_in_pty(_args(replay_server, "patch it"), tmp_path)
    plain = ANSI.sub("", raw)
    assert status == 0, plain
    assert (tmp_path / "a.py").read_text().count("new ") == 20  # the patches really applied
    # Numbered rows: the removed line under its old number in red, the added one in green,
    # context dim; the file's name with its counts first.
    assert re.search(r"a\.py \(\+1 -1\)\s+2\s+line 2\s+3\s+line 3\s+4\s+line 4\s+5 - line 5\s+5 \+ LINE FIVE", plain)
    assert "31" in _styles_before(raw, "- line 5")
    assert "32" in _styles_before(raw, "+ LINE FIVE")
    assert "2" in _styles_before(raw, "  line 4")
    # The long diff stops with a count of what is left out.
    assert "a.py (+20 -20)" in plain
    assert "40 - line 40" in plain and "… 16 more lines" in plain
    assert "+ new 59" not in plain
    # A new file: compact, every line added.
    assert re.search(r"pkg/new\.py \(new, \+3\)\s+1 \+ import os\s+2 \+\s+3 \+ print\(os\.getcwd\(\)\)", plain)
    # The tool's own "Success. Updated the following files" text gives way to the diff.
    assert "Success. Updated" not in plain
    # The closing lines: what changed over the run, then the totals.
    assert "2 files changed: a.py (+21 -21), pkg/new.py (new, +3)" in plain
    assert plain.index("2 files changed") < plain.index("4 steps · 3 tool calls")


def test_edit_file_and_write_file_show_diffs_on_a_terminal(replay_server: ReplayServer, tmp_path: Path) -> None:
    _numbered(tmp_path / "a.py", 30)
    (tmp_path / "c.txt").write_text("old text\n")
    edit = {"file_path": "a.py", "old_string": "line 12\n", "new_string": "line twelve\nline 12b\n"}
    enqueue_tools(replay_server, ("c1", "edit_file", edit))
    enqueue_tools(replay_server, ("c2", "write_file", {"file_path": "c.txt", "content": "new text\n"}))
    body = "".join(f"print({n})\n" for n in range(25))
    enqueue_tools(replay_server, ("c3", "write_file", {"file_path": "b.py", "content": body}))
    enqueue_text(replay_server, "Edited.")
    raw, status = _run_in_pty(_anthropic(replay_server, "edit"), tmp_path)
    plain = ANSI.sub("", raw)
    assert status == 0, plain
    assert "✓ edit_file a.py" in plain and "✓ write_file c.txt" in plain  # the path, not the JSON
    assert re.search(r"a\.py \(\+2 -1\)\s+9\s+line 9\s+10\s+line 10\s+11\s+line 11\s+12 - line 12", plain)
    assert re.search(r"12 \+ line twelve\s+13 \+ line 12b\s+14\s+line 13", plain)
    assert "31" in _styles_before(raw, "- line 12")
    assert "32" in _styles_before(raw, "+ line twelve")
    assert re.search(r"c\.txt \(\+1 -1\)\s+1 - old text\s+1 \+ new text", plain)
    assert "32" in _styles_before(raw, "+ new text")
    # A written new file shows its first lines only.
    assert "b.py (new, +25)" in plain
    assert "10 + print(9)" in plain and "… 15 more lines" in plain and "print(10)" not in plain
    assert "3 files changed: a.py (+2 -1), c.txt (+1 -1), b.py (new, +25)" in plain


def test_interactive_turns_show_diffs_and_their_own_changes(replay_server: ReplayServer, tmp_path: Path) -> None:
    _numbered(tmp_path / "a.py", 10)
    patch = "--- a/a.py\n+++ b/a.py\n@@ -2,3 +2,3 @@\n line 2\n-line 3\n+LINE THREE\n line 4\n"
    enqueue_tools(replay_server, ("c1", "apply_patch", {"patch": patch}))
    enqueue_text(replay_server, "first turn done")
    enqueue_text(replay_server, "second turn done")
    command = ra_command()
    child = pexpect.spawn(
        command[0],
        [*command[1:], *_args(replay_server)],
        env=clean_env(tmp_path, TERM="xterm", RA_HISTORY_FILE=str(tmp_path / "history")),
        cwd=str(tmp_path),
        encoding="utf-8",
        dimensions=(40, 120),
        timeout=90,
    )
    try:
        child.expect_exact("ra> ")
        child.sendline("change it")
        child.expect_exact("first turn done")
        first = child.before
        child.expect_exact("ra> ")
        first += child.before
        child.sendline("and now?")
        child.expect_exact("second turn done")
        second = child.before
        child.expect_exact("ra> ")
        second += child.before
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    first_plain = ANSI.sub("", first)
    assert re.search(r"3 - line 3\s+3 \+ LINE THREE", first_plain)
    assert "32" in _styles_before(first, "+ LINE THREE")
    assert "1 file changed: a.py (+1 -1)" in first_plain
    # The tally is per turn: a turn without edits reports none.
    assert "file changed" not in ANSI.sub("", second) and "files changed" not in ANSI.sub("", second)


# -- errors ----------------------------------------------------------------------------------------


def _script_errors(server: ReplayServer) -> None:
    enqueue_tools(server, BAD_READ)
    enqueue_tools(server, ("p", "apply_patch", {"patch": BAD_PATCH}))
    enqueue_text(server, "Gave up.")


def test_a_failed_call_shows_the_first_lines_of_why_dimmed(replay_server: ReplayServer, tmp_path: Path) -> None:
    _numbered(tmp_path / "a.py", 5)
    _script_errors(replay_server)
    raw, status = _run_in_pty(_args(replay_server, "try"), tmp_path)
    plain = ANSI.sub("", raw)
    assert status == 0, plain
    assert re.search(
        r"✗ read_file.*\n\s+Invalid arguments for tool read_file:\s*\n\s+- missing required field 'file_path'", plain
    )
    assert "2" in _styles_before(raw, "- missing required field 'file_path'")  # dim
    assert "2" in _styles_before(raw, "Invalid arguments for tool read_file:")
    # A long reason: its first three lines, then how much more there is.
    assert re.search(
        r"✗ apply_patch a\.py.*\n\s+apply_patch failed; no files were changed\.\s*\n\s+a\.py: hunk 1 of 1", plain
    )
    assert "   zzz" in plain and "… 2 more lines (--verbose shows all)" in plain
    assert BAD_PATCH_LAST_LINE not in plain
    assert "2" in _styles_before(raw, "apply_patch failed; no files were changed.")
    assert "files changed" not in plain and "file changed" not in plain  # nothing was


def test_verbose_shows_the_whole_error_on_a_terminal(replay_server: ReplayServer, tmp_path: Path) -> None:
    _numbered(tmp_path / "a.py", 5)
    _script_errors(replay_server)
    raw, status = _run_in_pty(_args(replay_server, "--verbose", "try"), tmp_path)
    plain = ANSI.sub("", raw)
    assert status == 0, plain
    assert re.search(r"   zzz\s*\n\s+  -yyy\s*\n\s+" + re.escape(BAD_PATCH_LAST_LINE), plain)
    assert "more lines" not in plain
    assert "2" in _styles_before(raw, BAD_PATCH_LAST_LINE)


def test_plain_lines_on_a_pipe_show_the_error_without_escape_codes(replay_server: ReplayServer, tmp_path: Path) -> None:
    _numbered(tmp_path / "a.py", 10)
    good = "--- a/a.py\n+++ b/a.py\n@@ -4,3 +4,3 @@\n line 4\n-line 5\n+LINE FIVE\n line 6\n"
    enqueue_tools(replay_server, ("ok", "apply_patch", {"patch": good}))
    _script_errors(replay_server)
    result = run_ra(_args(replay_server, "try"), clean_env(tmp_path), cwd=tmp_path)
    err = result.stderr
    assert result.returncode == 0, err
    assert result.stdout == "Gave up.\n"
    assert not ANSI.search(err) and not ANSI.search(result.stdout)
    lines = err.splitlines()
    at = next(i for i, line in enumerate(lines) if "Invalid arguments for tool read_file" in line)
    assert re.fullmatch(r"  error \(\d+ms\): Invalid arguments for tool read_file:", lines[at])
    assert lines[at + 1] == "  | - missing required field 'file_path'"
    patch_at = next(i for i, line in enumerate(lines) if "apply_patch failed; no files were changed." in line)
    assert lines[patch_at].startswith("  error (")
    assert lines[patch_at + 1].startswith("  | a.py: hunk 1 of 1")
    assert lines[patch_at + 2] == "  |    zzz"
    assert lines[patch_at + 3] == "  | … 2 more lines (--verbose shows all)"
    assert BAD_PATCH_LAST_LINE not in err
    # No diff on a pipe (the tool's own text instead), but the closing line names the file.
    assert "LINE FIVE" not in err and "line 5" not in err
    assert "  | M a.py" in err
    assert "ra: 1 file changed: a.py (+1 -1)" in lines
    assert lines[-1].startswith("ra: 4 steps · 3 tool calls")

    _script_errors(replay_server)
    verbose = run_ra(_args(replay_server, "-v", "try"), clean_env(tmp_path), cwd=tmp_path)
    assert verbose.returncode == 0, verbose.stderr
    assert not ANSI.search(verbose.stderr)
    tail = verbose.stderr.splitlines()
    end = tail.index(f"  | {BAD_PATCH_LAST_LINE}")
    assert tail[end - 2 : end] == ["  |    zzz", "  |   -yyy"]
    assert "more lines" not in verbose.stderr


def test_json_carries_diff_records_and_no_drawn_diff(replay_server: ReplayServer, tmp_path: Path) -> None:
    _numbered(tmp_path / "a.py", 10)
    edit = {"file_path": "a.py", "old_string": "line 5\n", "new_string": "LINE FIVE\n"}
    enqueue_tools(replay_server, ("c1", "edit_file", edit))
    enqueue_tools(replay_server, ("c2", "write_file", {"file_path": "n.txt", "content": "hello\n"}))
    enqueue_tools(replay_server, BAD_READ)
    enqueue_text(replay_server, "Done.")
    result = run_ra(_anthropic(replay_server, "--json", "edit"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    records = jsonl(result.stdout)  # every line is a record: nothing drawn in between
    assert records[-1]["type"] == "result" and records[-1]["text"] == "Done."
    ends = {r["call_id"]: r for r in records if r["type"] == "tool_call_end"}
    diff = ends["c1"]["metadata"]["diff"]
    assert diff["path"] == str(tmp_path / "a.py")
    assert (diff["status"], diff["added"], diff["removed"]) == ("modified", 1, 1)
    assert "@@ -2,7 +2,7 @@\n line 2\n line 3\n line 4\n-line 5\n+LINE FIVE\n line 6\n" in diff["unified"]
    created = ends["c2"]["metadata"]["diff"]
    assert (created["status"], created["added"], created["unified"].splitlines()[0]) == ("created", 1, "--- /dev/null")
    # The failed call's full reason is in the record, as before.
    assert "missing required field 'file_path'" in ends["bad"]["output"]


# -- the closing tally -----------------------------------------------------------------------------


def test_the_tally_sums_edits_per_file_and_follows_renames() -> None:
    from ra.cli.diffs import ChangeTally, FileDiff
    from ra.tools.file_diff import change_record

    tally = ChangeTally()
    for record in (
        change_record("/w/a.py", "1\n2\n", "1\nTWO\n"),
        change_record("/w/new.py", None, "x\ny\n"),
        change_record("/w/new.py", "x\ny\n", "x\ny\nz\n"),  # still new, now +3
        change_record("/w/a.py", "1\nTWO\n", "ONE\nTWO\n"),
        change_record("/w/tmp.txt", None, "scratch\n"),
        change_record("/w/tmp.txt", "scratch\n", None),  # made and removed: not reported
        change_record("/w/b.py", "k\n", "k\n", old_path="/w/old.py"),
        change_record("/elsewhere/c.txt", "c\n", None),
    ):
        diff = FileDiff.from_record(record)
        assert diff is not None
        tally.add(diff)
    assert tally.line("/w") == (
        "4 files changed: a.py (+2 -2), new.py (new, +3), old.py → b.py (+0 -0), /elsewhere/c.txt (deleted, -1)"
    )
    tally.clear()
    assert not tally


def _subagent_script(edit: dict[str, object]):
    """A responder for a parent that spawns a child, waits for it and answers; the child makes
    ``edit`` with edit_file and answers. Parent and child requests interleave, so each request is
    answered by whose it is (the child's task is its first user message) and how far it got."""
    import json

    from tests.cli.support import SSE, sse_text, sse_tools
    from tests.support.replay import Received, Scripted

    def scripted(body: str) -> Scripted:
        return Scripted(200, dict(SSE), [body.encode()])

    def answer(request: Received) -> Scripted | None:
        if not request.path.endswith("/chat/completions"):
            return None
        messages = request.json()["messages"]
        users = [m["content"] for m in messages if m["role"] == "user"]
        results = [m for m in messages if m["role"] == "tool"]
        if any("CHILD TASK" in str(u) for u in users[:1]):
            if not results:
                return scripted(sse_tools(("k1", "edit_file", edit)))
            return scripted(sse_text("child done"))
        if not results:
            return scripted(sse_tools(("p1", "spawn_agent", {"task": "CHILD TASK: make the edit"})))
        if len(results) == 1:
            agent = json.loads(results[0]["content"])["agent_id"]
            return scripted(sse_tools(("p2", "wait", {"agent_id": agent})))
        return scripted(sse_text("parent done"))

    return answer


def test_a_subagents_calls_and_edits_are_shown(replay_server: ReplayServer, tmp_path: Path) -> None:
    _numbered(tmp_path / "a.py", 5)
    replay_server.responder = _subagent_script(
        {"file_path": "a.py", "old_string": "line 3\n", "new_string": "line three\n"}
    )
    raw, status = _run_in_pty(_anthropic(replay_server, "delegate"), tmp_path)
    plain = ANSI.sub("", raw)
    assert status == 0, plain
    assert re.search(r"↳ agent[-_\w]* ✓ edit_file", plain), plain
    assert re.search(r"a\.py \(\+1 -1\)\s+1\s+line 1\s+2\s+line 2\s+3 - line 3\s+3 \+ line three", plain), plain
    assert "1 file changed: a.py (+1 -1)" in plain  # the child's edit counts in the run's summary

    (tmp_path / "a.py").write_text("x = 1\n")
    replay_server.requests.clear()
    replay_server.responder = _subagent_script({"file_path": "a.py", "old_string": "x = 1\n", "new_string": "x = 2\n"})
    result = run_ra(_anthropic(replay_server, "delegate"), clean_env(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"\[agent[-_\w]*\] edit_file ok: a\.py", result.stderr), result.stderr
    assert "1 file changed: a.py (+1 -1)" in result.stderr

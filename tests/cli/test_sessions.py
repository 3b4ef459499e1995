"""Sessions from the command line: every run is recorded, ``--resume`` / ``-c`` / ``--fork-session``
/ ``--session-id`` / ``--no-session-persistence``, ``ra sessions`` (list, show, delete), and what
goes wrong (unknown ids, contradictions, a corrupt record, a read-only sessions directory) - the
real ``ra`` command against the scripted Chat Completions server, records in a temporary
``RA_SESSIONS_DIR``."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.support import chat_requests, clean_env, enqueue_text, enqueue_tools, jsonl, run_ra
from tests.support.replay import ReplayServer


class Rig:
    """``ra`` runs in one project directory with one sessions directory."""

    def __init__(self, tmp_path: Path, server: ReplayServer) -> None:
        self.server = server
        self.project = tmp_path / "project"
        self.project.mkdir()
        self.sessions = tmp_path / "sessions"
        self.env = clean_env(tmp_path, RA_SESSIONS_DIR=str(self.sessions))

    def ra(self, *args: str, cwd: Path | None = None, stdin: str | None = "") -> Any:
        base = ["--base-url", f"{self.server.base_url}/v1", "--model", "m"]
        if args and args[0] == "sessions":
            base = []
        return run_ra([*base, *args], self.env, cwd=cwd or self.project, stdin=stdin)

    def files(self) -> list[Path]:
        return sorted(self.sessions.glob("*/*.jsonl"))

    def record(self, sid: str) -> list[dict[str, Any]]:
        (path,) = self.sessions.glob(f"*/*_{sid}.jsonl")
        return jsonl(path.read_text())

    def sent(self, request: int = -1) -> list[tuple[str, Any]]:
        """(role, content) of what a request sent, the system prompt left out."""
        return [(m["role"], m.get("content")) for m in chat_requests(self.server)[request]["messages"][1:]]


@pytest.fixture
def rig(tmp_path: Path, replay_server: ReplayServer) -> Rig:
    return Rig(tmp_path, replay_server)


def _session_of(stderr: str) -> str:
    """The session id the summary line names."""
    (line,) = [line for line in stderr.splitlines() if " · session " in line]
    return line.rsplit(" · session ", 1)[1].strip()


def test_a_run_is_recorded_and_continue_goes_on_with_it(rig: Rig) -> None:
    enqueue_tools(rig.server, ("c1", "shell_command", {"command": "echo step-one"}))
    enqueue_text(rig.server, "Done one.")
    enqueue_text(rig.server, "Done two.")
    first = rig.ra("first task")
    assert first.returncode == 0, first.stderr
    sid = _session_of(first.stderr)
    assert [p.name.endswith(f"_{sid}.jsonl") for p in rig.files()] == [True]

    second = rig.ra("-c", "go on")
    assert second.returncode == 0, second.stderr
    assert _session_of(second.stderr) == sid and f"session {sid}: resumed" in second.stderr
    sent = rig.sent()
    assert [role for role, _ in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[0][1] == "first task" and "step-one" in sent[2][1] and sent[3][1] == "Done one."
    assert sent[4][1] == "go on"
    # The summary is this run's: one step, not the session's three.
    assert "1 step · 0 tool calls · tokens 100 in / 10 out" in second.stderr
    kinds = [e["type"] for e in rig.record(sid)]
    assert kinds.count("user") == 2 and kinds.count("assistant") == 3 and kinds[0] == "session"


def test_resume_by_id_and_json_and_stream_json_name_the_session(rig: Rig) -> None:
    enqueue_text(rig.server, "one")
    enqueue_text(rig.server, "two")
    enqueue_text(rig.server, "three")
    first = rig.ra("--json", "hello")
    records = jsonl(first.stdout)
    (result,) = [r for r in records if r["type"] == "result"]
    sid = result["session_id"]
    assert sid and {r["session_id"] for r in records if "session_id" in r} == {sid}

    second = rig.ra("--output-format", "stream-json", "--resume", sid, "again")
    assert second.returncode == 0, second.stderr
    messages = jsonl(second.stdout)
    assert messages[0]["type"] == "system" and messages[0]["subtype"] == "init"
    assert {m["session_id"] for m in messages} == {sid} and messages[-1]["type"] == "result"
    assert rig.sent() == [("user", "hello"), ("assistant", "one"), ("user", "again")]

    third = rig.ra("--output-format", "json", "-r", sid, "and again")
    (only,) = jsonl(third.stdout)
    assert only["type"] == "result" and only["session_id"] == sid and only["result"] == "three"


def test_fork_session_goes_on_in_a_copy_and_leaves_the_original(rig: Rig) -> None:
    enqueue_text(rig.server, "original answer")
    enqueue_text(rig.server, "forked answer")
    sid = _session_of(rig.ra("start").stderr)
    before = rig.record(sid)
    fork = rig.ra("--resume", sid, "--fork-session", "try another way")
    assert fork.returncode == 0, fork.stderr
    new = _session_of(fork.stderr)
    assert new != sid and "forked into a new session" in fork.stderr
    assert rig.record(sid) == before
    header = rig.record(new)[0]
    assert header["parent_session"]["id"] == sid
    assert rig.sent() == [("user", "start"), ("assistant", "original answer"), ("user", "try another way")]


def test_session_id_names_a_new_session_and_refuses_one_in_use(rig: Rig) -> None:
    enqueue_text(rig.server, "ok")
    enqueue_text(rig.server, "fork ok")
    first = rig.ra("--session-id", "3f0c2f4e-1b7d-4c55-9a3e-0d8f6b2a9c11", "hello")
    assert first.returncode == 0 and _session_of(first.stderr) == "3f0c2f4e-1b7d-4c55-9a3e-0d8f6b2a9c11"
    again = rig.ra("--session-id", "3f0c2f4e-1b7d-4c55-9a3e-0d8f6b2a9c11", "hello again")
    assert again.returncode == 2 and "the id is in use" in again.stderr
    # A fork may be given its id; one in use is refused there too.
    fork = rig.ra("-c", "--fork-session", "--session-id", "my-fork", "fork it")
    assert fork.returncode == 0 and _session_of(fork.stderr) == "my-fork"
    refused = rig.ra("-c", "--fork-session", "--session-id", "my-fork", "fork it again")
    assert refused.returncode == 2 and "in use" in refused.stderr
    assert len(chat_requests(rig.server)) == 2


def test_no_session_persistence_writes_nothing(rig: Rig) -> None:
    enqueue_text(rig.server, "not kept")
    result = rig.ra("--no-session-persistence", "hello")
    assert result.returncode == 0 and result.stdout.strip() == "not kept"
    assert " · session " not in result.stderr  # nothing to resume, so nothing named
    assert not rig.sessions.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--resume", "no-such-session", "x"], "--resume no-such-session: no session 'no-such-session'"),
        (["--resume", "../../etc/passwd", "x"], "--resume: invalid session id"),
        (["--resume", "fix the bug"], "put -- before the task: ra --resume -- TASK"),
        (["--fork-session", "x"], "--fork-session forks the session given by --resume ID or --continue"),
        (["--resume", "a", "--continue", "x"], "--resume and --continue both choose"),
        (["--continue", "--no-session-persistence", "x"], "--no-session-persistence records nothing"),
        (["--session-id", "a/b", "x"], "--session-id: invalid session id"),
        (["--resume", "abc", "--session-id", "new", "x"], "--session-id names a new session"),
    ],
)
def test_bad_session_flags_are_usage_errors_before_any_model_call(rig: Rig, args: list[str], message: str) -> None:
    result = rig.ra(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and result.stderr.startswith("ra: error: ")
    assert chat_requests(rig.server) == [] and not rig.files()


def test_resume_without_an_id_and_no_terminal_says_to_give_the_id(rig: Rig) -> None:
    result = rig.ra("--resume", stdin="go on")
    assert result.returncode == 2
    assert "--resume without a session id needs a terminal to pick one; give the id" in result.stderr
    assert chat_requests(rig.server) == []


def test_a_corrupt_record_is_an_error_naming_the_file_and_line_and_is_left_alone(rig: Rig) -> None:
    enqueue_text(rig.server, "one")
    sid = _session_of(rig.ra("hello").stderr)
    (path,) = rig.files()
    lines = path.read_text().splitlines()
    lines.insert(1, "this is not json")
    path.write_text("\n".join(lines) + "\n")
    damaged = path.read_bytes()
    result = rig.ra("--resume", sid, "more")
    assert result.returncode == 1
    assert f"cannot read the session's record: {path}:2: not a record entry" in result.stderr
    assert path.read_bytes() == damaged and len(chat_requests(rig.server)) == 1
    shown = rig.ra("sessions", "show", sid)
    assert shown.returncode == 1 and f"{path}:2" in shown.stderr


def test_a_torn_last_line_is_skipped_and_the_session_goes_on(rig: Rig) -> None:
    enqueue_text(rig.server, "one")
    enqueue_text(rig.server, "two")
    sid = _session_of(rig.ra("hello").stderr)
    (path,) = rig.files()
    with path.open("a") as fh:
        fh.write('{"type": "user", "id": "torn", "content": "half')  # a process killed mid-write
    result = rig.ra("--resume", sid, "more")
    assert result.returncode == 0, result.stderr
    assert rig.sent() == [("user", "hello"), ("assistant", "one"), ("user", "more")]
    assert all(line.startswith("{") and line.endswith("}") for line in path.read_text().splitlines())


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` cannot be written, not even by root: ``chattr +i`` (as root), else mode 0500/0400."""
    if os.geteuid() == 0:
        done = subprocess.run(["chattr", "+i", str(path)], check=False, capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"running as root and chattr is not available: {done.stderr.decode().strip()}")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=False, capture_output=True)
        return
    mode = path.stat().st_mode
    path.chmod(stat.S_IRUSR | (stat.S_IXUSR if path.is_dir() else 0))
    try:
        yield
    finally:
        path.chmod(mode)


def test_a_read_only_sessions_directory_warns_once_and_the_run_goes_on(rig: Rig) -> None:
    rig.sessions.mkdir()
    enqueue_tools(rig.server, ("c1", "shell_command", {"command": "echo x"}))
    enqueue_text(rig.server, "done anyway")
    with read_only(rig.sessions):
        result = rig.ra("hello")
    assert result.returncode == 0 and result.stdout.strip() == "done anyway"
    assert result.stderr.count("no longer being recorded") == 1
    assert " · session " not in result.stderr and not rig.files()


def test_a_sessions_directory_that_cannot_be_made_warns_once_and_the_run_goes_on(rig: Rig, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    rig.env["RA_SESSIONS_DIR"] = str(blocker / "sessions")
    enqueue_text(rig.server, "done anyway")
    result = rig.ra("hello")
    assert result.returncode == 0 and result.stdout.strip() == "done anyway"
    assert result.stderr.count("no longer being recorded") == 1 and "cannot create" in result.stderr


def test_a_read_only_record_file_warns_once_and_the_run_goes_on(rig: Rig) -> None:
    enqueue_text(rig.server, "one")
    enqueue_tools(rig.server, ("c1", "shell_command", {"command": "echo x"}))
    enqueue_text(rig.server, "two")
    sid = _session_of(rig.ra("hello").stderr)
    (path,) = rig.files()
    before = path.read_bytes()
    with read_only(path):
        result = rig.ra("--resume", sid, "more")
    assert result.returncode == 0 and result.stdout.strip() == "two"
    assert result.stderr.count("no longer being recorded") == 1
    assert path.read_bytes() == before


def test_ra_sessions_lists_shows_and_deletes(rig: Rig, tmp_path: Path) -> None:
    enqueue_tools(rig.server, ("c1", "shell_command", {"command": "echo listed"}))
    enqueue_text(rig.server, "first \x1b]0;pwned\x07answer")
    enqueue_text(rig.server, "elsewhere")
    sid = _session_of(rig.ra("the \x1b[2J first task").stderr)
    other = tmp_path / "other"
    other.mkdir()
    elsewhere = _session_of(rig.ra("other task", cwd=other).stderr)

    listed = rig.ra("sessions")
    assert listed.returncode == 0 and sid in listed.stdout and elsewhere not in listed.stdout
    assert "\x1b" not in listed.stdout and "␛[2J first task" in listed.stdout
    every = rig.ra("sessions", "--all")
    assert sid in every.stdout and elsewhere in every.stdout and str(other) in every.stdout
    rows = jsonl(rig.ra("sessions", "--json").stdout)
    assert [r["id"] for r in rows] == [sid] and rows[0]["cwd"] == str(rig.project)
    assert rows[0]["title"] == "the \x1b[2J first task" and rows[0]["entries"] >= 5

    shown = rig.ra("sessions", "show", sid)
    assert shown.returncode == 0
    assert "> the ␛[2J first task" in shown.stdout and "shell_command echo listed" in shown.stdout
    assert "listed" in shown.stdout and "first ␛]0;pwned␇answer" in shown.stdout and "\x1b" not in shown.stdout
    data = json.loads(rig.ra("sessions", "show", sid, "--json").stdout)
    assert data["header"]["id"] == sid and data["entries"][0]["type"] == "user"

    deleted = rig.ra("sessions", "delete", sid)
    assert deleted.returncode == 0 and deleted.stdout.strip() == f"deleted session {sid}"
    assert "no sessions recorded" in rig.ra("sessions").stdout
    again = rig.ra("sessions", "delete", sid)
    assert again.returncode == 2 and f"no session '{sid}'" in again.stderr
    for args in (["sessions", "show"], ["sessions", "show", "../x"], ["sessions", "bogus"], ["sessions", "--nope"]):
        bad = rig.ra(*args)
        assert bad.returncode == 2 and bad.stderr.startswith("ra: error: ra sessions"), (args, bad.stderr)


def test_sessions_show_prints_labels_after_their_turns_and_those_of_other_branches(rig: Rig) -> None:
    enqueue_text(rig.server, "one")
    enqueue_text(rig.server, "two")
    sid = _session_of(rig.ra("first task").stderr)
    assert rig.ra("--resume", sid, "second task").returncode == 0
    (path,) = rig.sessions.glob(f"*/*_{sid}.jsonl")
    entries = rig.record(sid)
    first_user = next(e for e in entries if e["type"] == "user")
    first_answer = next(e for e in entries if e["type"] == "assistant")
    extra = [
        # A branch off the first message, with its own label, then labels on the shown branch
        # (the last line is on it, so a plain load shows that branch).
        {"type": "user", "id": "b0000001", "parent_id": first_user["id"], "content": "a branch"},
        {"type": "label", "id": "b0000002", "parent_id": "b0000001", "label": "on-the-branch"},
        {"type": "label", "id": "b0000003", "parent_id": first_answer["id"], "label": "after \x1b[2J one"},
        {"type": "label", "id": "b0000004", "parent_id": entries[-1]["id"], "label": "the end"},
    ]
    with path.open("a") as f:
        f.writelines(json.dumps(e) + "\n" for e in extra)
    shown = rig.ra("sessions", "show", sid)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "\x1b" not in text
    order = ["\none\n", "⚑ label after ␛[2J one", "> second task", "two", "⚑ label the end"]
    positions = [text.index(part) for part in order]
    assert positions == sorted(positions)
    assert "⚑ label on-the-branch (entry b0000001, on another branch)" in text
    assert "a branch" not in text


def test_resume_session_at_takes_a_label_or_an_entry_id(rig: Rig) -> None:
    enqueue_text(rig.server, "one")
    enqueue_text(rig.server, "two")
    enqueue_text(rig.server, "instead")
    enqueue_text(rig.server, "forked")
    sid = _session_of(rig.ra("first task").stderr)
    (path,) = rig.sessions.glob(f"*/*_{sid}.jsonl")
    answer = next(e for e in rig.record(sid) if e["type"] == "assistant")
    label = {"type": "label", "id": "c0000001", "parent_id": rig.record(sid)[-1]["id"], "label": "after one"}
    with path.open("a") as f:
        f.write(json.dumps(label) + "\n")
    assert rig.ra("--resume", sid, "second task").returncode == 0
    back = rig.ra("--resume", sid, "--resume-session-at", "after one", "other task")
    assert back.returncode == 0, back.stderr
    assert rig.sent() == [("user", "first task"), ("assistant", "one"), ("user", "other task")]
    fork = rig.ra("--resume", sid, "--resume-session-at", answer["id"], "--fork-session", "fork task")
    assert fork.returncode == 0, fork.stderr
    assert rig.sent() == [("user", "first task"), ("assistant", "one"), ("user", "fork task")]
    assert rig.record(_session_of(fork.stderr))[0]["parent_session"] == {"id": sid, "entry_id": answer["id"]}
    requests = len(chat_requests(rig.server))
    unknown = rig.ra("--resume", sid, "--resume-session-at", "nowhere", "task")
    assert unknown.returncode == 2 and "no entry 'nowhere'" in unknown.stderr
    assert "--resume-session-at nowhere" in unknown.stderr
    alone = rig.ra("--resume-session-at", "after one", "task")
    assert alone.returncode == 2 and "--resume-session-at names an entry" in alone.stderr
    assert len(chat_requests(rig.server)) == requests  # refused before any model call


def test_resuming_a_session_another_process_holds_is_a_usage_error(rig: Rig) -> None:
    import asyncio

    from ra.agent.store import FileSessionStore

    enqueue_text(rig.server, "one")
    enqueue_text(rig.server, "forked")
    enqueue_text(rig.server, "after")
    sid = _session_of(rig.ra("start").stderr)
    lease = asyncio.run(FileSessionStore(rig.sessions).acquire(sid))  # this test's process holds it
    try:
        for flags in (["--resume", sid], ["-c"]):
            refused = rig.ra(*flags, "spend it again")
            assert refused.returncode == 2, refused.stderr
            assert f"session {sid} is in use by another session (pid {os.getpid()})" in refused.stderr
            assert "--fork-session" in refused.stderr
        assert len(chat_requests(rig.server)) == 1  # nothing ran
        fork = rig.ra("--resume", sid, "--fork-session", "elsewhere")
        assert fork.returncode == 0, fork.stderr
    finally:
        lease.release()
    after = rig.ra("--resume", sid, "now it is free")
    assert after.returncode == 0, after.stderr

"""`ra replay RECORD`: the real command on records that real scripted sessions produced."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from ra.agent.store.format import FORMAT_VERSION
from ra.llm.testing import call, reply
from tests.support.records import run_session, write_record

from .support import clean_env, run_ra

SCRIPT = [
    call("shell", _id="c1", command="cat a.txt"),
    call("read_file", _id="c2", file_path="b.txt"),
    reply("read both"),
]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    (root / "b.txt").write_text("beta\n")
    return root


@pytest.fixture
def record(work: Path, tmp_path: Path) -> Path:
    turns = asyncio.run(run_session(work, SCRIPT, ["read the files"]))
    return write_record(tmp_path / "session.jsonl", turns, cwd=str(work))


def ra_replay(tmp_path: Path, work: Path, *args: str):
    return run_ra(["replay", *args], clean_env(tmp_path / "home"), cwd=work)


def test_an_unchanged_tree_matches_exit_0(tmp_path: Path, work: Path, record: Path) -> None:
    done = ra_replay(tmp_path, work, str(record))
    assert done.returncode == 0, done.stderr
    assert "3 of 3 step(s), 2 tool result(s) compared: everything matches" in done.stdout
    assert done.stderr == ""


def test_a_changed_file_exits_1_with_the_diff(tmp_path: Path, work: Path, record: Path) -> None:
    (work / "b.txt").write_text("BETA\n")
    done = ra_replay(tmp_path, work, str(record))
    assert done.returncode == 1, done.stderr
    assert "step 2 read_file c2: the result differs" in done.stdout
    assert "-1 | beta" in done.stdout and "+1 | BETA" in done.stdout
    as_json = ra_replay(tmp_path, work, str(record), "--json")
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["ok"] is False and report["steps"] == 3
    [diff] = report["differences"]
    assert (diff["kind"], diff["step"], diff["call_id"], diff["tool"]) == ("result", 2, "c2", "read_file")
    assert "+1 | BETA" in diff["diff"]


def test_options_ignore_stop_at_first_and_steps(tmp_path: Path, work: Path, record: Path) -> None:
    (work / "a.txt").write_text("ALPHA\n")
    (work / "b.txt").write_text("BETA\n")
    both = json.loads(ra_replay(tmp_path, work, str(record), "--json").stdout)
    assert [d["step"] for d in both["differences"]] == [1, 2]
    first = json.loads(ra_replay(tmp_path, work, str(record), "--json", "--stop-at-first").stdout)
    assert [d["step"] for d in first["differences"]] == [1] and "first difference" in first["stopped"]
    second = json.loads(ra_replay(tmp_path, work, str(record), "--json", "--steps", "2").stdout)
    assert [d["step"] for d in second["differences"]] == [2]
    masked = ra_replay(tmp_path, work, str(record), "--ignore", "(?i)alpha|beta")
    assert masked.returncode == 0, masked.stdout


def test_a_permission_rule_of_today_denies_a_recorded_call(tmp_path: Path, work: Path, record: Path) -> None:
    done = ra_replay(tmp_path, work, str(record), "--json", "--disallowed-tools", "Bash")
    assert done.returncode == 1
    [diff] = json.loads(done.stdout)["differences"]
    assert (diff["kind"], diff["tool"]) == ("denied", "shell")


def test_the_path_to_the_last_entry_is_replayed_not_a_dead_branch(tmp_path: Path, work: Path, record: Path) -> None:
    lines = record.read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    # A rewind: a branch from the first reply's results that asks for a.txt again. It is the last
    # entry, so the path to it (not the abandoned step 2) is what is replayed.
    results_1 = entries[3]
    branch = dict(entries[4], id="branch01", parent_id=results_1["id"])
    branch["tool_calls"] = [{"id": "c9", "name": "shell", "arguments": {"command": "cat a.txt"}}]
    branch.pop("message", None)
    answer = dict(entries[3], id="branch02", parent_id="branch01")
    answer["results"] = [dict(entries[3]["results"][0], tool_call_id="c9")]
    final = dict(entries[-1], id="branch03", parent_id="branch02")
    record.write_text("\n".join([*lines, json.dumps(branch), json.dumps(answer), json.dumps(final)]) + "\n")
    done = ra_replay(tmp_path, work, str(record), "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout
    assert report["steps"] == 3 and report["tool_calls"] == 2


def test_a_torn_last_line_is_skipped_with_a_notice(tmp_path: Path, work: Path, record: Path) -> None:
    text = record.read_text()
    record.write_text(text + '{"type": "assistant", "id": "x", "par')  # the crash cut the last write
    done = ra_replay(tmp_path, work, str(record))
    assert done.returncode == 0, done.stderr
    assert f"{record}:8: skipped a torn last line" in done.stderr


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda lines: [*lines[:2], "{not json", *lines[2:]], ":3: not valid JSON"),
        (lambda lines: [*lines[:2], "[1, 2]", *lines[2:]], ":3: expected a JSON object, got list"),
        (lambda lines: lines[1:], ":1: the first line is not a session header"),
        (
            lambda lines: [json.dumps({**json.loads(lines[0]), "version": FORMAT_VERSION + 1}), *lines[1:]],
            f"written in record format {FORMAT_VERSION + 1}",
        ),
        (
            lambda lines: [*lines[:-1], json.dumps({**json.loads(lines[-1]), "parent_id": "nope"})],
            ":7: parent_id 'nope' names no entry",
        ),
        (
            lambda lines: [*lines[:2], json.dumps({**json.loads(lines[2]), "tool_calls": "x"}), *lines[3:]],
            ":3.tool_calls: expected list",
        ),
        (
            lambda lines: [*lines[:2], json.dumps({"type": "user", "content": "x"}), *lines[2:]],
            ":3: an entry without an id",
        ),
        (lambda lines: [], "the record is empty"),
        # A hostile record: JSON nested past Python's recursion limit (it was a traceback) ...
        (lambda lines: [*lines[:2], "[" * 100_000 + "]" * 100_000, *lines[2:]], ":3: not valid JSON (nested too"),
        # ... and parent_id links that go round in a circle.
        (
            lambda lines: [
                lines[0],
                json.dumps({**json.loads(lines[1]), "parent_id": json.loads(lines[-1])["id"]}),
                *lines[2:],
            ],
            "the entries' parent_id links form a cycle",
        ),
    ],
)
def test_a_malformed_record_is_a_usage_error_naming_the_line(
    tmp_path: Path, work: Path, record: Path, mutate, message: str
) -> None:
    record.write_text("\n".join(mutate(record.read_text().splitlines())) + "\n")
    done = ra_replay(tmp_path, work, str(record))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr and done.stdout == ""


def test_usage_errors_exit_2(tmp_path: Path, work: Path, record: Path) -> None:
    missing = ra_replay(tmp_path, work, str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "no such record file" in missing.stderr
    bad_regex = ra_replay(tmp_path, work, str(record), "--ignore", "(")
    assert bad_regex.returncode == 2 and "not a valid regular expression" in bad_regex.stderr
    bad_mode = ra_replay(tmp_path, work, str(record), "--permission-mode", "yolo")
    assert bad_mode.returncode == 2 and "yolo" in bad_mode.stderr
    bad_steps = ra_replay(tmp_path, work, str(record), "--steps", "3-1")
    assert bad_steps.returncode == 2 and "A <= B" in bad_steps.stderr
    directory = ra_replay(tmp_path, work, str(tmp_path))
    assert directory.returncode == 2 and "is a directory" in directory.stderr
    header = json.loads(record.read_text().splitlines()[0])
    no_input = tmp_path / "empty.jsonl"
    no_input.write_text(json.dumps(header) + "\n")
    empty = ra_replay(tmp_path, work, str(no_input))
    assert empty.returncode == 2 and "no user input" in empty.stderr
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({**header, "profile": "mystery"}) + "\n")
    unknown = ra_replay(tmp_path, work, str(other))
    assert unknown.returncode == 2 and "--profile" in unknown.stderr


def test_replaying_elsewhere_says_where_the_record_was_made(tmp_path: Path, work: Path, record: Path) -> None:
    elsewhere = tmp_path / "copy"
    elsewhere.mkdir()
    for name in ("a.txt", "b.txt"):
        (elsewhere / name).write_text((work / name).read_text())
    done = ra_replay(tmp_path, work, str(record), "-C", str(elsewhere))
    assert f"the record was made in {work}; replaying in {elsewhere}" in done.stderr
    # The calls used relative paths: a copy of the starting tree replays them the same.
    assert done.returncode == 0, done.stdout


def test_a_record_replayed_in_plan_mode_runs_none_of_its_commands(tmp_path: Path, work: Path) -> None:
    # A record from elsewhere: its command would create a file (it could do worse).
    turns = asyncio.run(run_session(work, [call("shell", _id="x1", command="touch pwned"), reply("ok")], ["go"]))
    (work / "pwned").unlink()
    record = write_record(tmp_path / "foreign.jsonl", turns, cwd=str(work))
    done = ra_replay(tmp_path, work, str(record), "--permission-mode", "plan", "--json")
    assert done.returncode == 1
    assert not (work / "pwned").exists()
    [diff] = json.loads(done.stdout)["differences"]
    assert (diff["kind"], diff["tool"]) == ("denied", "shell")
    # Without the mode the same record does run it (this is what plan mode prevented).
    assert ra_replay(tmp_path, work, str(record)).returncode == 0 and (work / "pwned").exists()


def test_a_step_range_past_the_record_is_a_usage_error(tmp_path: Path, work: Path, record: Path) -> None:
    done = ra_replay(tmp_path, work, str(record), "--steps", "4-")
    assert done.returncode == 2 and "the record has 3 step(s)" in done.stderr


def test_the_config_files_hooks_are_todays(tmp_path: Path, work: Path, record: Path) -> None:
    home = tmp_path / "home"
    config_dir = home / ".config" / "ra"
    config_dir.mkdir(parents=True)
    (config_dir / "config.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "shell"\n'
        'hooks = [{ type = "command", command = "echo no shell today >&2; exit 2" }]\n'
    )
    done = run_ra(["replay", str(record), "--json"], clean_env(home), cwd=work)
    assert done.returncode == 1, done.stderr
    [diff] = json.loads(done.stdout)["differences"]
    assert (diff["kind"], diff["tool"]) == ("denied", "shell")
    assert "no shell today" in diff["now"]["content"]


def test_a_session_id_is_looked_up_in_the_store(tmp_path: Path, work: Path) -> None:
    """`ra replay ID` replays a session the store recorded (RA_SESSIONS_DIR, as `ra sessions` reads it)."""
    from ra.agent import Session
    from ra.agent.store import FileSessionStore
    from ra.env.local import LocalExecutionEnvironment
    from ra.llm.client import Client
    from ra.llm.testing import ScriptedAdapter
    from tests.support.records import config, profile

    sessions = tmp_path / "sessions"

    async def record() -> str:
        store = FileSessionStore(sessions)
        model = ScriptedAdapter(SCRIPT)
        session = Session(
            profile(), LocalExecutionEnvironment(work), Client(providers={"anthropic": model}), config(), store=store
        )
        await session.submit("read the files")
        await session.close()
        return session.id

    session_id = asyncio.run(record())
    env = {**clean_env(tmp_path / "home"), "RA_SESSIONS_DIR": str(sessions)}
    done = run_ra(["replay", session_id], env, cwd=work)
    assert done.returncode == 0, done.stderr
    assert "2 tool result(s) compared: everything matches" in done.stdout
    (work / "b.txt").write_text("BETA\n")
    changed = run_ra(["replay", session_id], env, cwd=work)
    assert changed.returncode == 1 and "step 2 read_file c2: the result differs" in changed.stdout
    unknown = run_ra(["replay", "no-such-session"], env, cwd=work)
    assert unknown.returncode == 2 and "no such record file or session: no-such-session" in unknown.stderr


def test_a_bad_sandbox_mode_is_refused_as_ra_refuses_it(tmp_path: Path, work: Path, record: Path) -> None:
    done = ra_replay(tmp_path, work, str(record), "--sandbox", "off")
    ra = run_ra(["--sandbox", "off", "--base-url", "http://127.0.0.1:9/v1", "go"], clean_env(tmp_path / "home"))
    assert done.returncode == ra.returncode == 2
    assert "unknown sandbox mode 'off': use one of read-only, workspace-write, danger-full-access" in done.stderr
    assert done.stderr == ra.stderr and done.stdout == ""


def test_user_namespaces_off_is_the_same_clear_error_as_for_ra(tmp_path: Path, work: Path) -> None:
    """A bwrap that fails as the real one does where unprivileged user namespaces are off (first
    on PATH): ``ra replay`` stops with ``ra``'s message and exit code, before any call runs."""
    turns = asyncio.run(run_session(work, [call("shell", _id="x1", command="touch ran"), reply("ok")], ["go"]))
    (work / "ran").unlink()
    record = write_record(tmp_path / "r.jsonl", turns, cwd=str(work))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the kernel does not "
        "allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    env = clean_env(tmp_path / "home", PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    replayed = run_ra(["replay", str(record), "--sandbox", "workspace-write"], env, cwd=work)
    ra = run_ra(["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--sandbox", "workspace-write", "go"], env)
    assert replayed.returncode == ra.returncode == 2, replayed.stderr
    assert replayed.stderr == ra.stderr
    assert "--sandbox workspace-write: bubblewrap cannot build the sandbox" in replayed.stderr
    assert "user.max_user_namespaces" in replayed.stderr
    assert not (work / "ran").exists()


def test_help_says_which_permissions_and_sandbox_apply_and_they_do(tmp_path: Path, work: Path, record: Path) -> None:
    """What ``ra replay --help`` says about permissions holds: with no mode and no rules every
    recorded call runs; with a mode, what would be asked is denied (nobody is asked)."""
    shown = ra_replay(tmp_path, work, "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    assert "--sandbox MODE" in text and "sandbox_mode in the config file" in text
    assert "every recorded call runs (mode bypass; deny rules and hooks still apply)" in text
    assert "a call that needs permission is denied and reported as 'denied'" in text
    assert "Without --sandbox or sandbox_mode the recorded commands run unconfined" in text
    assert ra_replay(tmp_path, work, str(record)).returncode == 0
    asked = ra_replay(tmp_path, work, str(record), "--permission-mode", "default", "--json")
    assert asked.returncode == 1
    [diff] = json.loads(asked.stdout)["differences"]  # the read ran; the command would be asked about
    assert (diff["kind"], diff["tool"]) == ("denied", "shell") and "no one to ask" in diff["now"]["content"]


def test_a_settings_files_mode_applies_and_what_ra_does_not_use_is_said(
    tmp_path: Path, work: Path, record: Path
) -> None:
    """``--settings``: its defaultMode denies the recorded command, and its keys that ra does not
    use are named on stderr, as ``ra`` names them (they were dropped silently)."""
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"model": "opus", "permissions": {"defaultMode": "plan"}}))
    done = ra_replay(tmp_path, work, str(record), "--settings", str(settings), "--json")
    assert done.returncode == 1, done.stderr
    [diff] = json.loads(done.stdout)["differences"]
    assert (diff["kind"], diff["tool"]) == ("denied", "shell")
    assert f"ra replay: settings file {settings}: not used by ra (ignored): model" in done.stderr


def test_a_session_with_a_subagent_replays_the_subagent_from_its_record(tmp_path: Path, work: Path) -> None:
    """The subagent's steps are answered from its own record in the store and its tools run here;
    a changed file shows in exactly its step, named with the agent; a missing record is exit 1."""
    from ra.agent.store import FileSessionStore
    from tests.support.records import CHILD, TASK, parent_script, record_tree

    sessions = tmp_path / "sessions"
    (work / "note.txt").write_text("the note\n")
    store = FileSessionStore(sessions)
    session_id = asyncio.run(record_tree(work, store, {"delegate": parent_script(), TASK: list(CHILD)}))
    (work / "copy.txt").unlink()
    env = {**clean_env(tmp_path / "home"), "RA_SESSIONS_DIR": str(sessions)}
    done = run_ra(["replay", session_id], env, cwd=work)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 of 3 step(s), 1 subagent(s) with 3 step(s), 4 tool result(s) compared: everything matches" in done.stdout
    assert (work / "copy.txt").read_text() == "copied\n"

    (work / "copy.txt").unlink()
    (work / "note.txt").write_text("another note\n")
    [path] = [p for p in sessions.rglob("*.jsonl") if session_id in p.name]  # the record as a file, too
    changed = run_ra(["replay", str(path), "--json"], env, cwd=work)
    assert changed.returncode == 1, changed.stderr
    [diff] = json.loads(changed.stdout)["differences"]
    [agent] = diff["subagent"]
    assert (diff["kind"], diff["step"], diff["tool"], agent["step"]) == ("result", 1, "shell", 1)
    assert agent["agent_id"].startswith("agent-") and "+another note" in diff["diff"]

    [child] = [info for info in asyncio.run(store.list()) if info.spawned_by == session_id]
    assert asyncio.run(store.delete(child.id))
    (work / "copy.txt").unlink()
    missing = run_ra(["replay", session_id], env, cwd=work)
    assert missing.returncode == 1
    assert "step 1 spawn_agent sp1: no record of a subagent spawned by call sp1" in missing.stdout
    assert not (work / "copy.txt").exists()


def test_a_record_file_finds_its_subagents_records_beside_it(tmp_path: Path, work: Path) -> None:
    """Records copied out of the store into a folder of fixtures: the parent's file is replayed
    and its subagent is answered from the record beside it, with an empty session store; a file
    there that is no record, or a record no session spawned, changes nothing."""
    import shutil

    from ra.agent.store import FileSessionStore
    from tests.support.records import CHILD, TASK, parent_script, record_tree

    sessions = tmp_path / "sessions"
    (work / "note.txt").write_text("the note\n")
    store = FileSessionStore(sessions)
    session_id = asyncio.run(record_tree(work, store, {"delegate": parent_script(), TASK: list(CHILD)}))
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    for path in sessions.rglob("*.jsonl"):
        shutil.copy(path, fixtures / path.name)
    (fixtures / "notes.jsonl").write_text("not a record\n")
    [parent] = [p for p in fixtures.iterdir() if session_id in p.name]
    (work / "copy.txt").unlink()
    env = {**clean_env(tmp_path / "home"), "RA_SESSIONS_DIR": str(tmp_path / "empty")}
    done = run_ra(["replay", str(parent)], env, cwd=work)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 subagent(s) with 3 step(s)" in done.stdout and "everything matches" in done.stdout
    assert (work / "copy.txt").read_text() == "copied\n"

    for path in fixtures.iterdir():  # without the subagent's record beside it: reported, no model call
        if path != parent:
            path.unlink()
    (work / "copy.txt").unlink()
    missing = run_ra(["replay", str(parent)], env, cwd=work)
    assert missing.returncode == 1
    assert "no record of a subagent spawned by call sp1" in missing.stdout

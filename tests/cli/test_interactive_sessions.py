"""Interactive ``ra`` and recorded sessions, through a pseudo-terminal: ``/fork``, ``/resume``,
``/compact``, and ``ra --resume`` without an id (pick one from a list)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from ra.agent.session import Session
from tests.cli.support import chat_requests, clean_env, enqueue_text, jsonl, ra_command, run_ra
from tests.support.replay import ReplayServer

PROMPT = "ra> "
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


class Rig:
    def __init__(self, tmp_path: Path, server: ReplayServer) -> None:
        self.server = server
        self.project = tmp_path / "project"
        self.project.mkdir()
        self.sessions = tmp_path / "sessions"
        self.env = clean_env(
            tmp_path, RA_SESSIONS_DIR=str(self.sessions), NO_COLOR="1", RA_HISTORY_FILE=str(tmp_path / "history")
        )
        self.base = ["--base-url", f"{server.base_url}/v1", "--model", "m"]
        self.children: list[pexpect.spawn] = []

    def spawn(self, *args: str) -> pexpect.spawn:
        command = ra_command()
        child = pexpect.spawn(
            command[0],
            [*command[1:], *self.base, *args],
            env=self.env,
            cwd=str(self.project),
            encoding="utf-8",
            dimensions=(40, 200),
            timeout=20,
        )
        self.children.append(child)
        return child

    def one_shot(self, task: str) -> str:
        """Run ``task`` as a recorded one-shot run; its session id."""
        result = run_ra([*self.base, task], self.env, cwd=self.project)
        assert result.returncode == 0, result.stderr
        return re.findall(r" · session (\S+)", result.stderr)[-1]

    def record(self, sid: str) -> list[dict[str, Any]]:
        (path,) = self.sessions.glob(f"*/*_{sid}.jsonl")
        return jsonl(path.read_text())

    def sent(self, request: int = -1) -> list[tuple[str, Any]]:
        return [(m["role"], m.get("content")) for m in chat_requests(self.server)[request]["messages"][1:]]


@pytest.fixture
def rig(tmp_path: Path, replay_server: ReplayServer) -> Iterator[Rig]:
    rig = Rig(tmp_path, replay_server)
    yield rig
    for child in rig.children:
        if child.isalive():
            child.terminate(force=True)


def _completion(text: str) -> dict[str, Any]:
    """A non-streamed Chat Completions answer."""
    return {
        "id": "chatcmpl-summary",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 300, "completion_tokens": 30, "total_tokens": 330},
    }


def _leave(child: pexpect.spawn) -> None:
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_fork_goes_on_in_a_copy_and_the_original_stays(rig: Rig) -> None:
    enqueue_text(rig.server, "Hi.")
    enqueue_text(rig.server, "In the fork.")
    child = rig.spawn()
    child.expect_exact(PROMPT)
    child.sendline("/fork")
    child.expect("nothing to fork yet")
    child.expect_exact(PROMPT)
    child.sendline("hello")
    child.expect("Hi.")
    child.expect(f"session ({UUID})")
    original = child.match.group(1)
    child.expect_exact(PROMPT)
    child.sendline("/fork")
    child.expect(f"forked session {original} into ({UUID})")
    fork = child.match.group(1)
    child.expect_exact(PROMPT)
    before = rig.record(original)
    child.sendline("next")
    child.expect("In the fork.")
    child.expect(f"session {fork}")
    child.expect_exact(PROMPT)
    _leave(child)
    assert fork != original and rig.record(original) == before
    assert rig.sent() == [("user", "hello"), ("assistant", "Hi."), ("user", "next")]
    entries = rig.record(fork)
    assert entries[0]["parent_session"]["id"] == original
    assert [e["content"] for e in entries if e["type"] in ("user", "assistant")] == [
        "hello",
        "Hi.",
        "next",
        "In the fork.",
    ]


def test_resume_switches_to_another_session_and_lists_them(rig: Rig) -> None:
    enqueue_text(rig.server, "Noted: 42.")
    earlier = rig.one_shot("remember 42")
    enqueue_text(rig.server, "Something else.")
    enqueue_text(rig.server, "It was 42.")
    child = rig.spawn()
    child.expect_exact(PROMPT)
    child.sendline("another topic")
    child.expect("Something else.")
    child.expect(f"session ({UUID})")
    current = child.match.group(1)
    child.expect_exact(PROMPT)
    child.sendline("/resume")
    child.expect("sessions in .* \\(newest first; /resume ID goes on with one\\):")
    child.expect(f"{current} .* another topic  \\(this one\\)")
    child.expect(f"{earlier} .* remember 42")
    child.expect_exact(PROMPT)
    child.sendline("/resume no-such-session")
    child.expect("/resume no-such-session: no session 'no-such-session'")
    child.expect_exact(PROMPT)
    child.sendline(f"/resume {current}")
    child.expect(f"already in session {current}")
    child.expect_exact(PROMPT)
    child.sendline(f"/resume {earlier}")
    child.expect(f"resumed session {earlier} \\(2 turns, 1 model calls so far\\)")
    child.expect_exact(PROMPT)
    child.sendline("what was the number?")
    child.expect("It was 42.")
    child.expect(f"session {earlier}")
    child.expect_exact(PROMPT)
    _leave(child)
    assert rig.sent() == [("user", "remember 42"), ("assistant", "Noted: 42."), ("user", "what was the number?")]
    users = [e["content"] for e in rig.record(earlier) if e["type"] == "user"]
    assert users == ["remember 42", "what was the number?"]


def test_resume_without_an_id_picks_from_a_list_on_a_terminal(rig: Rig) -> None:
    enqueue_text(rig.server, "First answer.")
    older = rig.one_shot("the older task")
    enqueue_text(rig.server, "Second answer.")
    rig.one_shot("the newer task")
    enqueue_text(rig.server, "Back in the older one.")
    child = rig.spawn("--resume")
    child.expect("sessions in .* \\(newest first\\):")
    child.expect(" 1  \\S+ .* the newer task")
    child.expect(f" 2  {older} .* the older task")
    child.expect_exact("resume which? [1-2, Enter for 1, q to quit] ")
    child.sendline("7")
    child.expect("'7' is not one of the numbers above")
    child.expect_exact("resume which?")
    child.sendline("2")
    child.expect(f"session {older}: resumed")
    child.expect_exact(PROMPT)
    child.sendline("go on")
    child.expect("Back in the older one.")
    child.expect_exact(PROMPT)
    _leave(child)
    assert rig.sent() == [("user", "the older task"), ("assistant", "First answer."), ("user", "go on")]


def test_resume_picker_q_leaves_without_running_anything(rig: Rig) -> None:
    enqueue_text(rig.server, "First answer.")
    rig.one_shot("a task")
    child = rig.spawn("--resume")
    child.expect_exact("resume which?")
    child.sendline("q")
    child.expect("no session chosen")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130 and len(chat_requests(rig.server)) == 1


def test_session_commands_are_in_help_and_refused_without_persistence(rig: Rig) -> None:
    child = rig.spawn("--no-session-persistence")
    child.expect_exact(PROMPT)
    child.sendline("/help")
    child.expect(r"/resume \[ID\]")
    child.expect("/fork")
    child.expect(r"/compact \[TEXT\]")
    child.expect_exact(PROMPT)
    child.sendline("/fork")
    child.expect("sessions are not recorded in this run")
    child.expect_exact(PROMPT)
    _leave(child)
    assert chat_requests(rig.server) == []


@pytest.mark.skipif(not hasattr(Session, "compact"), reason="Session.compact comes with the compaction branch")
def test_compact_summarises_with_the_users_instructions_and_keeps_the_conversation(rig: Rig) -> None:
    enqueue_text(rig.server, "The value is 7.")
    enqueue_text(rig.server, "Doubled, it is 14.")
    summary = "GOAL: track the value. PROGRESS: it is 7, doubled 14."
    rig.server.enqueue(200, _completion(summary))  # the summary call is not streamed
    enqueue_text(rig.server, "Still 7.")
    child = rig.spawn()
    child.expect_exact(PROMPT)
    child.sendline("/compact")
    child.expect("nothing to compact yet")
    child.expect_exact(PROMPT)
    for line, answer in (("what is the value?", "The value is 7."), ("double it", "Doubled, it is 14.")):
        child.sendline(line)
        child.expect(answer)
        child.expect_exact(PROMPT)
    child.sendline("/compact keep the number exactly")
    child.expect("compacted the conversation: about [0-9,]+ → [0-9,]+ tokens")
    child.expect_exact(PROMPT)
    child.sendline("/fork")  # right after /compact: the fork starts from the compacted conversation
    child.expect(f"forked session {UUID} into ({UUID})")
    sid = child.match.group(1)
    child.expect_exact(PROMPT)
    child.sendline("and now?")
    child.expect("Still 7.")
    child.expect(f"session {sid}")
    child.expect_exact(PROMPT)
    _leave(child)
    requests = chat_requests(rig.server)
    assert len(requests) == 4
    assert "keep the number exactly" in str(requests[2]["messages"])  # the instructions reach the summary call
    last = str(requests[3]["messages"])
    assert "GOAL: track the value" in last and "what is the value?" in last  # the user's words stay verbatim
    assert any(e["type"] == "compaction" for e in rig.record(sid))


def test_label_names_this_point_and_sessions_show_lists_it(rig: Rig) -> None:
    enqueue_text(rig.server, "Hi.")
    enqueue_text(rig.server, "Later.")
    child = rig.spawn()
    child.expect_exact(PROMPT)
    child.sendline("/label too-early")
    child.expect("/label: .*nothing is recorded yet")
    child.expect_exact(PROMPT)
    child.sendline("hello")
    child.expect("Hi.")
    child.expect(f"session ({UUID})")
    sid = child.match.group(1)
    child.expect_exact(PROMPT)
    child.sendline("/label")
    child.expect("usage: /label NAME")
    child.expect_exact(PROMPT)
    child.sendline("/label deadbeef")
    child.expect("/label: .*shape of an entry id")
    child.expect_exact(PROMPT)
    child.sendline("/label before refactor")
    child.expect("labelled this point of session")
    child.expect_exact(PROMPT)
    child.sendline("next")
    child.expect("Later.")
    child.expect_exact(PROMPT)
    _leave(child)
    entries = rig.record(sid)
    labels = [e for e in entries if e["type"] == "label"]
    assert [e["label"] for e in labels] == ["before refactor"]
    assert len(chat_requests(rig.server)) == 2  # the commands reached no model
    named = next(e for e in entries if e["id"] == labels[0]["parent_id"])
    assert named["type"] == "input_end"  # the last entry when /label was typed
    shown = run_ra(["sessions", "show", sid], rig.env, cwd=rig.project)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert text.index("Hi.") < text.index("⚑ label before refactor") < text.index("> next")

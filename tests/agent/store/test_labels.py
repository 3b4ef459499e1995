"""Labels and custom entries (Session.label, Session.record_custom), read back and resumed at."""

from __future__ import annotations

import itertools
import json
import math
import uuid
from pathlib import Path
from typing import Any

import pytest

from ra.agent.controls.chain import Control
from ra.agent.errors import SessionClosedError, SessionError
from ra.agent.store import FileSessionStore, MemorySessionStore, SessionNotFoundError, load_record
from ra.agent.store.record import SessionRecord
from ra.llm.testing import call, reply

from .support import Rig


def entries_of(store: FileSessionStore, sid: str) -> list[dict[str, Any]]:
    path = store.path_of(sid)
    assert path is not None
    return [json.loads(line) for line in path.read_text().splitlines()]


def texts(request: Any) -> list[str]:
    return [m.text for m in request.messages[1:]]


async def test_a_label_between_inputs_names_the_last_entry_and_is_on_disk_at_once(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one"), reply("two")])
    session = rig.session(store)
    await session.submit("first")
    last = entries_of(store, session.id)[-1]
    await session.label("before-refactor")
    written = entries_of(store, session.id)  # written before any later input or close
    assert written[-1]["type"] == "label" and written[-1]["label"] == "before-refactor"
    assert written[-1]["parent_id"] == last["id"]
    await session.submit("second")
    await session.close()
    entries = entries_of(store, session.id)
    # The chain goes on through the label: the next turn follows it.
    assert entries[len(written)]["parent_id"] == written[-1]["id"]
    record = await load_record(store, session.id)
    assert record.labels == {"before-refactor": last["id"]}
    assert [t.content for t in record.turns] == ["first", "one", "second", "two"]


async def test_resume_at_a_label_rewinds_to_the_entry_it_names(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one"), reply("two"), reply("three"), reply("four")])
    session = rig.session(store)
    await session.submit("first")
    await session.label("checkpoint")
    await session.submit("second")
    await session.close()
    again = await rig.open(store, resume=session.id, resume_at="checkpoint")
    await again.submit("instead")
    await again.close()
    assert texts(rig.model.requests[-1]) == ["first", "one", "instead"]
    record = await load_record(store, session.id)
    assert [t.content for t in record.turns] == ["first", "one", "instead", "three"]
    # A fork at a label names the entry as its fork point.
    fork = await rig.open(store, resume=session.id, resume_at="checkpoint", fork_session=True)
    await fork.submit("forked")
    await fork.close()
    assert texts(rig.model.requests[-1]) == ["first", "one", "forked"]
    forked = await load_record(store, fork.id)
    assert forked.parent_session == {"id": session.id, "entry_id": record.labels["checkpoint"]}


async def test_the_latest_label_of_a_name_wins_and_an_unknown_name_is_not_found(tmp_path: Path) -> None:
    store = MemorySessionStore()
    rig = Rig([reply("one"), reply("two")])
    session = rig.session(store)
    await session.submit("first")
    await session.label("here")
    await session.submit("second")
    await session.label("here")
    await session.close()
    record = await load_record(store, session.id)
    first, second = [e for e in record.entries if e["type"] == "label"]
    assert first["parent_id"] != second["parent_id"]
    assert record.labels == {"here": second["parent_id"]}
    with pytest.raises(SessionNotFoundError, match="no entry 'nowhere' \\(and no label"):
        await rig.open(store, resume=session.id, resume_at="nowhere")


async def test_a_label_during_an_input_names_the_turn_last_added_when_it_was_called(tmp_path: Path) -> None:
    """Queued while the user's turn is in the history but not yet written: it follows that turn,
    not the assistant turn written in the same batch after it."""
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("answer")])
    holder: dict[str, Any] = {}

    class LabelBeforeTheCall(Control):
        async def before_step(self, run: Any) -> None:
            await holder["session"].label("asked")

    session = rig.session(store)
    session._controls.add(LabelBeforeTheCall())
    holder["session"] = session
    await session.submit("question")
    await session.close()
    entries = entries_of(store, session.id)
    by_type = [e["type"] for e in entries]
    assert by_type[:4] == ["session", "user", "label", "assistant"]
    user, label, assistant = entries[1], entries[2], entries[3]
    assert label["parent_id"] == user["id"] and assistant["parent_id"] == label["id"]
    record = await load_record(store, session.id)
    assert record.labels == {"asked": user["id"]}
    assert [t.content for t in record.turns] == ["question", "answer"]


async def test_label_refuses_without_a_store_before_anything_and_after_close(tmp_path: Path) -> None:
    rig = Rig([reply("one")])
    bare = rig.session()
    with pytest.raises(SessionError, match="pass store="):
        await bare.label("x")
    with pytest.raises(SessionError, match="pass store="):
        await bare.record_custom("k", 1)
    store = FileSessionStore(tmp_path)
    session = rig.session(store)
    with pytest.raises(SessionError, match="nothing is recorded yet"):
        await session.label("too-early")
    await session.submit("hi")
    await session.close()
    with pytest.raises(SessionClosedError):
        await session.label("late")
    assert "label" not in [e["type"] for e in entries_of(store, session.id)]


@pytest.mark.parametrize("name", ["", "  ", " pad", "two\nlines", "tab\there", "deadbeef", "x" * 201, 7])
async def test_names_that_cannot_be_labels_are_refused_and_nothing_is_written(name: Any) -> None:
    store = MemorySessionStore()
    rig = Rig([reply("one")])
    session = rig.session(store)
    await session.submit("hi")
    before = list(await store.load(session.id) or [])
    with pytest.raises((ValueError, TypeError)):
        await session.label(name)
    await session.close()
    assert "label" not in [e.get("type") for e in await store.load(session.id) or []]
    assert len(before) > 1


def test_an_entry_id_wins_over_a_label_of_the_same_name() -> None:
    """A hand-written record whose label is shaped like an entry id cannot redirect resume_at."""
    head = {"type": "session", "version": 1, "id": "s"}
    a = {"type": "user", "id": "aaaaaaaa", "parent_id": None, "content": "a"}
    b = {"type": "user", "id": "bbbbbbbb", "parent_id": "aaaaaaaa", "content": "b"}
    lab = {"type": "label", "id": "cccccccc", "parent_id": "bbbbbbbb", "label": "aaaaaaaa"}
    record = SessionRecord.from_entries([head, a, b, lab], "aaaaaaaa")
    assert record.leaf_id == "aaaaaaaa"
    # A label naming no entry (broken by hand) is not a label.
    broken = {"type": "label", "id": "dddddddd", "parent_id": "ffffffff", "label": "gone"}
    dangling = SessionRecord.from_entries([head, a, {**broken, "parent_id": "aaaaaaaa", "label": "ok"}])
    assert dangling.labels == {"ok": "aaaaaaaa"}
    assert "gone" not in SessionRecord.from_entries([head, a]).labels


async def test_custom_entries_are_recorded_never_sent_and_read_back(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one"), reply("two")])
    session = rig.session(store)
    await session.record_custom("ticket", {"id": 42, "tags": ["a", "b"], "note": "SECRET-NOT-FOR-MODEL"})
    await session.submit("first")
    await session.record_custom("ticket", {"id": 43})
    await session.submit("second")
    await session.close()
    for request in rig.model.requests:
        assert "SECRET-NOT-FOR-MODEL" not in json.dumps([m.text for m in request.messages])
    record = await load_record(store, session.id)
    assert [(c["key"], c["data"]) for c in record.custom] == [
        ("ticket", {"id": 42, "tags": ["a", "b"], "note": "SECRET-NOT-FOR-MODEL"}),
        ("ticket", {"id": 43}),
    ]
    assert [t.content for t in record.turns] == ["first", "one", "second", "two"]
    # The custom entry written before anything else follows the header and starts the chain.
    entries = entries_of(store, session.id)
    assert entries[1]["type"] == "custom" and entries[1]["parent_id"] is None
    assert entries[2]["parent_id"] == entries[1]["id"]
    # Resumed, the history is the same: custom entries add no turn.
    again = await rig.open(store, resume=session.id)
    assert [t.content for t in again.history] == ["first", "one", "second", "two"]
    await again.close()


@pytest.mark.parametrize("data", [object(), {1, 2}, math.nan, {"x": math.inf}, b"bytes"])
async def test_data_that_is_not_json_is_refused_when_given(data: Any) -> None:
    store = MemorySessionStore()
    rig = Rig([reply("one")])
    session = rig.session(store)
    await session.submit("hi")
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        await session.record_custom("k", data)
    with pytest.raises((TypeError, ValueError)):
        await session.record_custom("", 1)
    await session.submit("again")  # the session goes on, and nothing was queued
    await session.close()
    assert "custom" not in [e.get("type") for e in await store.load(session.id) or []]


async def test_custom_data_nested_too_deeply_is_refused_and_recording_goes_on() -> None:
    """Data nested deep enough to break the encoder at flush time would stop the session's
    recording; it is refused when given instead."""
    store = MemorySessionStore()
    rig = Rig([reply("one"), reply("two")])
    session = rig.session(store)
    await session.submit("hi")
    deep: Any = 1
    for _ in range(101):
        deep = [deep]
    with pytest.raises(ValueError, match="nested more than 100 levels"):
        await session.record_custom("deep", deep)
    await session.record_custom("ok", deep[0])  # 100 levels are fine
    await session.submit("again")
    await session.close()
    record = await load_record(store, session.id)
    assert [c["key"] for c in record.custom] == ["ok"]
    assert [t.content for t in record.turns] == ["hi", "one", "again", "two"]


async def test_secrets_in_labels_and_custom_data_are_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-" + uuid.uuid4().hex
    monkeypatch.setenv("LABEL_TEST_API_KEY", secret)
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one")])
    session = rig.session(store)
    await session.submit("hi")
    await session.label(f"key-{secret}")
    await session.record_custom(f"k-{secret}", {secret: [secret, {"deep": f"x{secret}y"}]})
    await session.close()
    path = store.path_of(session.id)
    assert path is not None
    text = path.read_text()
    assert secret not in text and "[REDACTED]" in text
    assert len(entries_of(store, session.id)) >= 5


async def test_a_tool_call_step_keeps_labels_in_order_with_the_turns(tmp_path: Path) -> None:
    """Labels written between inputs of a session with tool steps leave the record one chain."""
    store = FileSessionStore(tmp_path)
    rig = Rig([call("echo", text="x"), reply("done"), reply("more")])
    session = rig.session(store)
    await session.submit("go")
    await session.label("after-tools")
    await session.submit("again")
    await session.close()
    entries = entries_of(store, session.id)
    for before, after in itertools.pairwise(entries[1:]):
        assert after["parent_id"] == before["id"]
    record = await load_record(store, session.id)
    assert record.leaves() == [entries[-1]["id"]]

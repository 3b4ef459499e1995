"""``QueryOptions``' session options (the Claude Agent SDK's names): every query is recorded to a
store, and ``resume`` / ``continue_conversation`` / ``fork_session`` / ``resume_session_at`` /
``session_id`` open a recorded one, end to end through ``ra.query()`` and ``AgentClient`` with a
scripted model and a file store in a temporary directory."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from ra.agent import GenericProfile, SessionConfig
from ra.agent.errors import SessionError
from ra.agent.store import FileSessionStore, SessionNotFoundError, load_record
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, Step, StepLike, reply
from ra.llm.types import ToolCall, Usage
from ra.sdk import AgentClient, QueryOptions, ResultMessage, SystemMessage, query

from ..agent.support import FAST_RETRY, FakeEnv, default_tools

USAGE = Usage(input_tokens=100_000, output_tokens=50_000)
PRICE = ModelPrice(1.0, 2.0)  # USD per million tokens: a call with USAGE costs $0.20


class Rig:
    """One scripted model shared by several queries, as a host that resumes across runs has."""

    def __init__(self, script: list[StepLike] | None = None, price: ModelPrice | None = None) -> None:
        self.model = ScriptedAdapter(script or [])
        self.client = Client(providers={"scripted": self.model})
        self.profile = GenericProfile("scripted", "test-model", default_tools(), system_prompt="You are a test agent.")
        self.env = FakeEnv()
        self.price = price or ModelPrice.free()

    def options(self, **fields: Any) -> QueryOptions:
        config = fields.pop("config", None) or SessionConfig(enable_loop_detection=False)
        config.retry_policy = FAST_RETRY
        config.prices.setdefault("test-model", self.price)
        return QueryOptions(profile=self.profile, client=self.client, env=self.env, config=config, **fields)

    async def run(self, prompt: str, **fields: Any) -> list[Any]:
        async def collect() -> list[Any]:
            return [m async for m in query(prompt, options=self.options(**fields))]

        return await asyncio.wait_for(collect(), 10)

    def texts(self, request: int = -1) -> list[str]:
        """What the model was sent (system prompt left out) in one of its requests."""
        return [m.text for m in self.model.requests[request].messages if m.role != "system"]


def _ids(messages: list[Any]) -> set[str]:
    return {m.session_id for m in messages}


def _result(messages: list[Any]) -> ResultMessage:
    assert isinstance(messages[-1], ResultMessage)
    return messages[-1]


def tool_step(n: int) -> Step:
    return Step(tool_calls=[ToolCall(f"call-{n}", "echo", {"text": f"t{n}"})], usage=USAGE)


async def test_a_query_is_recorded_and_a_resume_sees_its_history(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("Hello."), reply("Still here.")])
    first = await rig.run("hi", session_store=store)
    init = first[0]
    assert isinstance(init, SystemMessage) and init.subtype == "init"
    sid = init.session_id
    assert _ids(first) == {sid} and _result(first).to_json()["session_id"] == sid
    assert [t.content for t in (await load_record(store, sid)).turns] == ["hi", "Hello."]

    again = await rig.run("are you there?", session_store=store, resume=sid)
    assert _ids(again) == {sid}  # the same session goes on
    assert rig.texts() == ["hi", "Hello.", "are you there?"]
    assert _result(again).result == "Still here."
    record = await load_record(store, sid)
    assert [t.content for t in record.turns] == ["hi", "Hello.", "are you there?", "Still here."]


async def test_continue_conversation_picks_the_newest_session_of_the_directory(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("A."), reply("B."), reply("B again.")])
    older = _result(await rig.run("first task", session_store=store)).session_id
    newer = _result(await rig.run("second task", session_store=store)).session_id
    assert older != newer
    went_on = await rig.run("go on", session_store=store, continue_conversation=True)
    assert _ids(went_on) == {newer}
    assert rig.texts() == ["second task", "B.", "go on"]


async def test_continue_conversation_with_nothing_recorded_starts_a_new_session(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("fresh")])
    messages = await rig.run("hello", session_store=store, continue_conversation=True)
    assert rig.texts() == ["hello"] and (await store.load(_result(messages).session_id)) is not None


async def test_fork_session_gets_a_new_id_and_leaves_the_parent_record_alone(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("Hello."), reply("Forked.")])
    parent = _result(await rig.run("hi", session_store=store)).session_id
    before = await store.load(parent)

    fork = await rig.run("try another way", session_store=store, resume=parent, fork_session=True)
    child = _result(fork).session_id
    assert child != parent and _ids(fork) == {child}
    assert rig.texts() == ["hi", "Hello.", "try another way"]
    assert await store.load(parent) == before
    record = await load_record(store, child)
    assert record.parent_session is not None and record.parent_session["id"] == parent
    assert [t.content for t in record.turns] == ["hi", "Hello.", "try another way", "Forked."]


async def test_resume_session_at_starts_from_an_earlier_entry(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one"), reply("two"), reply("branch")])
    sid = _result(await rig.run("first", session_store=store)).session_id
    await rig.run("second", session_store=store, resume=sid)
    record = await load_record(store, sid)
    at = record.turn_ids[1]  # the answer "one"
    await rig.run("instead", session_store=store, resume=sid, resume_session_at=at)
    assert rig.texts() == ["first", "one", "instead"]


async def test_session_id_names_the_new_session_and_one_in_use_is_refused(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("ok")])
    messages = await rig.run("hi", session_store=store, session_id="my-run-1")
    assert _ids(messages) == {"my-run-1"} and await store.load("my-run-1") is not None
    with pytest.raises(SessionError, match="my-run-1 already exists"):
        await rig.run("again", session_store=store, session_id="my-run-1")
    assert len(rig.model.requests) == 1


async def test_a_budget_holds_across_a_resume(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(1), tool_step(2)], price=PRICE)
    first = await rig.run("work", session_store=store, config=SessionConfig(max_turns_per_input=2))
    sid = first[-1].session_id
    assert _result(first).total_cost_usd == pytest.approx(0.4)

    rig.model.add(*(tool_step(n) for n in range(3, 20)))
    resumed = await rig.run("more", session_store=store, resume=sid, config=SessionConfig(max_budget_usd=0.5))
    # $0.40 spent before the resume: one more call ($0.20) crosses $0.50 and the budget stops it.
    result = _result(resumed)
    assert result.subtype == "error_max_budget_usd" and len(rig.model.requests) == 3
    assert result.total_cost_usd == pytest.approx(0.2)  # this query's spend, as the SDK reports it
    assert (await load_record(store, sid)).total_cost_usd == pytest.approx(0.6)


async def test_by_default_queries_are_recorded_to_the_default_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RA_SESSIONS_DIR", str(tmp_path / "state"))
    rig = Rig([reply("ok"), reply("again")])
    sid = _result(await rig.run("hi")).session_id
    assert list((tmp_path / "state").glob(f"*/*_{sid}.jsonl"))
    await rig.run("more", resume=sid)
    assert rig.texts() == ["hi", "ok", "more"]


async def test_persist_session_false_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RA_SESSIONS_DIR", str(tmp_path / "state"))
    rig = Rig([reply("ok")])
    messages = await rig.run("hi", persist_session=False)
    assert _result(messages).result == "ok"
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"persist_session": False, "resume": "abc"}, "persist_session=False records nothing"),
        ({"persist_session": False, "continue_conversation": True}, "persist_session=False records nothing"),
        ({"persist_session": False, "session_store": "store"}, "cannot be combined with session_store"),
        ({"fork_session": True}, "fork_session=True forks the session named by resume"),
        ({"resume_session_at": "e1"}, "resume_at= names an entry"),
        ({"resume": "a", "continue_conversation": True}, "not both"),
        ({"resume": "../../etc/passwd"}, "invalid session id"),
        ({"session_id": "a/b"}, "invalid session id"),
    ],
)
async def test_contradictory_or_unsafe_options_are_refused_before_anything_runs(
    tmp_path: Path, fields: dict[str, Any], error: str
) -> None:
    store = FileSessionStore(tmp_path)
    if fields.get("session_store") == "store" or fields.get("persist_session", True):
        fields["session_store"] = store
    rig = Rig([reply("never")])
    with pytest.raises(ValueError, match=error):
        await rig.run("hi", **fields)
    assert rig.model.requests == [] and os.listdir(tmp_path) == []


async def test_resuming_an_unknown_session_is_a_clear_error(tmp_path: Path) -> None:
    rig = Rig([reply("never")])
    with pytest.raises(SessionNotFoundError, match="no session 'nope'"):
        await rig.run("hi", session_store=FileSessionStore(tmp_path), resume="nope")
    assert rig.model.requests == []


async def test_a_client_given_a_session_refuses_options_about_another(tmp_path: Path) -> None:
    rig = Rig([reply("never")])
    from ra.agent import Session

    session = Session(rig.profile, rig.env, rig.client)
    for fields in ({"resume": "x"}, {"fork_session": True}, {"persist_session": False}, {"session_id": "y"}):
        client = AgentClient(rig.options(**fields), session=session)
        with pytest.raises(ValueError, match="uses that session as it is"):
            await client.connect()
    await session.close()


async def test_a_two_way_client_resumes_and_goes_on_recording(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one"), reply("two"), reply("three")])
    sid = _result(await rig.run("first", session_store=store)).session_id
    async with AgentClient(rig.options(session_store=store, resume=sid)) as client:
        assert client.session.id == sid
        for prompt in ("second", "third"):
            await client.query(prompt)
            messages = [m async for m in client.receive_response()]
            assert _ids(messages) == {sid}
    record = await load_record(store, sid)
    assert [t.content for t in record.turns] == ["first", "one", "second", "two", "third", "three"]


async def test_resume_session_at_takes_a_label(tmp_path: Path) -> None:
    import json

    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one"), reply("two"), reply("branch")])
    sid = _result(await rig.run("first", session_store=store)).session_id
    record = await load_record(store, sid)
    path = store.path_of(sid)
    assert path is not None
    with path.open("a") as f:
        f.write(json.dumps({"type": "label", "id": "d0000001", "parent_id": record.leaf_id, "label": "v1"}) + "\n")
    await rig.run("second", session_store=store, resume=sid)
    await rig.run("instead", session_store=store, resume=sid, resume_session_at="v1")
    assert rig.texts() == ["first", "one", "instead"]
    with pytest.raises(SessionNotFoundError, match="no entry 'v2'"):
        await rig.run("x", session_store=store, resume=sid, resume_session_at="v2")


async def test_connecting_to_a_session_another_client_holds_is_refused(tmp_path: Path) -> None:
    from ra.agent.store import SessionInUseError

    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one"), reply("two"), reply("three")])
    sid = _result(await rig.run("first", session_store=store)).session_id
    async with AgentClient(rig.options(session_store=store, resume=sid)) as holder:
        second = AgentClient(rig.options(session_store=FileSessionStore(tmp_path), resume=sid))
        with pytest.raises(SessionInUseError, match=f"session {sid} is in use"):
            await second.connect()
        forked = await rig.run("elsewhere", session_store=store, resume=sid, fork_session=True)
        assert _result(forked).session_id != sid
        await holder.query("second")
        assert _ids([m async for m in holder.receive_response()]) == {sid}
    again = await rig.run("free again", session_store=store, resume=sid)
    assert _result(again).session_id == sid

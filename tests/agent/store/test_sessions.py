"""Recorded sessions, resumed, forked and rewound, on a scripted model with real files."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from ra.agent import StopReason
from ra.agent.errors import SessionError
from ra.agent.history import AssistantTurn, ToolResultsTurn, UserTurn
from ra.agent.store import FileSessionStore, MemorySessionStore, SessionNotFoundError, load_record
from ra.llm.pricing import ModelPrice
from ra.llm.testing import Step, call, reply
from ra.llm.types import Request, ToolCall, Usage
from ra.tools.registry import ToolContext, ToolRegistry

from ..support import default_tools
from .support import Rig, warnings
from .test_files import make_immutable

USAGE = Usage(input_tokens=100_000, output_tokens=50_000)
PRICE = ModelPrice(1.0, 2.0)  # USD per million: a call with USAGE costs $0.20


def tool_step(n: int, text: str = "x") -> Step:
    return Step(tool_calls=[ToolCall(f"call-{n}", "echo", {"text": text})], usage=USAGE)


def entries_of(store: FileSessionStore, sid: str) -> list[dict]:
    path = store.path_of(sid)
    assert path is not None
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- recording --------------------------------------------------------------------------------------------


async def test_a_session_is_recorded_step_by_step_as_a_chain(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(1, "hi"), reply("done", usage=USAGE)], price=PRICE)
    session = rig.session(store)
    seen: list[int] = []

    async def slow_echo(args: dict, ctx: ToolContext) -> str:
        # While the tool runs, the assistant turn that asked for it is already on disk.
        seen.append(len(entries_of(store, session.id)))
        return "echo"

    rig.profile.tool_registry.add("echo", "echo", None, slow_echo)
    result = await session.submit("hello")
    assert result.stop_reason is StopReason.COMPLETED
    entries = entries_of(store, session.id)
    assert [e["type"] for e in entries] == ["session", "user", "assistant", "tool_results", "assistant", "input_end"]
    assert seen == [3]  # header, user, and the call: on disk before its tool runs
    head = entries[0]
    assert (head["id"], head["cwd"]) == (session.id, "/work/project")
    assert (head["model"], head["provider"]) == ("test-model", "scripted")
    for before, after in itertools.pairwise(entries[1:]):
        assert after["parent_id"] == before["id"]
    first, second = entries[2], entries[4]
    assert first["model"] == "test-model" and first["provider"] == "scripted"
    assert first["cost_usd"] == pytest.approx(0.2) and first["total_cost_usd"] == pytest.approx(0.2)
    assert second["total_cost_usd"] == pytest.approx(0.4)
    assert entries[-1]["reason"] == "completed" and entries[-1]["total_cost_usd"] == pytest.approx(0.4)
    await session.close()


async def test_a_closed_session_leaves_no_file_open(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one")])
    before = len(os.listdir("/proc/self/fd"))
    session = rig.session(store)
    await session.submit("go")
    assert len(os.listdir("/proc/self/fd")) == before + 2  # the record (kept for appends) and its lease
    await session.close()
    assert len(os.listdir("/proc/self/fd")) == before


async def test_without_a_store_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RA_SESSIONS_DIR", str(tmp_path))
    rig = Rig([reply("done")])
    session = rig.session()
    await session.submit("hello")
    await session.close()
    assert session.store is None and os.listdir(tmp_path) == []


async def test_a_model_change_writes_a_config_entry(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one"), reply("two")])
    session = rig.session(store)
    session.config.prices["other-model"] = ModelPrice.free()
    await session.submit("first")
    session.set_model("other-model")
    await session.submit("second")
    await session.close()
    kinds = [(e["type"], e.get("model")) for e in entries_of(store, session.id)]
    assert ("config", "other-model") in kinds
    assert kinds.index(("config", "other-model")) < kinds.index(("assistant", "other-model"))
    record = await load_record(store, session.id)
    assert record.model == "other-model"


async def test_secrets_a_tool_prints_never_reach_the_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-live-" + uuid.uuid4().hex
    monkeypatch.setenv("FOO_API_KEY", secret)
    tools = default_tools()
    tools.add("leak", "Print the key.", None, lambda args, ctx: f"key={os.environ['FOO_API_KEY']}")
    store = FileSessionStore(tmp_path)
    # The model repeats it too, in its text and in a tool call's arguments.
    echo_it = Step(tool_calls=[ToolCall("c9", "echo", {"text": secret})])
    rig = Rig([call("leak"), reply(f"the key is {secret}"), echo_it, reply("ok")], tools=tools)
    session = rig.session(store)
    await session.submit(f"use {secret}")
    await session.submit("again")
    await session.close()
    path = store.path_of(session.id)
    assert path is not None
    text = path.read_text()
    assert secret not in text
    assert text.count("[REDACTED]") >= 5
    # The live session still had the real value (redaction is of the record only).
    assert any(secret in str(getattr(t, "results", "")) for t in session.history)


# -- resume ----------------------------------------------------------------------------------------------


async def test_a_resumed_session_sends_what_the_live_one_would_have(tmp_path: Path) -> None:
    failing = Step(tool_calls=[ToolCall("c2", "boom", {})])
    script: list[Any] = [tool_step(1, "a"), reply("first done"), failing, reply("second done")]
    live = Rig(list(script))
    session = live.session()
    await session.submit("one")
    await session.submit("two")
    await session.close()

    store = FileSessionStore(tmp_path)
    rig = Rig(list(script))
    first = rig.session(store)
    await first.submit("one")
    await first.close()
    resumed = await rig.open(store, resume=first.id)
    assert resumed.id == first.id and resumed.turn_count == 2 and len(resumed.history) == len(first.history)
    await resumed.submit("two")
    await resumed.close()
    assert len(rig.model.requests) == len(live.model.requests) == 4
    for mine, theirs in zip(rig.model.requests, live.model.requests, strict=True):
        assert mine.messages == theirs.messages
    # Appended to the same record, continuing the chain.
    record = await load_record(store, first.id)
    assert [type(t).__name__ for t in record.turns] == [type(t).__name__ for t in session.history]
    assert record.turn_count == 4


async def test_a_budget_holds_across_a_resume(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(1), tool_step(2)], price=PRICE)
    first = rig.session(store, max_budget_usd=1.0, max_turns_per_input=2)
    result = await first.submit("work")
    assert result.stop_reason is StopReason.TURN_LIMIT and first.total_cost_usd == pytest.approx(0.4)
    await first.close()

    rig.model.add(*(tool_step(n) for n in range(3, 20)))
    resumed = await rig.open(store, rig.config(max_budget_usd=0.5), resume=first.id)
    assert resumed.total_cost_usd == pytest.approx(0.4)
    result = await resumed.submit("more")
    # 0.4 spent before: one more call ($0.20) crosses $0.50, then the budget stops the input.
    assert result.stop_reason is StopReason.BUDGET_LIMIT
    assert resumed.total_cost_usd == pytest.approx(0.6) and len(rig.model.requests) == 3
    await resumed.close()
    assert (await load_record(store, first.id)).total_cost_usd == pytest.approx(0.6)


async def test_calls_without_a_price_stay_unpriced_so_a_budget_set_on_resume_refuses(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("free for all")])
    first = rig.session(store)
    first.config.prices.clear()  # the model has no price: its call is recorded with cost_usd null
    await first.submit("go")
    await first.close()
    assert entries_of(store, first.id)[2]["cost_usd"] is None
    rig.model.add(reply("never"))
    resumed = await rig.open(store, rig.config(max_budget_usd=5.0), resume=first.id)
    assert resumed.unpriced_calls == 1
    result = await resumed.submit("more")
    assert result.stop_reason is StopReason.ERROR and "no known price" in str(result.error)
    assert len(rig.model.requests) == 1
    await resumed.close()


async def test_limits_come_from_the_new_config_and_turn_counts_from_the_record(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(1), reply("ok")])
    first = rig.session(store, max_turns=2)
    await first.submit("work")
    await first.close()
    rig.model.add(tool_step(2), tool_step(3), tool_step(4), reply("never"))
    resumed = await rig.open(store, rig.config(max_turns=4), resume=first.id)
    assert resumed.turn_count == 2 and resumed.usage == first.usage
    result = await resumed.submit("more")
    assert result.stop_reason is StopReason.TURN_LIMIT and resumed.turn_count == 4
    await resumed.close()


async def test_resuming_runs_no_tool_again(tmp_path: Path) -> None:
    runs: list[str] = []
    tools = ToolRegistry()
    tools.add("mark", "Mark.", None, lambda args, ctx: runs.append("ran") or "marked")
    store = FileSessionStore(tmp_path)
    rig = Rig([call("mark"), reply("done"), reply("again")], tools=tools)
    first = rig.session(store)
    await first.submit("go")
    await first.close()
    resumed = await rig.open(store, resume=first.id)
    await resumed.submit("and?")
    await resumed.close()
    assert runs == ["ran"]


async def test_unknown_sessions_and_entries_are_session_not_found(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("done")])
    with pytest.raises(SessionNotFoundError, match="no session 'missing'"):
        await rig.open(store, resume="missing")
    first = rig.session(store)
    await first.submit("go")
    await first.close()
    with pytest.raises(SessionNotFoundError, match="no entry 'deadbeef'"):
        await rig.open(store, resume=first.id, resume_at="deadbeef")
    assert issubclass(SessionNotFoundError, SessionError)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"resume": "a", "continue_conversation": True}, ValueError, "not both"),
        ({"fork_session": True}, ValueError, "fork_session=True forks"),
        ({"resume_at": "abc"}, ValueError, "resume_at="),
        ({"resume": "a", "session_id": "b"}, ValueError, "needs fork_session=True"),
        ({"resume": "../etc/passwd"}, ValueError, "invalid session id"),
        ({"session_id": "a/b"}, ValueError, "invalid session id"),
        ({"resume": "a", "store": None}, ValueError, "needs the store"),
        ({"resume": "a", "history": object()}, TypeError, "history="),
    ],
)
async def test_open_refuses_contradictory_arguments(tmp_path: Path, kwargs: dict, error: type, match: str) -> None:
    store = kwargs.pop("store", FileSessionStore(tmp_path))
    with pytest.raises(error, match=match):
        await Rig().open(store, **kwargs)


async def test_a_new_session_id_that_exists_is_refused(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("done")])
    first = await rig.open(store, session_id="my-session")
    assert first.id == "my-session"
    await first.submit("go")
    await first.close()
    with pytest.raises(SessionError, match="already exists"):
        await rig.open(store, session_id="my-session")
    with pytest.raises(SessionError, match="already exists"):
        await rig.open(store, resume="my-session", fork_session=True, session_id="my-session")
    assert len(entries_of(store, "my-session")) == 4


async def test_an_interrupted_tool_round_is_recorded_and_resumes_valid(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([Step(tool_calls=[ToolCall("slow-1", "nap", {"seconds": 30})]), reply("after")])
    session = rig.session(store)
    task = asyncio.ensure_future(session.submit("sleep"))
    for _ in range(500):
        if session.history and isinstance(session.history[-1], AssistantTurn):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert session.interrupt()
    result = await asyncio.wait_for(task, 10)
    assert result.stop_reason is StopReason.INTERRUPTED
    await session.close()
    kinds = [e["type"] for e in entries_of(store, session.id)]
    assert kinds == ["session", "user", "assistant", "input_end", "tool_results"]
    resumed = await rig.open(store, resume=session.id)
    await resumed.submit("go on")
    await resumed.close()
    record = await load_record(store, session.id)
    results = [t for t in record.turns if isinstance(t, ToolResultsTurn)]
    assert len(results) == 1 and results[0].results[0].tool_call_id == "slow-1"


async def test_continue_picks_the_newest_session_of_this_directory(tmp_path: Path) -> None:
    store = MemorySessionStore()
    rig = Rig([reply("a"), reply("b"), reply("c")])
    older = rig.session(store)
    await older.submit("older")
    await older.close()
    await asyncio.sleep(0.01)
    newer = rig.session(store)
    await newer.submit("newer")
    await newer.close()
    continued = await rig.open(store, continue_conversation=True)
    assert continued.id == newer.id and isinstance(continued.history[0], UserTurn)
    assert continued.history[0].content == "newer"
    await continued.close()
    # Nothing recorded for this directory yet: a new session.
    other = Rig()
    other.env.working_directory = lambda: "/somewhere/else"  # type: ignore[method-assign]
    fresh = await other.open(store, continue_conversation=True)
    assert fresh.id not in (older.id, newer.id) and len(fresh.history) == 0


# -- fork and rewind ----------------------------------------------------------------------------------------------


async def test_fork_writes_a_new_record_naming_its_parent_and_sharing_history(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one"), reply("two"), reply("forked"), reply("parent goes on")])
    parent = rig.session(store)
    await parent.submit("first")
    await parent.submit("second")
    await parent.close()
    record = await load_record(store, parent.id)
    at = record.turn_ids[1]  # the answer "one"

    fork = await rig.open(store, resume=parent.id, fork_session=True, resume_at=at, session_id="the-fork")
    assert fork.id == "the-fork" and [getattr(t, "content", "") for t in fork.history] == ["first", "one"]
    await fork.submit("in the fork")
    await fork.close()
    fork_entries = entries_of(store, "the-fork")
    assert fork_entries[0]["parent_session"] == {"id": parent.id, "entry_id": at}
    assert store.path_of("the-fork") != store.path_of(parent.id)
    forked = await load_record(store, "the-fork")
    assert [getattr(t, "content", "") for t in forked.turns] == ["first", "one", "in the fork", "forked"]
    assert forked.turn_ids[:2] == record.turn_ids[:2]
    # The parent's record is untouched and can go on by itself.
    assert (await load_record(store, parent.id)).turn_ids == record.turn_ids
    infos = {info.id: info for info in await store.list("/work/project")}
    assert infos["the-fork"].parent_id == parent.id


async def test_rewind_in_the_same_record_starts_a_branch_and_loading_picks_it(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one"), reply("two"), reply("retold")])
    session = rig.session(store)
    await session.submit("first")
    await session.submit("second")
    await session.close()
    record = await load_record(store, session.id)
    at = record.turn_ids[1]
    rewound = await rig.open(store, resume=session.id, resume_at=at)
    assert rewound.id == session.id and len(rewound.history) == 2
    await rewound.submit("second, differently")
    await rewound.close()
    assert [m.text for m in rig.model.requests[-1].messages[1:]] == ["first", "one", "second, differently"]
    again = await load_record(store, session.id)
    assert [getattr(t, "content", "") for t in again.turns] == ["first", "one", "second, differently", "retold"]
    assert len(again.leaves()) == 2
    old = again.with_leaf(record.leaf_id)
    assert [getattr(t, "content", "") for t in old.turns] == ["first", "one", "second", "two"]


# -- crashes and failing disks -------------------------------------------------------------------------------------


async def test_resume_after_a_kill_mid_step_has_every_completed_step_once(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(1), tool_step(2), tool_step(3), reply("done")])
    session = rig.session(store)
    await session.submit("work")
    await session.close()
    path = store.path_of(session.id)
    assert path is not None
    lines = path.read_text().splitlines(keepends=True)
    # Killed while step 3's tools ran: its assistant entry is on disk, half of its results line too.
    cut = next(i for i, line in enumerate(lines) if '"call-3"' in line and '"tool_results"' in line)
    path.write_text("".join(lines[:cut]) + lines[cut][: len(lines[cut]) // 2])

    rig.model.add(reply("resumed"))
    resumed = await rig.open(store, resume=session.id)
    turns = list(resumed.history)
    calls = [c.id for t in turns if isinstance(t, AssistantTurn) for c in t.tool_calls]
    assert calls == ["call-1", "call-2", "call-3"]
    last = turns[-1]
    assert isinstance(last, ToolResultsTurn) and last.results[0].is_error
    assert "Interrupted" in str(last.results[0].content)
    await resumed.submit("go on")
    await resumed.close()
    final = await load_record(store, session.id)
    ids = [t.results[0].tool_call_id for t in final.turns if isinstance(t, ToolResultsTurn)]
    assert ids == ["call-1", "call-2", "call-3"]


async def test_a_store_that_fails_gives_one_warning_and_the_session_completes() -> None:
    class Full(MemorySessionStore):
        calls = 0

        async def append(self, session_id, entries):  # type: ignore[no-untyped-def]
            self.calls += 1
            if self.calls > 1:
                raise OSError(28, "No space left on device")
            await super().append(session_id, entries)

    store = Full()
    rig = Rig([tool_step(1), tool_step(2), reply("done")])
    session = rig.session(store)
    seen = warnings(session)
    result = await session.submit("work")
    await session.close()
    assert result.stop_reason is StopReason.COMPLETED and result.text == "done"
    assert [w.code for w in seen] == ["session_not_persisted"]
    assert "No space left" in seen[0].message
    assert store.calls == 2  # it stopped trying
    assert len(await store.load(session.id) or []) == 1  # the header written before stays


@pytest.fixture
def tiny_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


async def test_a_full_disk_gives_one_warning_and_leaves_a_valid_record(tiny_disk: Path) -> None:
    store = FileSessionStore(tiny_disk)
    big = "y" * 8_000
    rig = Rig([Step(tool_calls=[ToolCall(f"c{n}", "echo", {"text": big})]) for n in range(6)] + [reply("done")])
    session = rig.session(store)
    seen = warnings(session)
    result = await session.submit("fill the disk")
    await session.close()
    assert result.stop_reason is StopReason.COMPLETED
    assert [w.code for w in seen] == ["session_not_persisted"] and "disk is full" in seen[0].message
    record = await load_record(store, session.id)  # what was written loads, no torn batch
    assert 0 < record.turn_count < 7


async def test_a_read_only_record_gives_one_warning_and_the_session_completes(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one"), tool_step(1), reply("two")])
    session = rig.session(store)
    await session.submit("first")
    path = store.path_of(session.id)
    assert path is not None
    if not make_immutable(path, True):
        pytest.skip("chattr is not available")
    try:
        seen = warnings(session)
        result = await session.submit("second")
        await session.close()
    finally:
        make_immutable(path, False)
    assert result.stop_reason is StopReason.COMPLETED
    assert [w.code for w in seen] == ["session_not_persisted"]


# -- another provider -------------------------------------------------------------------------------------------------


async def test_resuming_on_another_provider_drops_provider_data_with_one_warning(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    signed = Step(
        text="checking",
        reasoning="secret thoughts",
        reasoning_signature="sig-123",
        tool_calls=[ToolCall("c1", "echo", {"text": "x"}, provider_data={"item_id": "fc_9"})],
    )
    first_rig = Rig([signed, reply("done")], provider="alpha")
    first = first_rig.session(store)
    await first.submit("go")
    await first.close()

    other = Rig([reply("on beta")], provider="beta")
    resumed = await other.open(store, resume=first.id)
    seen = warnings(resumed)
    await resumed.submit("continue")
    await resumed.close()
    assert [w.code for w in seen] == ["provider_change"]
    assert "alpha" in seen[0].message and "beta" in seen[0].message
    assert seen[0].details["dropped"] == {
        "thinking blocks": 1,
        "signed or encrypted reasoning": 1,
        "provider data on tool calls": 1,
    }
    sent = other.model.requests[0]
    assert all(p.thinking is None for m in sent.messages for p in m.content)
    assert all(p.tool_call is None or p.tool_call.provider_data is None for m in sent.messages for p in m.content)
    assert [m.text for m in sent.messages if m.role == "user"] == ["go", "continue"]
    # The record keeps what was dropped, and says the provider changed.
    entries = entries_of(store, first.id)
    assert "sig-123" in json.dumps(entries)
    assert any(e["type"] == "config" and e["provider"] == "beta" for e in entries)


async def test_the_same_provider_carries_thinking_signatures(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([Step(text="hm", reasoning="t", reasoning_signature="sig-1"), reply("b")])
    first = rig.session(store)
    await first.submit("go")
    await first.close()
    resumed = await rig.open(store, resume=first.id)
    seen = warnings(resumed)
    await resumed.submit("more")
    await resumed.close()
    assert seen == []
    sent = rig.model.requests[-1].messages
    assert any(p.thinking is not None and p.thinking.signature == "sig-1" for m in sent for p in m.content)


# -- subagents --------------------------------------------------------------------------------------------------------


async def test_a_recorded_sessions_subagent_is_recorded_and_names_its_parent(tmp_path: Path) -> None:
    from ra.agent.subagents.tools import subagent_tools

    def route(request: Request) -> Step:
        first = next(m.text for m in request.messages if m.role == "user")
        if first == "look around":
            return reply("child answer")
        results = [p.tool_result for m in request.messages for p in m.content if p.tool_result is not None]
        if not results:
            return call("spawn_agent", task="look around")
        if len(results) == 1:
            agent = json.loads(str(results[0].content))["agent_id"]
            return call("wait", agent_id=agent)
        return reply("parent done")

    store = FileSessionStore(tmp_path)
    rig = Rig()
    rig.model.default = route
    for tool in subagent_tools():
        rig.profile.tool_registry.register(tool)
    parent = rig.session(store)
    result = await parent.submit("delegate")
    await parent.close()
    assert result.text == "parent done"
    records = [await load_record(store, info.id) for info in await store.list()]
    children = [r for r in records if r.agent_id is not None]
    assert len(children) == 1 and len(records) == 2
    child = children[0]
    assert child.header["spawned_by"] == parent.id and child.cwd == parent.execution_env.working_directory()
    assert [getattr(t, "content", "") for t in child.turns] == ["look around", "child answer"]
    # --continue never picks a subagent's record.
    continued = await rig.open(store, continue_conversation=True)
    assert continued.id == parent.id
    await continued.close()


# -- a real process killed mid-step ----------------------------------------------------------------------------------

_CHILD = """
import asyncio, sys
from ra.agent import GenericProfile, Session, SessionConfig
from ra.agent.store import FileSessionStore
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, Step
from ra.llm.types import ToolCall
from ra.tools.registry import ToolRegistry

async def main(root):
    tools = ToolRegistry()
    tools.add("echo", "Echo.", None, lambda args, ctx: "echo " + args["text"])
    async def nap(args, ctx):
        await asyncio.sleep(60)
        return "woke"
    tools.add("nap", "Sleep.", None, nap)
    steps = [Step(tool_calls=[ToolCall(f"call-{n}", "echo", {"text": str(n)})]) for n in range(1, 4)]
    steps.append(Step(tool_calls=[ToolCall("call-4", "nap", {})]))
    model = ScriptedAdapter(steps, name="scripted")
    profile = GenericProfile("scripted", "test-model", tools, provider="scripted", include_environment=False)
    config = SessionConfig(prices={"test-model": ModelPrice.free()})
    session = Session(profile, _Env(), Client(providers={"scripted": model}), config,
                      store=FileSessionStore(root), session_id="killed")
    await session.submit("work")

class _Env:
    def working_directory(self): return "/work/project"
    def platform(self): return "linux"
    def os_version(self): return "Linux"
    async def terminate_all(self): return None

asyncio.run(main(sys.argv[1]))
"""


def run_and_kill(root: Path) -> list[dict]:
    """Run the child until its record holds the 4th call (its tool then sleeps), then SIGKILL it."""
    import signal
    import sys
    import time

    # The PYTHONPATH the tests run with wins (it may point at another tree).
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src"), **os.environ}
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(root)], env=env)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            files = list(root.glob("*/*_killed.jsonl"))
            if files and '"call-4"' in files[0].read_text():
                break
            assert proc.poll() is None, "the child ended before it was killed"
            time.sleep(0.02)
        else:
            raise AssertionError("the child never recorded its 4th step")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    (record,) = list(root.glob("*/*_killed.jsonl"))
    return [json.loads(line) for line in record.read_text().splitlines()]


async def test_a_process_killed_mid_step_resumes_with_every_completed_step_once(tmp_path: Path) -> None:
    before = await asyncio.to_thread(run_and_kill, tmp_path)
    assert [e["type"] for e in before] == ["session", "user", *["assistant", "tool_results"] * 3, "assistant"]
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("finished")])
    resumed = await rig.open(store, resume="killed")
    await resumed.submit("go on")
    await resumed.close()
    record = await load_record(store, "killed")
    answered = [r.tool_call_id for t in record.turns if isinstance(t, ToolResultsTurn) for r in t.results]
    assert answered == ["call-1", "call-2", "call-3", "call-4"]  # each once; call-4 as interrupted
    last_result = [t for t in record.turns if isinstance(t, ToolResultsTurn)][-1].results[0]
    assert last_result.is_error and "Interrupted" in str(last_result.content)
    sent = rig.model.requests[0].messages
    assert [m.text for m in sent if m.role == "user"] == ["work", "go on"]
    assert sum(1 for m in sent for p in m.content if p.tool_result is not None) == 4


async def test_session_start_hooks_see_how_the_session_started(tmp_path: Path) -> None:
    from ra.agent.hooks import HookEvent, Hooks

    store = FileSessionStore(tmp_path)
    rig = Rig([reply("a"), reply("b"), reply("c")])
    sources: list[str] = []
    hooks = Hooks()
    hooks.on(HookEvent.SESSION_START, lambda event: sources.append(event.source))
    first = await rig.open(store, hooks=hooks)
    await first.submit("one")
    await first.close()
    resumed = await rig.open(store, resume=first.id, hooks=hooks)
    await resumed.submit("two")
    await resumed.close()
    fork = await rig.open(store, resume=first.id, fork_session=True, hooks=hooks)
    await fork.submit("three")
    await fork.close()
    assert sources == ["startup", "resume", "fork"]

"""Attacks on what users believe the store guarantees: budgets across rewinds and forks, records
edited by hand, symlinks and shared directories, hostile JSON, and secrets in replay output."""

from __future__ import annotations

import gc
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ra.agent import Session, StopReason
from ra.agent.store import FileSessionStore, MemorySessionStore, StoreError, load_record
from ra.agent.store.record import SessionRecord
from ra.llm.pricing import ModelPrice
from ra.llm.testing import Step, reply
from ra.llm.types import ToolCall, Usage

from ..support import FakeEnv
from .support import Rig, warnings


@pytest.fixture(autouse=True)
def _collect() -> Iterator[None]:
    """Stores left to the garbage collector close their files here, not in a later test that
    counts open files."""
    yield
    gc.collect()


USAGE = Usage(input_tokens=100_000, output_tokens=50_000)
PRICE = ModelPrice(1.0, 2.0)  # USD per million: a call with USAGE costs $0.20


def tool_step(n: int) -> Step:
    return Step(tool_calls=[ToolCall(f"call-{n}", "echo", {"text": "x"})], usage=USAGE)


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_lines(path: Path, entries: list[dict]) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


# -- budget ------------------------------------------------------------------------------------------------------


async def spent_session(store: FileSessionStore, rig: Rig) -> str:
    """A session that spent $0.60 in three priced calls (budget $1, stopped by the turn limit)."""
    first = rig.session(store, max_budget_usd=1.0, max_turns_per_input=3)
    result = await first.submit("work")
    assert result.stop_reason is StopReason.TURN_LIMIT and first.total_cost_usd == pytest.approx(0.6)
    await first.close()
    return first.id


async def test_a_rewind_to_an_early_entry_does_not_forget_the_money_spent_after_it(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(n) for n in range(1, 30)], price=PRICE)
    sid = await spent_session(store, rig)
    record = await load_record(store, sid)
    early = record.turn_ids[1]  # the first answer: $0.20 spent on the path up to it
    rewound = await rig.open(store, rig.config(max_budget_usd=1.0), resume=sid, resume_at=early)
    # The $0.40 of the abandoned branch was really spent: the budget counts it.
    assert rewound.total_cost_usd == pytest.approx(0.6)
    before = len(rig.model.requests)
    result = await rewound.submit("again")
    assert result.stop_reason is StopReason.BUDGET_LIMIT
    assert len(rig.model.requests) - before == 2  # $0.60 + 2 x $0.20 crosses $1.00
    await rewound.close()
    # Rewinding again to the same point does not reset it either.
    again = await rig.open(store, rig.config(max_budget_usd=1.0), resume=sid, resume_at=early)
    assert again.total_cost_usd == pytest.approx(1.0)
    await again.close()


async def test_a_fork_at_an_early_entry_inherits_all_the_parents_spend(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(n) for n in range(1, 30)], price=PRICE)
    sid = await spent_session(store, rig)
    record = await load_record(store, sid)
    fork = await rig.open(
        store, rig.config(max_budget_usd=1.0), resume=sid, fork_session=True, resume_at=record.turn_ids[1]
    )
    assert fork.total_cost_usd == pytest.approx(0.6)
    await fork.close()


async def test_a_rewind_keeps_the_abandoned_branchs_unpriced_calls(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(n) for n in range(1, 30)], price=PRICE)
    sid = await spent_session(store, rig)
    path = store.path_of(sid)
    assert path is not None
    entries = lines_of(path)
    last_answer = [e for e in entries if e["type"] == "assistant"][-1]
    last_answer["cost_usd"] = None  # a call whose price was unknown, on the later part
    write_lines(path, entries)
    record = await load_record(store, sid)
    rewound = await rig.open(store, rig.config(max_budget_usd=5.0), resume=sid, resume_at=record.turn_ids[1])
    assert rewound.unpriced_calls == 1
    result = await rewound.submit("more")
    assert result.stop_reason is StopReason.ERROR and "no known price" in str(result.error)
    await rewound.close()


@pytest.mark.parametrize(
    "edit",
    [-5.0, "0", None, 0.0, float("nan")],
    ids=["negative", "string", "null", "lowered-last", "nan"],
)
async def test_a_hand_edited_last_total_does_not_lower_the_spend_below_the_entries_costs(
    tmp_path: Path, edit: object
) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(n) for n in range(1, 30)], price=PRICE)
    sid = await spent_session(store, rig)
    path = store.path_of(sid)
    assert path is not None
    entries = lines_of(path)
    for entry in entries:
        if "total_cost_usd" in entry:
            entry["total_cost_usd"] = edit
    # json.dumps writes NaN for nan (Python's reader accepts it): what a careless script leaves.
    write_lines(path, entries)
    record = await load_record(store, sid)
    assert record.total_cost_usd == pytest.approx(0.6)
    resumed = await rig.open(store, rig.config(max_budget_usd=0.7), resume=sid)
    assert resumed.total_cost_usd == pytest.approx(0.6)
    result = await resumed.submit("more")
    assert result.stop_reason is StopReason.BUDGET_LIMIT
    await resumed.close()


@pytest.mark.parametrize("value", ["Infinity", "1e400"])
async def test_an_infinite_total_is_not_a_number_and_the_record_stays_writable(tmp_path: Path, value: str) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(n) for n in range(1, 30)], price=PRICE)
    sid = await spent_session(store, rig)
    path = store.path_of(sid)
    assert path is not None
    text, count = re.subn(r'"total_cost_usd":[0-9.e-]+', f'"total_cost_usd":{value}', path.read_text())
    assert count >= 3
    path.write_text(text)
    resumed = await rig.open(store, rig.config(max_budget_usd=5.0), resume=sid)
    assert resumed.total_cost_usd == pytest.approx(0.6)  # the costs of the entries still count
    await resumed.submit("more")
    await resumed.close()
    assert (await load_record(store, sid)).total_cost_usd > 0.6  # the new entries were written


def test_a_hand_lowered_total_on_every_entry_is_the_users_call_but_not_below_the_costs() -> None:
    header = {"type": "session", "version": 1, "id": "s", "cwd": "/"}
    entries = [header]
    parent = None
    for n in range(3):
        entry = {
            "type": "assistant",
            "id": f"0000000{n}",
            "parent_id": parent,
            "content": "",
            "tool_calls": [],
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
            "cost_usd": 0.25,
            "total_cost_usd": 0.01,
        }
        entries.append(entry)
        parent = entry["id"]
    assert SessionRecord.from_entries(entries).total_cost_usd == pytest.approx(0.75)


# -- the file store ----------------------------------------------------------------------------------------------


def head(sid: str, cwd: str = "/work/project") -> dict:
    return {"type": "session", "version": 1, "id": sid, "cwd": cwd, "timestamp": "2026-01-01T00:00:00.000Z"}


def user(eid: str, parent: str | None, text: str) -> dict:
    return {"type": "user", "id": eid, "parent_id": parent, "timestamp": "2026-01-01T00:00:00.000Z", "content": text}


@pytest.mark.parametrize(
    "bad",
    ["/etc/passwd", "..", "a\x00b", "\uff41\uff42", "a\nb", "a\\b", "~", "x" * 129, "a b", "*", "[ab]"],
    ids=["absolute", "dotdot", "nul", "fullwidth", "newline", "backslash", "tilde", "129", "space", "star", "glob"],
)
async def test_path_tricks_as_session_ids_are_refused(tmp_path: Path, bad: str) -> None:
    store = FileSessionStore(tmp_path / "root")
    with pytest.raises(ValueError, match="invalid session id"):
        await store.append(bad, [head("x")])
    with pytest.raises(ValueError, match="invalid session id"):
        await store.load(bad)
    with pytest.raises(ValueError, match="invalid session id"):
        await store.delete(bad)
    assert not (tmp_path / "root").exists()


async def test_a_record_replaced_by_a_symlink_is_never_written_through(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path / "root")
    await store.append("s1", [head("s1"), user("00000001", None, "hi")])
    store.close()
    path = store.path_of("s1")
    assert path is not None
    victim = tmp_path / "victim"  # e.g. ~/.bashrc: a file the user can write
    victim.write_text("precious\n")
    path.unlink()
    path.symlink_to(victim)
    with pytest.raises(StoreError, match="symbolic link"):
        await store.append("s1", [user("00000002", "00000001", "evil")])
    assert victim.read_text() == "precious\n"
    with pytest.raises(StoreError, match="symbolic link"):
        await store.load("s1")  # nor read: it could be another user's record


async def test_a_symlink_planted_before_the_first_append_is_not_followed(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path / "root")
    await store.append("other", [head("other")])  # makes the cwd folder
    folder = store.path_of("other").parent  # type: ignore[union-attr]
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (folder / "20200101T000000000000Z_s2.jsonl").symlink_to(victim)
    with pytest.raises(StoreError, match="symbolic link"):
        await store.append("s2", [head("s2")])
    assert victim.read_text() == "precious\n"


async def test_an_existing_folder_and_record_with_loose_modes_are_made_private(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = FileSessionStore(root)
    await store.append("s1", [head("s1")])
    store.close()
    path = store.path_of("s1")
    assert path is not None
    os.chmod(path.parent, 0o777)
    os.chmod(path, 0o666)
    await store.append("s1", [user("00000001", None, "hi")])
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert path.stat().st_mode & 0o777 == 0o600
    # A new record in a folder someone left open (e.g. made by hand) too.
    os.chmod(path.parent, 0o775)
    await store.append("s2", [head("s2")])
    assert path.parent.stat().st_mode & 0o777 == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
async def test_a_cwd_folder_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = FileSessionStore(root)
    await store.append("s1", [head("s1")])
    store.close()
    folder = store.path_of("s1").parent  # type: ignore[union-attr]
    os.chown(folder, 65534, 65534)  # nobody: could plant symlinks or read what is written
    with pytest.raises(StoreError, match="owned by another user"):
        await store.append("s2", [head("s2")])
    assert sorted(p.name.split("_", 1)[1] for p in folder.iterdir()) == ["s1.jsonl"]


async def test_ra_sessions_dir_that_is_a_file_gives_a_store_error(tmp_path: Path) -> None:
    root = tmp_path / "a-file"
    root.write_text("not a directory")
    store = FileSessionStore(root)
    with pytest.raises(StoreError, match="cannot create"):
        await store.append("s1", [head("s1")])
    assert await store.load("s1") is None and await store.list() == []


async def test_ra_sessions_dir_that_is_a_symlink_the_user_made_works(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    store = FileSessionStore(tmp_path / "link")
    await store.append("s1", [head("s1")])
    assert await store.load("s1") == [head("s1")]
    assert len(list(real.glob("*/*_s1.jsonl"))) == 1


@pytest.mark.parametrize("where", ["middle", "last"])
async def test_json_nested_past_the_recursion_limit_is_a_clear_error_not_a_crash(tmp_path: Path, where: str) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("s1", [head("s1"), user("00000001", None, "hi")])
    store.close()
    path = store.path_of("s1")
    assert path is not None
    deep = '{"type":"user","id":"00000002","parent_id":"00000001","content":"x","x":' + "[" * 100_000
    deep += "]" * 100_000 + "}\n"
    with path.open("a") as handle:
        handle.write(deep)
        if where == "middle":
            handle.write(json.dumps(user("00000003", "00000001", "after")) + "\n")
    with pytest.raises(StoreError, match="nested too deeply"):
        await store.load("s1")
    infos = await store.list()  # a listing of a broken record does not fail the whole listing
    assert [i.id for i in infos] == ["s1"]


@pytest.mark.parametrize("kind", ["file", "memory"])
async def test_a_header_for_a_taken_id_never_lands_in_the_existing_record(tmp_path: Path, kind: str) -> None:
    store = FileSessionStore(tmp_path) if kind == "file" else MemorySessionStore()
    await store.append("dup", [head("dup", "/a"), user("00000001", None, "mine")])
    with pytest.raises(StoreError, match="already has a record"):
        await store.append("dup", [head("dup", "/b"), user("00000002", None, "theirs")])
    assert await store.load("dup") == [head("dup", "/a"), user("00000001", None, "mine")]


async def test_a_new_session_given_a_taken_id_does_not_write_into_the_others_record(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("first"), reply("second")])
    first = rig.session(store)
    await first.submit("the first session")
    await first.close()
    before = await store.load(first.id)
    # The constructor (not Session.open, which refuses a taken id up front) with the same id.
    second = Session(rig.profile, FakeEnv(), rig.client, rig.config(), store=store, session_id=first.id)
    seen = warnings(second)
    await second.submit("the second session")
    await second.close()
    assert await store.load(first.id) == before
    assert [w.code for w in seen] == ["session_not_persisted"]


async def test_a_subagents_spend_is_on_disk_before_the_parents_next_model_call(tmp_path: Path) -> None:
    """A process killed during the parent's next model call (after a subagent spent money) must
    not resume with that money forgotten: the record as it is on disk at that moment counts it."""
    import dataclasses

    from ra.agent.subagents.tools import subagent_tools
    from ra.llm.testing import call
    from ra.llm.types import Request

    store = FileSessionStore(tmp_path)
    seen_on_disk: list[float] = []
    parent_id: list[str] = []

    def priced(step: Step) -> Step:
        return dataclasses.replace(step, usage=USAGE)

    def route(request: Request) -> Step:
        first = next(m.text for m in request.messages if m.role == "user")
        if first == "look around":
            return priced(Step(text="child answer"))
        results = [p.tool_result for m in request.messages for p in m.content if p.tool_result is not None]
        if not results:
            return priced(call("spawn_agent", task="look around"))
        if len(results) == 1:
            agent = json.loads(str(results[0].content))["agent_id"]
            return priced(call("wait", agent_id=agent))
        # The parent's third call: read the record as a resume after a kill -9 now would.
        path = store.path_of(parent_id[0])
        assert path is not None
        seen_on_disk.append(SessionRecord.from_entries(lines_of(path)).total_cost_usd)
        return priced(Step(text="parent done"))

    rig = Rig(price=PRICE)
    rig.model.default = route
    for tool in subagent_tools():
        rig.profile.tool_registry.register(tool)
    parent = rig.session(store)
    parent_id.append(parent.id)
    result = await parent.submit("delegate")
    await parent.close()
    assert result.text == "parent done" and parent.total_cost_usd == pytest.approx(0.8)
    # Two parent calls ($0.40) and the child's call ($0.20) were spent when the third began.
    assert seen_on_disk == [pytest.approx(0.6)]


# -- secrets ------------------------------------------------------------------------------------------------------


async def test_a_secret_everywhere_a_record_can_hold_a_string_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the user's own prompt, a tool's arguments (as a value and as a key), the model's text,
    an error result, and the header (a working directory named after it)."""
    import uuid

    from ra.env.local import LocalExecutionEnvironment

    key = "sk-" + uuid.uuid4().hex
    monkeypatch.setenv("ATTACK_API_KEY", key)
    cwd = tmp_path / f"proj-{key}"
    cwd.mkdir()
    store = FileSessionStore(tmp_path / "sessions")
    rig = Rig(
        [
            Step(text=f"I will use {key}", tool_calls=[ToolCall("c1", "echo", {"text": key, key: key})]),
            Step(tool_calls=[ToolCall("c2", "no_such_tool", {"x": key})]),
            Step(text=f"done with {key}"),
        ],
        env=LocalExecutionEnvironment(cwd),
    )
    session = rig.session(store)
    await session.submit(f"my key is {key}")
    await session.close()
    path = store.path_of(session.id)
    assert path is not None
    text = path.read_text()
    assert key not in text
    assert text.count("[REDACTED]") >= 6
    # A hand-written record or a host's store never had to redact: what ra writes does.
    assert key not in json.dumps(await store.load(session.id))


# -- resume semantics ---------------------------------------------------------------------------------------------


def no_orphan_calls(request: object) -> None:
    """Every tool call in a request has its result, and every result its call."""
    called, answered = set(), set()
    for message in request.messages:  # type: ignore[attr-defined]
        for part in message.content:
            if part.tool_call is not None:
                called.add(part.tool_call.id)
            if part.tool_result is not None:
                answered.add(part.tool_result.tool_call_id)
    assert called == answered, (called, answered)


@pytest.mark.parametrize("at", ["assistant", "tool_results", "user"])
async def test_resume_at_any_kind_of_entry_never_sends_a_call_without_its_result(tmp_path: Path, at: str) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(1), Step(text="done")], price=PRICE)
    first = rig.session(store)
    await first.submit("work")
    await first.close()
    record = await load_record(store, first.id)
    kinds = [record.entry(i)["type"] for i in record.turn_ids]  # type: ignore[index]
    entry = record.turn_ids[kinds.index(at)]
    rig.model.add(Step(text="again"))
    rewound = await rig.open(store, resume=first.id, resume_at=entry)
    await rewound.submit("go on")
    await rewound.close()
    no_orphan_calls(rig.model.requests[-1])
    # Nothing ran again: the echo tool ran once, in the first session.
    assert sum(1 for r in rig.model.requests for m in r.messages if m.role == "tool") >= 1
    again = await load_record(store, first.id)
    assert len(again.leaves()) == 2  # the rewind is a branch; the old path is still there


async def test_resume_with_a_tool_that_no_longer_exists_carries_its_calls(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(1), Step(text="done")])
    first = rig.session(store)
    await first.submit("work")
    await first.close()
    rig.profile.tool_registry.unregister("echo")
    rig.model.add(tool_step(2), Step(text="no echo now"))
    resumed = await rig.open(store, resume=first.id)
    result = await resumed.submit("again")
    await resumed.close()
    assert result.text == "no echo now"
    no_orphan_calls(rig.model.requests[-1])
    [last] = [t for t in (await load_record(store, first.id)).turns if hasattr(t, "results")][-1:]
    assert last.results[0].is_error and "echo" in last.results[0].content


async def test_resuming_a_record_that_ends_with_an_unanswered_user_message(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([Step(error=RuntimeError("the model is down"))])
    first = rig.session(store)
    await first.submit("first question")
    await first.close()
    rig.model.add(Step(text="answer"))
    resumed = await rig.open(store, resume=first.id)
    result = await resumed.submit("second question")
    await resumed.close()
    assert result.text == "answer"
    texts = [m.text for m in rig.model.requests[-1].messages if m.role == "user"]
    assert texts == ["first question", "second question"]  # both kept, in order


class _NoLeaseStore(FileSessionStore):
    """A store without the optional ``acquire`` (as a host's store may be): no lease."""

    acquire = None  # type: ignore[assignment]


async def test_two_resumes_of_one_session_at_once_write_two_consistent_branches(tmp_path: Path) -> None:
    # FileSessionStore refuses the second resume (test_lease.py); a store without leases lets
    # both go on, and then each still writes a whole branch of its own.
    store = _NoLeaseStore(tmp_path)
    rig = Rig([Step(text="one")])
    first = rig.session(store)
    await first.submit("start")
    await first.close()
    a = await rig.open(store, resume=first.id)
    b = await rig.open(store, resume=first.id)
    rig.model.add(*(Step(text=f"answer {n}") for n in range(6)))
    for n in range(3):  # interleaved: a, b, a, b, ...
        await a.submit(f"a{n}")
        await b.submit(f"b{n}")
    await a.close()
    await b.close()
    record = await load_record(store, first.id)
    assert len(record.leaves()) == 2
    for leaf in record.leaves():
        path = record.with_leaf(leaf)
        users = [t.content for t in path.turns if type(t).__name__ == "UserTurn"]
        assert users[0] == "start" and len(users) == 4
        assert {u[0] for u in users[1:]} in ({"a"}, {"b"})  # never mixed
    # A plain load continues the branch written last (b's), as docs/sessions.md says.
    assert [t.content for t in record.turns if type(t).__name__ == "UserTurn"][-1] == "b2"


async def test_listing_a_huge_record_without_a_user_message_decodes_a_bounded_number_of_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ra.agent.store import files

    store = FileSessionStore(tmp_path)
    custom = [
        {"type": "custom", "id": f"{n:08x}", "parent_id": None if n == 0 else f"{n - 1:08x}", "key": "k", "data": n}
        for n in range(50_000)
    ]
    await store.append("many", [head("many"), *custom])
    decoded = 0
    real = files._loads

    def counting(line: bytes) -> dict | None:
        nonlocal decoded
        decoded += 1
        return real(line)

    monkeypatch.setattr(files, "_loads", counting)
    [info] = await store.list()
    assert info.id == "many" and info.entries == 50_000 and info.title == ""
    assert decoded <= 2 * 1000 + 2  # files._INFO_SCAN from each end


async def test_a_fork_of_a_fork_at_the_earliest_entry_keeps_every_ancestors_spend(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(n) for n in range(1, 40)], price=PRICE)
    sid = await spent_session(store, rig)  # $0.60
    early = (await load_record(store, sid)).turn_ids[1]
    fork = await rig.open(store, rig.config(max_turns_per_input=1), resume=sid, fork_session=True, resume_at=early)
    await fork.submit("fork work")  # + $0.20
    await fork.close()
    assert fork.total_cost_usd == pytest.approx(0.8)
    first_of_fork = (await load_record(store, fork.id)).turn_ids[0]
    fork2 = await rig.open(
        store, rig.config(max_budget_usd=0.9), resume=fork.id, fork_session=True, resume_at=first_of_fork
    )
    assert fork2.total_cost_usd == pytest.approx(0.8)
    with pytest.raises(Exception, match="already exists"):
        await rig.open(store, resume=fork.id, fork_session=True, session_id=sid)  # a fork cannot take its parent's id
    await fork2.close()


async def test_continue_in_a_directory_with_only_subagent_records_starts_a_new_session(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([])
    cwd = str(rig.env.working_directory())
    child = {**head("child", cwd), "agent_id": "a1", "agent_type": "general", "spawned_by": "gone"}
    await store.append("child", [child, user("00000001", None, "a subagent's task")])
    fresh = await rig.open(store, continue_conversation=True)
    assert fresh.id != "child" and fresh.history.turns == []
    await fresh.close()


async def test_a_root_the_store_creates_is_private_too(tmp_path: Path) -> None:
    """Its listing names the user's projects (the cwd slugs)."""
    root = tmp_path / "state" / "ra" / "sessions"
    store = FileSessionStore(root)
    await store.append("s1", [head("s1", "/home/someone/secret-project")])
    assert root.stat().st_mode & 0o777 == 0o700


async def test_a_secret_in_a_subagents_work_never_reaches_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uuid

    from ra.agent.subagents.tools import subagent_tools
    from ra.llm.testing import call
    from ra.llm.types import Request

    key = "tok-" + uuid.uuid4().hex
    monkeypatch.setenv("CHILD_ACCESS_TOKEN", key)

    def route(request: Request) -> Step:
        first = next(m.text for m in request.messages if m.role == "user")
        if first.startswith("look around"):
            return Step(text=f"the token is {key}")
        results = [p.tool_result for m in request.messages for p in m.content if p.tool_result is not None]
        if not results:
            return call("spawn_agent", task=f"look around with {key}")
        if len(results) == 1:
            return call("wait", agent_id=json.loads(str(results[0].content))["agent_id"])
        return Step(text="parent done")

    store = FileSessionStore(tmp_path)
    rig = Rig()
    rig.model.default = route
    for tool in subagent_tools():
        rig.profile.tool_registry.register(tool)
    parent = rig.session(store)
    await parent.submit("delegate")
    await parent.close()
    infos = await store.list()
    assert len(infos) == 2 and any(i.agent_id for i in infos)
    for info in infos:
        text = store.path_of(info.id).read_text()  # type: ignore[union-attr]
        assert key not in text and "[REDACTED]" in text


async def test_a_fifo_in_place_of_a_record_is_refused_without_hanging(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("s1", [head("s1")])
    store.close()
    path = store.path_of("s1")
    assert path is not None
    path.unlink()
    os.mkfifo(path)  # a read of a FIFO with no writer waits forever
    with pytest.raises(StoreError, match="not a regular file"):
        await store.load("s1")
    with pytest.raises(StoreError, match="not a regular file"):
        await store.append("s1", [user("00000001", None, "x")])

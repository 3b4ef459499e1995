"""Replay of sessions that spawned subagents: each subagent answers from its own record.

The records are made by real Sessions (a scripted model routed per agent, real shell and file tools
on a temporary directory) recording to a real FileSessionStore; the replay reads them back from
that store and runs the same tools again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ra.agent.replay import DifferenceKind, replay
from ra.agent.store import FileSessionStore, load_record
from ra.env.local import LocalExecutionEnvironment
from ra.llm.testing import call, reply
from tests.support.records import CHILD, INNER, TASK, config, last_agent_id, parent_script, profile, record_tree


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "note.txt").write_text("the note\n")
    return root


@pytest.fixture
def store(tmp_path: Path) -> FileSessionStore:
    return FileSessionStore(tmp_path / "sessions")


async def replay_from(work: Path, store: FileSessionStore, session_id: str, **options: Any):
    recorded = await load_record(store, session_id)
    return await replay(
        list(recorded.turns),
        profile=profile(),
        execution_env=LocalExecutionEnvironment(work),
        store=store,
        session_id=session_id,
        **options,
    )


async def child_records(store: FileSessionStore, parent: str) -> list[dict[str, Any]]:
    headers = []
    for info in await store.list():
        entries = await store.load(info.id)
        assert entries is not None
        if entries[0].get("spawned_by") == parent:
            headers.append(entries[0])
    return headers


async def test_the_subagent_header_names_the_spawning_call(work: Path, store: FileSessionStore) -> None:
    sid = await record_tree(work, store, {"delegate": parent_script(), TASK: list(CHILD)})
    [child] = await child_records(store, sid)
    assert child["spawn_call_id"] == "sp1" and child["agent_id"].startswith("agent-")
    [info] = [i for i in await store.list() if i.agent_id is not None]
    assert info.spawned_by == sid and info.agent_id == child["agent_id"]


async def test_a_subagent_replays_from_its_record_without_differences(work: Path, store: FileSessionStore) -> None:
    sid = await record_tree(work, store, {"delegate": parent_script(), TASK: list(CHILD)})
    (work / "copy.txt").unlink()  # back to the tree the session started from
    report = await replay_from(work, store, sid)
    assert report.ok, report.to_text()
    # the parent's 3 steps, the child's 3, and 4 results: spawn, wait, and the child's shell and write
    assert (report.steps, report.subagents, report.subagent_steps, report.tool_calls) == (3, 1, 3, 4)
    assert (work / "copy.txt").read_text() == "copied\n"  # the child's tool ran for real
    assert "1 subagent(s) with 3 step(s), 4 tool result(s) compared: everything matches" in report.to_text()


async def test_a_changed_file_makes_exactly_the_subagents_step_differ(work: Path, store: FileSessionStore) -> None:
    sid = await record_tree(work, store, {"delegate": parent_script(), TASK: list(CHILD)})
    [child] = await child_records(store, sid)
    (work / "copy.txt").unlink()
    (work / "note.txt").write_text("a new note\n")
    report = await replay_from(work, store, sid)
    [diff] = report.differences
    assert (diff.kind, diff.step, diff.call_id, diff.tool) == (DifferenceKind.RESULT, 1, "c1", "shell")
    [where] = diff.subagent
    assert (where.agent_id, where.session_id, where.step) == (child["agent_id"], child["id"], 1)
    assert "-the note" in diff.diff and "+a new note" in diff.diff
    assert diff.diff.startswith(f"--- recorded {child['agent_id']} step 1 shell\n")
    assert f"step 1 > {child['agent_id']} step 1 shell c1: the result differs" in report.to_text()
    data = report.to_json()["differences"][0]
    assert data["subagent"] == [{"agent_id": child["agent_id"], "session_id": child["id"], "step": 1}]


async def test_a_missing_subagent_record_is_a_difference_and_no_model_call(work: Path, store: FileSessionStore) -> None:
    sid = await record_tree(work, store, {"delegate": parent_script(), TASK: list(CHILD)})
    [child] = await child_records(store, sid)
    assert await store.delete(child["id"])
    (work / "copy.txt").unlink()
    report = await replay_from(work, store, sid)
    kinds = [(d.kind, d.step, d.tool) for d in report.differences]
    assert kinds[0] == (DifferenceKind.NO_SUBAGENT_RECORD, 1, "spawn_agent")
    assert "no record of a subagent spawned by call sp1" in report.differences[0].message
    assert "no model was called" in report.differences[0].message
    # the spawn was refused (its result now says why), so the wait for the recorded agent fails too
    assert kinds[1:] == [(DifferenceKind.RESULT, 1, "spawn_agent"), (DifferenceKind.RESULT, 2, "wait")]
    assert "Could not spawn the agent: replay: no record" in (report.differences[1].now or "")
    assert (report.subagents, report.subagent_steps) == (0, 0)
    assert not (work / "copy.txt").exists()  # no subagent ran


async def test_without_a_store_a_spawn_is_refused_with_the_reason(work: Path, store: FileSessionStore) -> None:
    sid = await record_tree(work, store, {"delegate": parent_script(), TASK: list(CHILD)})
    recorded = await load_record(store, sid)
    (work / "copy.txt").unlink()
    report = await replay(list(recorded.turns), profile=profile(), execution_env=LocalExecutionEnvironment(work))
    first = report.differences[0]
    assert first.kind == DifferenceKind.NO_SUBAGENT_RECORD and "given no store and session_id" in first.message
    assert not (work / "copy.txt").exists()
    with pytest.raises(ValueError, match="store and session_id go together"):
        await replay(
            list(recorded.turns), profile=profile(), execution_env=LocalExecutionEnvironment(work), store=store
        )


async def test_a_spawn_the_record_does_not_have_is_refused(work: Path, store: FileSessionStore) -> None:
    """The replayed session spawns with another call than the recorded one: no record answers it."""
    sid = await record_tree(work, store, {"delegate": parent_script(), TASK: list(CHILD)})
    (work / "copy.txt").unlink()
    recorded = await load_record(store, sid)
    turns = list(recorded.turns)
    spawn = turns[1]
    renamed = [c.with_arguments(c.arguments) for c in spawn.tool_calls]
    renamed[0].id = "other"
    turns[1] = type(spawn)(spawn.content, renamed, usage=spawn.usage)
    turns[2] = type(turns[2])(
        [type(r)("other", r.content, r.is_error) for r in turns[2].results], names=["spawn_agent"]
    )
    report = await replay(
        turns, profile=profile(), execution_env=LocalExecutionEnvironment(work), store=store, session_id=sid
    )
    kinds = [d.kind for d in report.differences]
    assert kinds[0] == DifferenceKind.NO_SUBAGENT_RECORD and "call other" in report.differences[0].message
    # and the recorded subagent that was never spawned is reported at the end
    assert kinds[-1] == DifferenceKind.UNUSED_REPLIES and "it was not spawned now" in report.differences[-1].message
    assert report.subagent_steps == 0


async def test_nested_subagents_replay_each_from_its_own_record(work: Path, store: FileSessionStore) -> None:
    child = [
        call("spawn_agent", _id="sp2", task=INNER),
        lambda request: call("wait", _id="w2", agent_id=last_agent_id(request)),
        reply("counted"),
    ]
    inner = [call("shell", _id="c3", command="wc -w < note.txt"), reply("two")]
    sid = await record_tree(
        work,
        store,
        {"delegate": parent_script(), TASK: child, INNER: inner},
        max_subagent_depth=2,
    )
    recorded = await load_record(store, sid)

    async def again() -> Any:
        env = LocalExecutionEnvironment(work)
        turns = list(recorded.turns)
        return await replay(
            turns,
            profile=profile(),
            execution_env=env,
            store=store,
            session_id=sid,
            config=config(max_subagent_depth=2),
        )

    report = await again()
    assert report.ok, report.to_text()
    assert (report.subagents, report.subagent_steps, report.tool_calls) == (2, 5, 5)
    (work / "note.txt").write_text("now three words\n")
    report = await again()
    [diff] = report.differences
    assert (diff.step, diff.tool, diff.call_id) == (1, "shell", "c3")
    assert [a.step for a in diff.subagent] == [1, 1]  # spawned at the child's step 1; the inner agent's step 1


async def test_step_ranges_and_stop_at_first_count_a_subagent_at_its_spawning_step(
    work: Path, store: FileSessionStore
) -> None:
    sid = await record_tree(work, store, {"delegate": parent_script(), TASK: list(CHILD)})
    (work / "note.txt").write_text("a new note\n")
    (work / "copy.txt").unlink()
    # spawned at step 1: outside a range from step 2, so its steps run but are not compared
    later = await replay_from(work, store, sid, steps=(2, None))
    assert later.ok, later.to_text()
    assert later.subagent_steps == 3 and later.tool_calls == 1  # the wait only
    (work / "copy.txt").unlink()
    first = await replay_from(work, store, sid, stop_at_first=True)
    [diff] = first.differences
    assert diff.step == 1 and diff.subagent[0].step == 1
    assert first.stopped == "the first difference (step 1)"
    assert first.steps == 2  # the wait ran (the subagent finished); no model call after it


async def test_a_record_from_before_spawn_call_id_is_found_by_its_agent_id(work: Path, store: FileSessionStore) -> None:
    """Subagent records written before the header named the spawning call: the agent id in the
    parent's recorded spawn_agent result finds them."""
    sid = await record_tree(work, store, {"delegate": parent_script(), TASK: list(CHILD)})
    [child] = await child_records(store, sid)
    path = store.path_of(child["id"])
    assert path is not None
    lines = path.read_text().splitlines(keepends=True)
    head = json.loads(lines[0])
    del head["spawn_call_id"]
    path.write_text(json.dumps(head) + "\n" + "".join(lines[1:]))
    (work / "copy.txt").unlink()
    report = await replay_from(work, store, sid)
    assert report.ok, report.to_text()
    assert (report.subagents, report.subagent_steps) == (1, 3)


async def test_a_subagent_the_replay_ends_before_is_reported_with_its_steps_left(
    work: Path, store: FileSessionStore
) -> None:
    """The replayed session ends at once (its recorded wait left out): closing it stops the subagent,
    as it did when it was recorded, and the recorded steps the subagent did not get to are reported."""
    sid = await record_tree(work, store, {"delegate": parent_script(), TASK: list(CHILD)})
    (work / "copy.txt").unlink()
    turns = list((await load_record(store, sid)).turns)
    del turns[3:5]  # the wait call and its result: the session answers right after spawning
    report = await replay(
        turns, profile=profile(), execution_env=LocalExecutionEnvironment(work), store=store, session_id=sid
    )
    [diff] = report.differences
    assert diff.kind == DifferenceKind.UNUSED_REPLIES and diff.step == 1 and len(diff.subagent) == 1
    assert "the replay ended before the subagent's recorded step(s)" in diff.message
    assert report.subagent_steps < 3


async def test_spawned_by_links_that_loop_back_to_the_session_end(work: Path, store: FileSessionStore) -> None:
    """A session record that says its own subagent spawned it: the lookup visits each record once."""
    sid = await record_tree(work, store, {"delegate": parent_script(), TASK: list(CHILD)})
    [child] = await child_records(store, sid)
    path = store.path_of(sid)
    assert path is not None
    lines = path.read_text().splitlines(keepends=True)
    head = json.loads(lines[0])
    head.update(agent_id="agent-loop", spawned_by=child["id"], spawn_call_id="sp1")
    path.write_text(json.dumps(head) + "\n" + "".join(lines[1:]))
    (work / "copy.txt").unlink()
    report = await replay_from(work, store, sid)
    assert report.ok, report.to_text()
    assert report.subagents == 1

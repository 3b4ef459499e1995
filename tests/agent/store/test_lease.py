"""A live session holds its record: a second session cannot resume it until the first ends (or
its process dies), so two sessions cannot each spend the remaining budget or branch one record."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from ra.agent import Session, StopReason
from ra.agent.store import FileSessionStore, MemorySessionStore, SessionInUseError, StoreError, check_store
from ra.llm.pricing import ModelPrice
from ra.llm.testing import Step, reply
from ra.llm.types import ToolCall, Usage

from .support import Rig, warnings

REPO = Path(__file__).resolve().parents[3]
USAGE = Usage(input_tokens=100_000, output_tokens=50_000)
PRICE = ModelPrice(1.0, 2.0)  # a call with USAGE costs $0.20

#: A second process that resumes session argv[2] of the store at argv[1], says "held", and
#: closes the session when a line arrives on its stdin.
CHILD = """
import asyncio, sys
from ra.agent.store import FileSessionStore
from tests.agent.store.support import Rig

async def main():
    session = await Rig().open(FileSessionStore(sys.argv[1]), resume=sys.argv[2])
    print("held", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    await session.close()
    print("closed", flush=True)

asyncio.run(main())
"""


def tool_step(n: int) -> Step:
    return Step(tool_calls=[ToolCall(f"call-{n}", "echo", {"text": "x"})], usage=USAGE)


async def recorded(store: object, rig: Rig | None = None) -> str:
    rig = rig or Rig([reply("first")])
    session = rig.session(store)
    await session.submit("hello")
    await session.close()
    return session.id


async def child(root: Path, sid: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, str(root), sid, cwd=REPO, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    if line != b"held\n":
        proc.kill()
        _, err = await proc.communicate()
        raise AssertionError(f"the child did not take the session: {line!r} {err.decode()[-2000:]}")
    return proc


async def test_a_second_process_is_refused_while_the_first_runs_and_accepted_after(tmp_path: Path) -> None:
    sid = await recorded(FileSessionStore(tmp_path))
    proc = await child(tmp_path, sid)
    try:
        with pytest.raises(SessionInUseError, match=rf"session {sid} is in use by another session \(pid {proc.pid}\)"):
            await Rig().open(FileSessionStore(tmp_path), resume=sid)
        assert proc.stdin is not None
        proc.stdin.write(b"close\n")
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert out == b"closed\n" and proc.returncode == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    again = await Rig().open(FileSessionStore(tmp_path), resume=sid)
    await again.close()
    assert not (tmp_path / ".leases" / f"{sid}.lock").exists()  # a released lease leaves no file


async def test_a_killed_process_lets_the_session_go(tmp_path: Path) -> None:
    sid = await recorded(FileSessionStore(tmp_path))
    proc = await child(tmp_path, sid)
    proc.send_signal(signal.SIGKILL)
    await asyncio.wait_for(proc.wait(), 30)
    again = await Rig().open(FileSessionStore(tmp_path), resume=sid)
    await again.close()


@pytest.mark.parametrize("kind", ["files", "memory"])
async def test_in_one_process_the_second_resume_is_refused_and_a_fork_works(tmp_path: Path, kind: str) -> None:
    store = FileSessionStore(tmp_path) if kind == "files" else MemorySessionStore()
    other = FileSessionStore(tmp_path) if kind == "files" else store  # a second store object on one root
    sid = await recorded(store)
    rig = Rig([reply("forked")])
    first = await rig.open(store, resume=sid)
    with pytest.raises(SessionInUseError, match="fork it with fork_session=True"):
        await rig.open(other, resume=sid)
    fork = await rig.open(other, resume=sid, fork_session=True)
    await fork.submit("go on elsewhere")
    await fork.close()
    forked = await store.load(fork.id)
    assert forked is not None and forked[0]["parent_session"]["id"] == sid
    await first.close()  # closed without ever running: the lease is still let go
    again = await rig.open(other, resume=sid)
    await again.close()


async def test_a_live_new_session_holds_its_record(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("one"), reply("two")])
    live = rig.session(store)
    await live.submit("hello")  # recorded, and still open
    with pytest.raises(SessionInUseError):
        await rig.open(FileSessionStore(tmp_path), resume=live.id)
    with pytest.raises(SessionInUseError):
        await rig.open(FileSessionStore(tmp_path), continue_conversation=True)
    await live.close()
    resumed = await rig.open(FileSessionStore(tmp_path), continue_conversation=True)
    assert resumed.id == live.id
    await resumed.close()


async def test_two_resumes_cannot_spend_the_budget_twice(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([tool_step(1), tool_step(2)], price=PRICE)
    first = rig.session(store, max_budget_usd=1.0, max_turns_per_input=2)
    await first.submit("work")  # $0.40 spent
    await first.close()
    rig.model.add(*(tool_step(n) for n in range(3, 20)))
    a = await rig.open(store, rig.config(max_budget_usd=0.5), resume=first.id)
    # The attack: a second resume at the same time would start from $0.40 too.
    with pytest.raises(SessionInUseError):
        await rig.open(FileSessionStore(tmp_path), rig.config(max_budget_usd=0.5), resume=first.id)
    result = await a.submit("more")
    assert result.stop_reason is StopReason.BUDGET_LIMIT
    await a.close()
    calls = len(rig.model.requests)
    b = await rig.open(FileSessionStore(tmp_path), rig.config(max_budget_usd=0.5), resume=first.id)
    assert b.total_cost_usd == pytest.approx(0.6)  # starts from all that was spent
    result = await b.submit("even more")
    assert result.stop_reason is StopReason.BUDGET_LIMIT and len(rig.model.requests) == calls
    await b.close()


async def test_a_lease_is_let_go_when_collected(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    lease = await store.acquire("s1")
    with pytest.raises(SessionInUseError):
        await store.acquire("s1")
    del lease
    (await store.acquire("s1")).release()


async def test_the_stores_pass_the_conformance_kit_with_leases(tmp_path: Path) -> None:
    await check_store(MemorySessionStore)
    roots = iter(range(100))
    await check_store(lambda: FileSessionStore(tmp_path / str(next(roots))))


async def test_a_record_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path, max_record_bytes=1024 * 1024)
    sid = await recorded(store)
    path = store.path_of(sid)
    assert path is not None and [info.id for info in await store.list()] == [sid]
    os.truncate(path, 3 * 1024 * 1024 * 1024)  # sparse: 3 GiB that use no disk
    with pytest.raises(StoreError, match=r"is 3221225472 bytes, over the 1048576-byte limit"):
        await store.load(sid)
    default = FileSessionStore(tmp_path)  # 512 MiB by default
    with pytest.raises(StoreError, match="over the 536870912-byte limit"):
        await default.load(sid)
    # Nor does listing read it (``ra --continue`` lists this directory's sessions first).
    assert [info.id for info in await store.list()] == []


async def test_a_new_session_that_cannot_take_its_lease_warns_and_goes_on_unrecorded(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    held = await store.acquire("taken-id")  # another live session holds the id (no record yet)
    rig = Rig([reply("ok")])
    session = Session(rig.profile, rig.env, rig.client, rig.config(), store=store, session_id="taken-id")
    seen = warnings(session)
    result = await session.submit("hi")
    await session.close()
    assert result.stop_reason is StopReason.COMPLETED
    assert [w.code for w in seen] == ["session_not_persisted"] and "in use by another session" in seen[0].message
    assert await store.load("taken-id") is None  # nothing written under another's lease
    held.release()
    (tmp_path / ".leases").rmdir()
    (tmp_path / ".leases").write_text("not a folder")  # the lease cannot be made at all
    other = rig.session(store)
    seen = warnings(other)
    rig.model.add(reply("still ok"))
    result = await other.submit("hi")
    await other.close()
    assert result.stop_reason is StopReason.COMPLETED and [w.code for w in seen] == ["session_not_persisted"]

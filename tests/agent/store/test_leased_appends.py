"""The lease holder's appends (``FileSessionStore`` holding a record's lease writes without the
file lock: it is the only live session writing the record) and ``delete`` respecting the lease.
Writers without the lease keep the lock, and their lines never mix with the holder's."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ra.agent.store import FileSessionStore, SessionInUseError, StoreError, load_record
from ra.agent.store.format import header, iso_time
from ra.llm.testing import reply

from .support import Rig, warnings
from .test_step_writes import chain_ok, child, steps

SRC = str(Path(__file__).resolve().parents[3] / "src")


def head(sid: str) -> dict:
    return header(sid, cwd="/work/p", model="m", provider="p", profile="generic", ra_version="t", timestamp=time.time())


def line(eid: str, parent: str, text: str) -> bytes:
    entry = {"type": "user", "id": eid, "parent_id": parent, "timestamp": iso_time(time.time()), "content": text}
    return (json.dumps(entry, separators=(",", ":")) + "\n").encode()


async def test_the_lease_holder_appends_while_another_writer_holds_the_file_lock(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    lease = await store.acquire("a")
    await store.append("a", [head("a")])
    path = store.path_of("a")
    assert path is not None
    with open(path, "ab") as other:  # another writer's lock on the record
        fcntl.flock(other, fcntl.LOCK_EX)
        assert store.append_lines_now("a", line("00000001", "a", "one")) is True  # no wait: the lease
        started = time.monotonic()
        await asyncio.wait_for(store.append_lines("a", line("00000002", "00000001", "two")), 5)
        assert time.monotonic() - started < 1
        lease.release()  # without the lease, the lock is taken again
        assert store.append_lines_now("a", line("00000003", "00000002", "three")) is False
    assert [e["id"] for e in await store.load("a") or []] == ["a", "00000001", "00000002"]


async def test_a_store_without_the_lease_keeps_waiting_for_the_lock(tmp_path: Path) -> None:
    holder = FileSessionStore(tmp_path)
    lease = await holder.acquire("a")
    await holder.append("a", [head("a")])
    other = FileSessionStore(tmp_path, lock_timeout=0.3)  # a host's second store: it has no lease
    await other.append("a", [{"type": "custom", "id": "c0000001", "parent_id": None, "timestamp": "t", "key": "k"}])
    path = holder.path_of("a")
    assert path is not None
    with open(path, "ab") as locked:
        fcntl.flock(locked, fcntl.LOCK_EX)
        assert other.append_lines_now("a", line("00000009", "a", "x")) is False
        with pytest.raises(StoreError, match="held the lock"):
            await other.append_lines("a", line("00000009", "a", "x"))
    lease.release()


async def test_after_another_writer_appended_the_holder_checks_the_end_under_the_lock(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    lease = await store.acquire("a")
    await store.append("a", [head("a")])
    path = store.path_of("a")
    assert path is not None
    with open(path, "ab") as torn:
        torn.write(b'{"type":"custom","id":"f00')  # a writer killed mid-line
    with open(path, "ab") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        # The size moved: not the lock-free way, and the lock is another's: nothing written.
        assert store.append_lines_now("a", line("00000001", "a", "one")) is False
    assert store.append_lines_now("a", line("00000001", "a", "one")) is True  # repaired, then written
    assert [e["id"] for e in map(json.loads, path.read_text().splitlines())] == ["a", "00000001"]
    lease.release()


_APPENDER = textwrap.dedent(
    """
    import asyncio, sys, time
    from ra.agent.store import FileSessionStore

    async def main(root, sid, count):
        store = FileSessionStore(root)
        for i in range(count):
            if i == 1:
                print("appending", flush=True)
            # Large, so that lines which were not each one write would show as mixed.
            await store.append(sid, [{"type": "custom", "id": f"f{i:07d}", "parent_id": None,
                "timestamp": "2026-01-01T00:00:00.000Z", "key": "other", "data": "x" * 30000}])
            await asyncio.sleep(0.001)

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


async def test_a_locked_writer_in_another_process_and_the_lease_holder_never_mix_lines(tmp_path: Path) -> None:
    rig = Rig([*steps(300), reply("done"), reply("after")])
    store = FileSessionStore(tmp_path)
    session = rig.session(store)
    await session.submit("start")  # the record and its lease exist
    writer = child(_APPENDER, str(tmp_path), session.id, "200")
    assert writer.stdout is not None and writer.stdout.readline() == "appending\n"
    await asyncio.wait_for(session.submit("go"), 60)  # 300 steps while the other process appends
    assert await asyncio.to_thread(writer.wait, 60) == 0
    await session.submit("last")  # the record's last entry is the session's again
    await session.close()
    path = store.path_of(session.id)
    assert path is not None
    entries = [json.loads(text) for text in path.read_text().splitlines()]  # every line is whole JSON
    assert [e["id"] for e in entries if e["type"] == "custom"] == [f"f{i:07d}" for i in range(200)]
    kinds = "".join("c" if e["type"] == "custom" else "s" for e in entries)
    assert "scs" in kinds  # the two writers did take turns
    record = await load_record(FileSessionStore(tmp_path), session.id)
    assert len(record.turns) == len(session.history) and not warnings(session)
    chain_ok(entries)


async def test_a_line_the_lease_holder_is_still_writing_is_not_cut_off_as_torn(tmp_path: Path) -> None:
    """The lease holder writes without the file lock, and the kernel makes a write visible a page
    at a time: a writer without the lease may find the record ending in the middle of the
    holder's line. That is no torn line (the holder is alive): it waits for the line to end and
    appends after it, where it used to cut the line off (a later entry then named an entry that
    was gone: found as a rare failure of the two-process test above)."""
    holder = FileSessionStore(tmp_path)
    lease = await holder.acquire("a")
    await holder.append("a", [head("a")])
    path = holder.path_of("a")
    assert path is not None
    whole = line("00000001", "a", "x" * 6000)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, whole[:4096])  # the first page of the holder's write is visible, not yet the rest
        other = FileSessionStore(tmp_path)
        waiting = asyncio.ensure_future(other.append_lines("a", line("f0000001", "a", "from the other writer")))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # still waiting for the holder's line to end
        os.write(fd, whole[4096:])
        await asyncio.wait_for(waiting, 5)
    finally:
        os.close(fd)
        lease.release()
    assert [e["id"] for e in await holder.load("a") or []] == ["a", "00000001", "f0000001"]


async def holder_with_an_unended_line(root: Path) -> Any:
    """A store holding record ``a``'s lease, whose record ends with the first 30 bytes of a line."""
    holder = FileSessionStore(root)
    lease = await holder.acquire("a")
    await holder.append("a", [head("a")])
    path = holder.path_of("a")
    assert path is not None
    with open(path, "ab") as f:
        f.write(line("00000001", "a", "unended")[:30])
    return lease


async def test_a_torn_line_with_no_live_holder_is_still_repaired_at_once(tmp_path: Path) -> None:
    lease = await holder_with_an_unended_line(tmp_path)
    lease.release()  # the holder is gone (as when its process dies): the torn line is real
    other = FileSessionStore(tmp_path)
    await asyncio.wait_for(other.append_lines("a", line("f0000001", "a", "next")), 2)
    assert [e["id"] for e in await other.load("a") or []] == ["a", "f0000001"]


async def test_a_line_the_live_holder_never_ends_is_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    lease = await holder_with_an_unended_line(tmp_path)
    other = FileSessionStore(tmp_path, lock_timeout=0.3)
    try:
        with pytest.raises(StoreError, match=r"last line stayed unfinished, for over 0\.3 s"):
            await asyncio.wait_for(other.append_lines("a", line("f0000001", "a", "next")), 5)
    finally:
        lease.release()


# -- delete and the lease --------------------------------------------------------------------------------


_HOLD_LEASE = textwrap.dedent(
    """
    import asyncio, sys
    from ra.agent.store import FileSessionStore

    async def main(root, sid):
        lease = await FileSessionStore(root).acquire(sid)
        print("held", flush=True)
        sys.stdin.readline()
        lease.release()

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def hold_lease(root: Path, sid: str) -> subprocess.Popen[bytes]:
    """Another process holding the session's lease until its stdin is closed."""
    env = {"PYTHONPATH": SRC, **os.environ}  # the PYTHONPATH the tests run with wins
    command = [sys.executable, "-c", _HOLD_LEASE, str(root), sid]
    return subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


async def test_delete_refuses_a_record_whose_lease_is_held_unless_forced(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("a", [head("a")])
    path = store.path_of("a")
    assert path is not None
    proc = hold_lease(tmp_path, "a")
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
        with pytest.raises(SessionInUseError, match=rf"pid {proc.pid}\)"):
            await store.delete("a")
        assert path.exists()
        own = await store.acquire("b")  # this store's own lease counts too
        await store.append("b", [head("b")])
        with pytest.raises(SessionInUseError):
            await FileSessionStore(tmp_path).delete("b")
        own.release()
        assert await store.delete("a", force=True) is True and not path.exists()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    assert await store.delete("b") is True  # released: deleted, and its lease file is gone
    assert sorted(os.listdir(tmp_path / ".leases")) == []


async def test_delete_takes_over_a_lease_file_left_by_a_killed_process(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    await store.append("a", [head("a")])
    (tmp_path / ".leases").mkdir(mode=0o700)
    (tmp_path / ".leases" / "a.lock").write_text("99999999\n")  # no process holds its lock
    assert await store.delete("a") is True
    assert not (tmp_path / ".leases" / "a.lock").exists()


def run_ra(*args: str, root: Path) -> subprocess.CompletedProcess[str]:
    # The PYTHONPATH the tests run with wins (it may point at another tree).
    env = {"PYTHONPATH": SRC, **os.environ, "RA_SESSIONS_DIR": str(root)}
    return subprocess.run([sys.executable, "-m", "ra.cli", *args], env=env, capture_output=True, text=True, timeout=60)


async def test_ra_sessions_delete_refuses_a_live_session_and_force_stops_its_recording(tmp_path: Path) -> None:
    rig = Rig([*steps(2), reply("one"), *steps(2, 10), reply("two")])
    store = FileSessionStore(tmp_path)
    session = rig.session(store)
    seen = warnings(session)
    await session.submit("first")
    path = store.path_of(session.id)
    assert path is not None
    refused = await asyncio.to_thread(run_ra, "sessions", "delete", session.id, root=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert f"in use by a live session (pid {os.getpid()})" in refused.stderr and "--force" in refused.stderr
    assert path.exists() and not seen
    usage = await asyncio.to_thread(run_ra, "sessions", "--force", root=tmp_path)
    assert usage.returncode == 2 and "--force is for delete" in usage.stderr
    forced = await asyncio.to_thread(run_ra, "sessions", "delete", "--force", session.id, root=tmp_path)
    assert forced.returncode == 0, forced.stderr
    result = await session.submit("second")  # goes on, unrecorded
    await session.close()
    assert result.text == "two" and not path.exists()
    assert [w.code for w in seen] == ["session_not_persisted"] and "was deleted" in seen[0].message


def test_a_failed_write_is_cut_back_only_when_nothing_was_written_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileSessionStore(tmp_path)
    lease = asyncio.run(store.acquire("a"))
    asyncio.run(store.append("a", [head("a")]))
    path = store.path_of("a")
    assert path is not None
    before = path.read_bytes()
    foreign = b'{"type":"custom","id":"f0000001","parent_id":null,"timestamp":"t","key":"k"}\n'
    real_write = os.write

    def full_disk(after_part: bytes | None) -> Callable[[int, bytes], int]:
        calls: list[int] = []

        def write(fd: int, data: bytes) -> int:
            if calls:
                raise OSError(errno.ENOSPC, "No space left on device")
            calls.append(1)
            done = real_write(fd, bytes(data[:10]))  # a part of the batch, then the disk is full
            if after_part is not None:
                with open(path, "ab") as other:  # another writer's line lands after that part
                    other.write(after_part)
            return done

        return write

    monkeypatch.setattr(os, "write", full_disk(None))
    with pytest.raises(StoreError, match="disk is full"):
        store.append_lines_now("a", line("00000001", "a", "one"))
    assert path.read_bytes() == before  # the part written is cut back
    monkeypatch.undo()
    assert store.append_lines_now("a", line("00000001", "a", "one")) is False  # closed after the failure
    asyncio.run(store.append_lines("a", line("00000001", "a", "one")))  # opened again
    after = path.read_bytes()
    monkeypatch.setattr(os, "write", full_disk(foreign))
    with pytest.raises(StoreError, match="disk is full"):
        store.append_lines_now("a", line("00000002", "00000001", "two"))
    monkeypatch.undo()
    # Not cut back (that would take the other writer's line with it): the part is blanked.
    assert path.read_bytes() == after + b" " * 10 + foreign
    assert [e["id"] for e in asyncio.run(FileSessionStore(tmp_path).load("a")) or []] == ["a", "00000001", "f0000001"]
    lease.release()

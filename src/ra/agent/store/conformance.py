"""A conformance kit for :class:`~ra.agent.store.base.SessionStore` implementations.

A host that keeps records in its own store runs ``await check_store(make_store)`` in its tests:
``make_store()`` returns a new, empty store (sync or async). The checks are plain ``assert``
statements (no test framework needed); a failure says which rule the store broke. They cover
what ra relies on: appends keep order and add to (never replace) a record, ``load`` returns
what was appended (equal JSON, a copy), unknown ids give None/False, ``list`` is newest first
and filters by working directory, ``delete`` removes a record, and concurrent appends from
several tasks lose nothing; and, for a store with the optional ``acquire``, that a session's
lease is held by one holder at a time.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from .base import Lease, SessionInfo, SessionInUseError, SessionStore
from .format import header, iso_time

__all__ = ["check_store"]

MakeStore = Callable[[], "SessionStore | Awaitable[SessionStore]"]


def _header(session_id: str, cwd: str, when: float) -> dict[str, Any]:
    return header(session_id, cwd=cwd, model="m", provider="p", profile="generic", ra_version="test", timestamp=when)


def _user(entry_id: str, parent: str | None, text: str, when: float) -> dict[str, Any]:
    return {"type": "user", "id": entry_id, "parent_id": parent, "timestamp": iso_time(when), "content": text}


async def _new(make_store: MakeStore) -> SessionStore:
    store = make_store()
    if inspect.isawaitable(store):
        store = await store
    assert isinstance(store, SessionStore), f"make_store() returned {store!r}, which lacks the SessionStore methods"
    return store


async def check_store(make_store: MakeStore) -> None:
    """Run every check against fresh stores from ``make_store``; raises AssertionError on a failure."""
    for check in (_round_trip, _unknown_ids, _listing, _delete, _concurrent_appends, _copies, _lease):
        await check(await _new(make_store))


async def _round_trip(store: SessionStore) -> None:
    sid = f"conf-{uuid.uuid4().hex}"
    now = time.time()
    head = _header(sid, "/conformance/a", now)
    first = _user("00000001", None, 'hello \u00e9\u4e16 "quoted"\nline two', now)
    await store.append(sid, [head, first])
    second = {**_user("00000002", "00000001", "again", now), "extra": {"nested": [1, 2.5, None, True]}}
    await store.append(sid, [second])
    await store.append(sid, [])
    loaded = await store.load(sid)
    assert loaded == [head, first, second], f"load() after three appends returned {loaded!r}"


async def _unknown_ids(store: SessionStore) -> None:
    sid = f"conf-{uuid.uuid4().hex}"
    assert await store.load(sid) is None, "load() of an unknown session must return None"
    assert await store.delete(sid) is False, "delete() of an unknown session must return False"
    assert await store.list("/conformance/nowhere") == [], "list() of a directory without sessions must be []"


async def _listing(store: SessionStore) -> None:
    base = time.time()
    ids = [f"conf-{uuid.uuid4().hex}" for _ in range(3)]
    cwds = ["/conformance/one", "/conformance/one", "/conformance/two"]
    for index, (sid, cwd) in enumerate(zip(ids, cwds, strict=True)):
        when = base + index
        await store.append(sid, [_header(sid, cwd, when), _user(f"0000000{index}", None, f"task {index}", when)])
        await asyncio.sleep(0.02)  # distinct update times, even for stores that use their own clock
    await store.append(ids[0], [_user("0000000a", "00000000", "later", base + 5)])
    one = await store.list("/conformance/one")
    assert all(isinstance(info, SessionInfo) for info in one), "list() must return SessionInfo objects"
    assert [info.id for info in one] == [ids[0], ids[1]], (
        f"list(cwd) must hold only that directory's sessions, newest (last written) first; got {[i.id for i in one]}"
    )
    assert one[0].title == "task 0" and one[0].cwd == "/conformance/one", f"SessionInfo fields wrong: {one[0]!r}"
    assert one[0].model == "m", f"SessionInfo.model should be the header's model here, got {one[0].model!r}"
    every = {info.id for info in await store.list()}
    assert set(ids) <= every, "list() without a cwd must hold every session"


async def _delete(store: SessionStore) -> None:
    sid = f"conf-{uuid.uuid4().hex}"
    now = time.time()
    await store.append(sid, [_header(sid, "/conformance/del", now)])
    assert await store.delete(sid) is True, "delete() of an existing session must return True"
    assert await store.load(sid) is None, "a deleted session must not load"
    assert sid not in {info.id for info in await store.list()}, "a deleted session must not be listed"


async def _concurrent_appends(store: SessionStore) -> None:
    sid = f"conf-{uuid.uuid4().hex}"
    now = time.time()
    await store.append(sid, [_header(sid, "/conformance/many", now)])

    async def writer(name: str) -> None:
        for index in range(25):
            await store.append(sid, [_user(f"{name}{index:07d}", None, f"{name} {index}", now)])

    await asyncio.gather(*(writer(name) for name in "abcd"))
    loaded = await store.load(sid)
    assert loaded is not None and len(loaded) == 101, f"concurrent appends lost entries: {len(loaded or [])} of 101"
    for name in "abcd":
        mine = [e["content"] for e in loaded if e.get("content", "").startswith(f"{name} ")]
        assert mine == [f"{name} {i}" for i in range(25)], f"one writer's appends were reordered or lost: {mine!r}"


async def _copies(store: SessionStore) -> None:
    sid = f"conf-{uuid.uuid4().hex}"
    now = time.time()
    entry = _user("00000001", None, "original", now)
    await store.append(sid, [_header(sid, "/conformance/copy", now), entry])
    entry["content"] = "changed after append"
    loaded = await store.load(sid)
    assert loaded is not None and loaded[1]["content"] == "original", "the store must keep a copy of what was appended"
    loaded[1]["content"] = "changed after load"
    again = await store.load(sid)
    assert again is not None and again[1]["content"] == "original", "load() must return a copy"


async def _lease(store: SessionStore) -> None:
    """Only for a store with ``acquire``: one lease per session at a time, free again once
    released, and independent across sessions."""
    acquire = getattr(store, "acquire", None)
    if not callable(acquire):
        return
    sid, other = f"conf-{uuid.uuid4().hex}", f"conf-{uuid.uuid4().hex}"
    lease = await acquire(sid)
    assert isinstance(lease, Lease), f"acquire() must return a Lease (with release()), got {lease!r}"
    try:
        await acquire(sid)
    except SessionInUseError:
        pass
    else:
        raise AssertionError("acquire() of a session whose lease is held must raise SessionInUseError")
    second = await acquire(other)  # another session's lease is free
    second.release()
    lease.release()
    lease.release()  # idempotent
    again = await acquire(sid)
    assert isinstance(again, Lease), "acquire() after release() must give the lease again"
    again.release()

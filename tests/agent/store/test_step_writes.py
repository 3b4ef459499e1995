"""A step's write while the record's file is kept open: it goes on right when another process
holds the lock (the session holds the record's lease, so its appends take no file lock), writes
after another writer, repairs what it tore, and stops cleanly when the record is deleted
(``ra sessions delete --force``) - the recorder's per-step write (one append, no await) falls
back to the general one where it cannot go on."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ra.agent import Session
from ra.agent.store import FileSessionStore, load_record
from ra.llm.pricing import ModelPrice
from ra.llm.testing import Step, reply
from ra.llm.types import ToolCall

from .support import Rig, warnings

SRC = str(Path(__file__).resolve().parents[3] / "src")


def steps(count: int, first: int = 0) -> list[Step]:
    return [Step(tool_calls=[ToolCall(f"call-{first + n}", "echo", {"text": f"t{n}"})]) for n in range(count)]


def child(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, text=True)


def chain_ok(entries: list[dict]) -> None:
    """Every entry of the session follows the one before it (foreign entries aside)."""
    own = [e for e in entries[1:] if e["type"] != "custom"]
    for before, after in itertools.pairwise(own):
        assert after["parent_id"] == before["id"]


_HOLD_LOCK = """
import fcntl, sys, time
with open(sys.argv[1], "a") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


async def test_steps_do_not_wait_for_another_process_holding_the_lock_and_lose_nothing(tmp_path: Path) -> None:
    # The session holds its record's lease: it is the only session writing there, and its
    # appends (each one write with O_APPEND) take no file lock, so another's lock cannot stall it.
    rig = Rig([*steps(3), reply("one"), *steps(3, 10), reply("two")])
    store = FileSessionStore(tmp_path)
    session = rig.session(store)
    await session.submit("first")
    path = store.path_of(session.id)
    assert path is not None
    holder = child(_HOLD_LOCK, str(path), "5")
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    started = time.monotonic()
    await session.submit("second")
    assert time.monotonic() - started < 2
    holder.kill()
    holder.wait(timeout=10)
    await session.close()
    record = await load_record(FileSessionStore(tmp_path), session.id)
    assert [type(t).__name__ for t in record.turns] == [type(t).__name__ for t in session.history]
    assert len(record.turns) == 16 and not warnings(session)
    chain_ok([json.loads(line) for line in path.read_text().splitlines()])


_APPEND_AND_TEAR = """
import asyncio, sys
from ra.agent.store import FileSessionStore

async def main(root, sid):
    await FileSessionStore(root).append(sid, [{"type": "custom", "id": "f0000001", "parent_id": None,
        "timestamp": "2026-01-01T00:00:00.000Z", "key": "other", "data": {"n": 1}}])
    with open(FileSessionStore(root).path_of(sid), "a") as f:
        f.write('{"type":"custom","id":"f00')  # a writer killed mid-line

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


async def test_another_process_appending_and_tearing_a_line_between_steps(tmp_path: Path) -> None:
    rig = Rig([*steps(2), reply("one"), *steps(2, 10), reply("two")])
    store = FileSessionStore(tmp_path)
    session = rig.session(store)
    await session.submit("first")
    assert child(_APPEND_AND_TEAR, str(tmp_path), session.id).wait(timeout=30) == 0
    await session.submit("second")  # the file is still open here; its next write repairs the tear
    await session.close()
    path = store.path_of(session.id)
    assert path is not None
    entries = [json.loads(line) for line in path.read_text().splitlines()]  # every line is JSON
    assert [e["id"] for e in entries if e["type"] == "custom"] == ["f0000001"]
    record = await load_record(FileSessionStore(tmp_path), session.id)
    assert len(record.turns) == len(session.history) == 12 and not warnings(session)
    chain_ok(entries)


async def test_a_record_deleted_mid_session_stops_recording_with_one_warning(tmp_path: Path) -> None:
    rig = Rig([*steps(2), reply("one"), *steps(2, 10), reply("two")])
    store = FileSessionStore(tmp_path)
    session = rig.session(store)
    seen = warnings(session)
    await session.submit("first")
    path = store.path_of(session.id)
    assert path is not None
    env = {**os.environ, "RA_SESSIONS_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "ra.cli", "sessions", "delete", "--force", session.id]  # it is live
    deleted = await asyncio.to_thread(subprocess.run, command, env=env, capture_output=True, timeout=60)
    assert deleted.returncode == 0, deleted.stderr
    assert not path.exists()
    result = await session.submit("second")  # goes on, unrecorded
    await session.close()
    assert result.text == "two"
    assert [w.code for w in seen] == ["session_not_persisted"] and "was deleted" in seen[0].message
    assert not path.exists() and store.path_of(session.id) is None  # nothing written anywhere


async def test_a_step_json_cannot_hold_stops_recording_with_one_warning_and_a_valid_record(tmp_path: Path) -> None:
    rig = Rig([Step(tool_calls=[ToolCall("c1", "echo", {"text": float("nan")})]), reply("done")])
    store = FileSessionStore(tmp_path)
    session = rig.session(store)
    seen = warnings(session)
    result = await session.submit("go")
    await session.close()
    assert result.text == "done"
    assert [w.code for w in seen] == ["session_not_persisted"] and "JSON" in seen[0].message
    # The batch that could not be written (the input and the answer) is not in the record; the
    # record is still whole and loads.
    record = await load_record(FileSessionStore(tmp_path), session.id)
    assert record.header["id"] == session.id and record.turns == []


class _SwitchModel:
    """A control that switches the session's model after the first step's tools ran."""

    async def after_step(self, run: Any, response: Any, outcomes: Any) -> None:
        if run.step_count == 1:
            run.model_override = "other-model"


async def test_a_model_switched_between_an_answer_and_its_results_is_recorded_before_the_results(
    tmp_path: Path,
) -> None:
    rig = Rig([*steps(1), reply("done")])
    store = FileSessionStore(tmp_path)
    session = Session(rig.profile, rig.env, rig.client, rig.config(), store=store, controls=[_SwitchModel()])
    session.config.prices["other-model"] = ModelPrice.free()
    await session.submit("go")
    await session.close()
    path = store.path_of(session.id)
    assert path is not None
    kinds = [(e["type"], e.get("model")) for e in map(json.loads, path.read_text().splitlines()[1:])]
    assert kinds[:5] == [
        ("user", None),
        ("assistant", "test-model"),
        ("config", "other-model"),  # from here on: before the results, as the general write puts it
        ("tool_results", None),
        ("assistant", "other-model"),
    ]

"""Records written before assistant entries left out a repeated ``message`` still load: a record
made by that ra (data/v1_record.jsonl, see data/make_v1_record.py) resumes with the context its
live session had (data/v1_context.json); today's records of the same session are smaller and
rebuild the same context."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

from ra.agent import GenericProfile, Session, SessionConfig
from ra.agent.history import turn_messages
from ra.agent.store import FileSessionStore, load_record
from ra.agent.store.files import cwd_slug
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.serialization import messages_to_json
from ra.llm.testing import ScriptedAdapter, reply
from ra.tools.registry import ToolRegistry

DATA = Path(__file__).resolve().parent / "data"


def _maker() -> Any:
    """make_v1_record.py, imported as a module: the recorded session's script, tool and env."""
    spec = importlib.util.spec_from_file_location("make_v1_record", DATA / "make_v1_record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKER = _maker()
CONFIG = SessionConfig(prices={"test-model": ModelPrice(1.0, 2.0)})


def rig(script: list) -> tuple[GenericProfile, Client, ScriptedAdapter]:
    registry = ToolRegistry()
    registry.add("echo", "Echoes its text.", MAKER.SCHEMA, lambda args, ctx: f"echo: {args.get('text', '')}")
    model = ScriptedAdapter(script)
    profile = GenericProfile(
        "scripted", "test-model", registry, system_prompt="You are a test agent.", include_environment=False
    )
    return profile, Client(providers={"scripted": model}), model


def old_record(root: Path) -> str:
    """The old record placed in a store under ``root``; its session id."""
    lines = (DATA / "v1_record.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    folder = root / cwd_slug(head["cwd"])
    folder.mkdir(parents=True, mode=0o700)
    target = folder / f"20261125T231605000000Z_{head['id']}.jsonl"
    shutil.copyfile(DATA / "v1_record.jsonl", target)
    target.chmod(0o600)
    return str(head["id"])


async def test_a_record_written_with_repeated_messages_resumes_with_its_live_context(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    session_id = old_record(tmp_path)
    lines = (DATA / "v1_record.jsonl").read_text().splitlines()
    assert sum('"message":' in line for line in lines) == 6  # every assistant entry repeats itself
    record = await load_record(store, session_id)
    label = next(entry for entry in record.entries if entry["type"] == "label")
    assert record.turn_count == 6 and record.labels == {"after-first": label["parent_id"]}
    assert all(turn.message is not None for turn in record.turns if type(turn).__name__ == "AssistantTurn")

    profile, client, model = rig([reply("Again.")])
    resumed = await Session.open(profile, MAKER.Env(), client, CONFIG, store=store, resume=session_id)
    await resumed.submit("Once more.")
    await resumed.close()
    expected = json.loads((DATA / "v1_context.json").read_text())
    sent = messages_to_json(model.requests[0].messages)
    assert sent[0]["role"] == "system" and sent[-1]["content"][0]["text"] == "Once more."
    assert sent[1:-1] == expected
    # The old entries are kept as they were; the new ones follow them.
    after = (await load_record(store, session_id)).entries
    assert after[: len(lines) - 1] == [json.loads(line) for line in lines[1:]]
    assert "message" not in after[-2]


async def test_the_same_session_today_writes_each_call_once_and_resumes_the_same(tmp_path: Path) -> None:
    env = MAKER.Env()
    profile, client, _ = rig(MAKER.script())
    store = FileSessionStore(tmp_path)
    live = Session(profile, env, client, CONFIG, store=store)
    await live.submit("Echo some things.")
    await live.label("after-first")
    await live.submit("Thanks.")
    context = messages_to_json([m for turn in live.history for m in turn_messages(turn)])
    await live.close()
    assert context == json.loads((DATA / "v1_context.json").read_text())

    path = store.path_of(live.id)
    assert path is not None
    lines = path.read_text().splitlines()
    # Only the answer with a signed thinking block keeps its provider message.
    assert sum('"message":' in line for line in lines) == 1
    assert path.stat().st_size < (DATA / "v1_record.jsonl").stat().st_size * 0.9

    profile, client, model = rig([reply("Again.")])
    resumed = await Session.open(profile, env, client, CONFIG, store=store, resume=live.id)
    await resumed.submit("Once more.")
    await resumed.close()
    assert messages_to_json(model.requests[0].messages)[1:-1] == context

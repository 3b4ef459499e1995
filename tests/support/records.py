"""Session records for tests: run a scripted session for real, write its turns as a JSONL record
(``ra.agent.store.format``), read a record back. The store's own loader lives in ``ra.agent.store``;
this is only what the replay tests need before it is there. :func:`record_tree` records a session
that spawns subagents to a store (each agent scripted by its first user message)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ra.agent import Session, SessionConfig
from ra.agent.history import Turn
from ra.agent.store.format import header, new_entry_id, turn_from_entry, turn_to_entry
from ra.env.local import LocalExecutionEnvironment
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.testing import ScriptedAdapter, Step, StepLike, call, reply
from ra.llm.types import Request
from ra.profiles import create_anthropic_profile

MODEL = "test-model"


def profile() -> Any:
    """A fresh profile with real file and shell tools (read_file, edit_file, write_file, shell)."""
    return create_anthropic_profile(MODEL)


def config(**values: Any) -> SessionConfig:
    cfg = SessionConfig(**values)
    cfg.prices.setdefault(MODEL, ModelPrice.free())
    return cfg


async def run_session(
    workdir: Path,
    script: Sequence[StepLike],
    inputs: Iterable[str],
    *,
    session_config: SessionConfig | None = None,
    controls: Iterable[Any] = (),
    setup: Any = None,
) -> list[Turn]:
    """Run a real Session (scripted model, real tools on ``workdir``); return its turns.
    ``setup(session)`` runs before the first input (e.g. to let a script step reach the session)."""
    model = ScriptedAdapter(script)
    session = Session(
        profile(),
        LocalExecutionEnvironment(workdir),
        Client(providers={"anthropic": model}),
        session_config or config(),
        controls=controls,
    )
    if setup is not None:
        setup(session)
    try:
        for text in inputs:
            await session.submit(text)
    finally:
        await session.close()
    assert model.remaining == 0, "the script was not used up"
    return list(session.history.turns)


def write_record(path: Path, turns: Sequence[Turn], *, cwd: str = "/project", profile_name: str = "anthropic") -> Path:
    """``turns`` as a record file: the header, then one entry per turn, each the child of the last."""
    lines = [
        header(
            "s-test",
            cwd=cwd,
            model=MODEL,
            provider="anthropic",
            profile=profile_name,
            ra_version="test",
            timestamp=time.time(),
        )
    ]
    parent: str | None = None
    for turn in turns:
        entry_id = new_entry_id()
        lines.append(turn_to_entry(turn, entry_id, parent))
        parent = entry_id
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def read_record(path: Path) -> list[Turn]:
    """The turns of a record written by :func:`write_record` (one path, no branches)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [turn_from_entry(json.loads(line), f"line {n}") for n, line in enumerate(lines[1:], start=2)]


def through_record(tmp: Path, turns: Sequence[Turn]) -> list[Turn]:
    """``turns`` written as a record and read back (what a replay gets from a file)."""
    return read_record(write_record(tmp / "record.jsonl", turns))


# -- sessions with subagents ---------------------------------------------------------------------

TASK = "copy the note"
INNER = "count the words"


def first_user_text(request: Request) -> str:
    return next(m.text for m in request.messages if m.role == "user")


def last_agent_id(request: Request) -> str:
    results = [p.tool_result.content for m in request.messages for p in m.content if p.tool_result is not None]
    return json.loads(str(results[-1]))["agent_id"]


class Router:
    """Answers each request from the script of the agent that sent it (by its first user message)."""

    def __init__(self, scripts: dict[str, list[Any]]) -> None:
        self.scripts = scripts

    def __call__(self, request: Request) -> StepLike:
        steps = self.scripts[first_user_text(request)]
        item = steps.pop(0)
        return item(request) if callable(item) and not isinstance(item, Step) else item


def parent_script(task: str = TASK) -> list[Any]:
    return [
        call("spawn_agent", _id="sp1", task=task),
        lambda request: call("wait", _id="w1", agent_id=last_agent_id(request)),
        reply("done"),
    ]


CHILD = [
    call("shell", _id="c1", command="cat note.txt"),
    call("write_file", _id="c2", file_path="copy.txt", content="copied\n"),
    reply("written"),
]


async def record_tree(work: Path, store: Any, scripts: dict[str, list[Any]], **values: Any) -> str:
    """Run a scripted session that spawns subagents (``scripts``: each agent's steps, by its first
    user message; the session's is "delegate") for real, recorded to ``store``; return its id."""
    router = Router(scripts)
    model = ScriptedAdapter(default=router)
    session = Session(
        profile(),
        LocalExecutionEnvironment(work),
        Client(providers={"anthropic": model}),
        config(**values),
        store=store,
    )
    try:
        await session.submit("delegate")
    finally:
        await session.close()
    assert all(not steps for steps in scripts.values()), "a script was not used up"
    return session.id

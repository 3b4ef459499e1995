"""Secrets never reach a record, including ones that appear after the session started."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from ra.agent.store import FileSessionStore
from ra.llm.redaction import remember_secret
from ra.llm.testing import call, reply

from ..support import default_tools
from .support import Rig


def printer_tools():  # type: ignore[no-untyped-def]
    tools = default_tools()
    tools.add("show", "Print a variable.", None, lambda args, ctx: f"{args['name']}={os.environ.get(args['name'])}")
    return tools


async def test_a_key_set_between_steps_is_redacted_from_the_next_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("first"), call("show", name="LATE_ACCESS_TOKEN"), reply("ok")], tools=printer_tools())
    session = rig.session(store)
    await session.submit("one")  # the redaction cache is warm now
    late = "tok-" + uuid.uuid4().hex
    monkeypatch.setenv("LATE_ACCESS_TOKEN", late)
    await session.submit("two")
    await session.close()
    path = store.path_of(session.id)
    assert path is not None
    text = path.read_text()
    assert late not in text and "LATE_ACCESS_TOKEN=[REDACTED]" in text


async def test_a_key_given_in_code_is_redacted_too(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    key = "in-code-" + uuid.uuid4().hex
    rig = Rig([reply(f"I was told {key}")])
    session = rig.session(store)
    remember_secret(key)  # what an adapter does with api_key=...
    await session.submit("go")
    await session.close()
    path = store.path_of(session.id)
    assert path is not None
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    assert key not in json.dumps(entries) and entries[2]["content"] == "I was told [REDACTED]"

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


# Redaction looks for each secret's JSON-encoded form in the encoded line: a secret holding
# characters JSON escapes (quote, backslash, control characters) appears escaped there, so
# these are the cases a text search on the raw value would miss.
TRICKY = [
    'quo"te-' + "q" * 8,
    "back\\slash-" + "b" * 8,
    "new\nline\ttab-" + "n" * 8,
    "uni-çé€😀-" + "u" * 8,
    "ctl-\x01\x1f-" + "c" * 8,
]


@pytest.mark.parametrize("secret", TRICKY, ids=["quote", "backslash", "newline-tab", "unicode", "control"])
async def test_a_secret_json_escapes_is_redacted_in_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret: str
) -> None:
    monkeypatch.setenv("TRICKY_API_KEY", secret)
    store = FileSessionStore(tmp_path)
    rig = Rig([call("show", name="TRICKY_API_KEY"), reply(f"it is {secret}!")], tools=printer_tools())
    session = rig.session(store)
    await session.submit(f"the key is <{secret}>")
    await session.close()
    path = store.path_of(session.id)
    assert path is not None
    text = path.read_text(encoding="utf-8")
    entries = [json.loads(line) for line in text.splitlines()]  # every line still valid JSON
    assert secret not in text and json.dumps(secret, ensure_ascii=False)[1:-1] not in text
    assert secret not in json.dumps(entries, ensure_ascii=False)
    by_type = {e["type"]: e for e in entries}
    assert by_type["user"]["content"] == "the key is <[REDACTED]>"
    assert by_type["tool_results"]["results"][0]["content"] == "TRICKY_API_KEY=[REDACTED]"
    assert entries[-2]["content"] == "it is [REDACTED]!"


async def test_a_match_inside_an_escape_is_not_redacted_and_the_line_stays_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "\n" + "nSECRET..." encodes to ...\\nnSECRET...: the text holds "nSECRET" right after the
    # escape's backslash only when the secret starts the escape - replacing there would cut
    # the escape in two. Here the string holds a newline then "nope...", not the secret.
    secret = "nope" + uuid.uuid4().hex[:12]
    monkeypatch.setenv("ESCAPE_API_KEY", secret)
    store = FileSessionStore(tmp_path)
    rig = Rig([reply("done")])
    session = rig.session(store)
    tail = secret[1:]  # "\n" + tail encodes to "\\n" + tail, which ends in the secret's text
    await session.submit("line one\n" + tail + " and also " + secret)
    await session.close()
    path = store.path_of(session.id)
    assert path is not None
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    user = next(e for e in entries if e["type"] == "user")
    assert user["content"] == "line one\n" + tail + " and also [REDACTED]"


async def test_a_secret_in_a_key_of_tool_arguments_is_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "keyed-" + uuid.uuid4().hex
    monkeypatch.setenv("KEYED_API_KEY", secret)
    store = FileSessionStore(tmp_path)
    rig = Rig([call("show", **{"name": "X", secret: 1}), reply("ok")], tools=printer_tools())
    session = rig.session(store)
    await session.submit("go")
    await session.close()
    path = store.path_of(session.id)
    assert path is not None
    text = path.read_text(encoding="utf-8")
    assert secret not in text and all(json.loads(line) for line in text.splitlines())

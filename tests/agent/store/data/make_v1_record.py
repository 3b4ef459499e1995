"""Writes ``v1_record.jsonl`` and ``v1_context.json``: a record as ra wrote it before assistant
entries left out a ``message`` that repeats their text and calls (commit 02ac9c2), and the
context that session sent. tests/agent/store/test_compat.py loads them with today's code.

Run with that ra first on the path (``git archive 02ac9c2 src | tar -x -C /tmp/old``):
``PYTHONPATH=/tmp/old/src python tests/agent/store/data/make_v1_record.py``.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from ra.agent import GenericProfile, Session, SessionConfig
from ra.agent.history import turn_messages
from ra.agent.store import FileSessionStore
from ra.llm.client import Client
from ra.llm.pricing import ModelPrice
from ra.llm.serialization import messages_to_json
from ra.llm.testing import ScriptedAdapter, Step
from ra.llm.types import (
    ContentKind,
    ContentPart,
    FinishReason,
    Message,
    Response,
    Role,
    ToolCall,
    ToolCallData,
    Usage,
)
from ra.tools.registry import ToolRegistry

HERE = Path(__file__).resolve().parent
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


def provider_call() -> Response:
    """An answer whose call carries provider data (as the Chat Completions adapter's do)."""
    data = ToolCallData("call_pd", "echo", {"text": 'ünïcode "quoted"\n'}, "function", {"raw_arguments": "{}"})
    message = Message(Role.ASSISTANT, [ContentPart(ContentKind.TEXT, text="Echoing."), ContentPart.of_tool_call(data)])
    usage = Usage(input_tokens=40, output_tokens=7, total_tokens=47, cache_read_tokens=3)
    return Response("resp-2", "test-model", "scripted", message, FinishReason("tool_calls", "tool_calls"), usage)


def script() -> list[Step | Response]:
    """The model's answers: signed thinking, a call with provider data, malformed arguments, two
    calls (one to an unknown tool), a final text; then a second input's answer."""
    return [
        Step(
            text="Let me look.",
            reasoning="Thinking about it.",
            reasoning_signature="sig-abc",
            tool_calls=[ToolCall("call_1", "echo", {"text": "one"})],
        ),
        provider_call(),
        Step(tool_calls=[ToolCall("call_bad", "echo", {}, "{not json", "function", "arguments are not valid JSON")]),
        Step(tool_calls=[ToolCall("call_2", "echo", {"text": "two"}), ToolCall("call_3", "nope", {})]),
        Step(text="Done."),
        Step(text="You are welcome."),
    ]


async def main() -> None:
    registry = ToolRegistry()
    registry.add("echo", "Echoes its text.", SCHEMA, lambda args, ctx: f"echo: {args.get('text', '')}")
    model = ScriptedAdapter(script())
    profile = GenericProfile(
        "scripted", "test-model", registry, system_prompt="You are a test agent.", include_environment=False
    )
    config = SessionConfig(prices={"test-model": ModelPrice(1.0, 2.0)})
    with tempfile.TemporaryDirectory() as tmp:
        store = FileSessionStore(tmp)
        session = Session(profile, Env(), Client(providers={"scripted": model}), config, store=store)
        await session.submit("Echo some things.")
        await session.label("after-first")
        await session.submit("Thanks.")
        context = messages_to_json([m for turn in session.history for m in turn_messages(turn)])
        await session.close()
        path = store.path_of(session.id)
        assert path is not None
        (HERE / "v1_record.jsonl").write_bytes(path.read_bytes())
    (HERE / "v1_context.json").write_text(json.dumps(context, indent=1, ensure_ascii=False) + "\n")


class Env:
    """Just enough of an execution environment for a session whose only tool is in-process."""

    def working_directory(self) -> str:
        return "/project"

    def platform(self) -> str:
        return "linux"

    def os_version(self) -> str:
        return "test"

    async def terminate_all(self) -> None:
        return None


if __name__ == "__main__":
    asyncio.run(main())

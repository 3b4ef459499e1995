"""``query()`` programs, written as the Claude Agent SDK's documentation writes them, run on ``ra``."""

from __future__ import annotations

import asyncio
from pathlib import Path

from claude_agent_sdk import AssistantMessage, ResultMessage, SystemMessage, TextBlock, query

from tests.claude_sdk.support import BOUND_S, options
from tests.cli.support import enqueue_text
from tests.support.replay import ReplayServer


async def _collect(prompt: str, opts: object) -> list[object]:
    out = []
    async with asyncio.timeout(BOUND_S):
        async for message in query(prompt=prompt, options=opts):
            out.append(message)
    return out


def test_a_plain_answer(replay_server: ReplayServer, tmp_path: Path) -> None:
    enqueue_text(replay_server, "Paris is the capital of France.")
    errors: list[str] = []
    messages = asyncio.run(
        _collect("What is the capital of France?", options(replay_server, tmp_path, stderr_lines=errors))
    )
    init = messages[0]
    assert isinstance(init, SystemMessage) and init.subtype == "init", errors
    assert init.data["model"] == "test-model" and init.data["permissionMode"] == "default"
    texts = [b.text for m in messages if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, TextBlock)]
    assert texts == ["Paris is the capital of France."]
    result = messages[-1]
    assert isinstance(result, ResultMessage)
    assert (result.subtype, result.is_error, result.result) == ("success", False, "Paris is the capital of France.")
    assert result.num_turns == 1 and result.session_id == init.data["session_id"]
    assert result.usage["input_tokens"] == 100

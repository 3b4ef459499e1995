"""Answers a broken or hostile server can send: errors inside a 200 answer that repeat the key
the adapter was given in code, and JSON nested deeper than Python's recursion limit."""

from __future__ import annotations

import json
import os

import pytest

from ra.llm.errors import SDKError
from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
from ra.llm.types import Message, Request
from tests.support.replay import ReplayServer

KEY = "sk-proj-only-in-code-0123456789abcdef"
SSE = {"content-type": "text/event-stream"}
JSON = {"content-type": "application/json"}
REQUEST = Request("m", [Message.user("hi")])


async def _error(adapter: OpenAICompatibleAdapter, stream: bool) -> SDKError:
    with pytest.raises(SDKError) as info:
        if stream:
            async for _ in adapter.stream(REQUEST):
                pass
        else:
            await adapter.complete(REQUEST)
    return info.value


@pytest.mark.parametrize("stream", [False, True])
async def test_a_key_given_in_code_is_redacted_from_an_error_inside_a_200_answer(
    replay_server: ReplayServer, stream: bool
) -> None:
    assert KEY not in os.environ.values()
    error = {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}
    if stream:
        replay_server.enqueue(200, f"data: {json.dumps(error)}\n\n", SSE)
    else:
        replay_server.enqueue(200, error)
    exc = await _error(OpenAICompatibleAdapter(KEY, f"{replay_server.base_url}/v1"), stream)
    assert KEY not in str(exc) and KEY not in repr(getattr(exc, "raw", None))
    assert "[REDACTED]" in str(exc)


DEEP = "[" * 200_000 + "]" * 200_000


@pytest.mark.parametrize(
    ("status", "body", "headers", "stream"),
    [
        (200, DEEP, JSON, False),
        (500, DEEP, JSON, False),
        (200, 'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: ' + DEEP + "\n\ndata: [DONE]\n\n", SSE, True),
    ],
    ids=["answer", "error-body", "stream-chunk"],
)
async def test_json_deeper_than_the_recursion_limit_is_a_typed_error(
    replay_server: ReplayServer, status: int, body: str, headers: dict[str, str], stream: bool
) -> None:
    replay_server.enqueue(status, body, headers)
    await _error(OpenAICompatibleAdapter("k", f"{replay_server.base_url}/v1"), stream)

"""reasoning_effort "xhigh" (offered for every provider) never fails mid-run (hardening item 9).

OpenAI's newest models take "xhigh" as it is; Anthropic and Gemini have no such level, so it maps
to their strongest setting. Checked on the request each adapter sends to a real server.
"""

from __future__ import annotations

import json

from ra.llm.client import Client
from ra.llm.types import Message, Request
from tests.support.replay import ReplayServer

ANTHROPIC_OK = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
GEMINI_OK = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1},
}


async def _sent(server: ReplayServer, provider: str, adapter, model: str) -> dict:  # type: ignore[no-untyped-def]
    client = Client(providers={provider: adapter})
    request = Request(model=model, messages=[Message.user("hi")], provider=provider, reasoning_effort="xhigh")
    response = await client.complete(request)
    await client.close()
    assert response.text == "ok"
    return json.loads(server.requests[-1].body)


async def test_anthropic_maps_xhigh_to_its_largest_thinking_budget(replay_server: ReplayServer) -> None:
    from ra.llm.providers.anthropic import AnthropicAdapter

    replay_server.enqueue(200, ANTHROPIC_OK)
    body = await _sent(
        replay_server, "anthropic", AnthropicAdapter(api_key="k", base_url=replay_server.base_url), "claude-sonnet-4-5"
    )
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 32768}
    assert body["max_tokens"] > 32768


async def test_gemini_maps_xhigh_to_its_strongest_level(replay_server: ReplayServer) -> None:
    from ra.llm.providers.gemini import GeminiAdapter

    for model, expected in (
        ("gemini-3-pro-preview", {"thinkingLevel": "HIGH"}),
        ("gemini-2.5-pro", {"thinkingBudget": 24576}),
    ):
        replay_server.enqueue(200, GEMINI_OK)
        body = await _sent(replay_server, "gemini", GeminiAdapter(api_key="k", base_url=replay_server.base_url), model)
        thinking = body["generationConfig"]["thinkingConfig"]
        assert {k: thinking[k] for k in expected} == expected, model


async def test_openai_adapters_pass_xhigh_through(replay_server: ReplayServer) -> None:
    from ra.llm.providers.openai_chat import OpenAICompatibleAdapter

    replay_server.enqueue(
        200,
        {
            "id": "c",
            "object": "chat.completion",
            "model": "gpt-5.2",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        },
    )
    adapter = OpenAICompatibleAdapter(base_url=f"{replay_server.base_url}/v1")
    body = await _sent(replay_server, "openai-compatible", adapter, "gpt-5.2")
    assert body["reasoning_effort"] == "xhigh"

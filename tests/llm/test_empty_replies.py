"""A Chat Completions reply that answers nothing - no choice, only ``[DONE]``, a null message or
delta - is a malformed reply, never an empty answer (which the agent would take as "completed")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ra.llm.errors import ProviderError, StreamError
from ra.llm.providers.openai_chat import OpenAICompatibleAdapter
from ra.llm.shape import MalformedResponseError, MalformedStreamError
from ra.llm.types import Message, Request
from tests.cli.support import clean_env, jsonl, run_ra
from tests.support.replay import ReplayServer

SSE = {"content-type": "text/event-stream"}
REQUEST = Request("m", [Message.user("hi")])


def _chunk(choices: list[object] | None) -> str:
    body: dict[str, object] = {"id": "c1", "object": "chat.completion.chunk", "model": "m"}
    if choices is not None:
        body["choices"] = choices
    return f"data: {json.dumps(body)}\n\n"


USAGE = 'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":0,"total_tokens":3}}\n\n'
EMPTY_STREAMS = {
    "only-done": "data: [DONE]\n\n",
    "no-choices": _chunk([]) + _chunk(None) + USAGE + "data: [DONE]\n\n",
    "null-delta": _chunk([{"index": 0, "delta": None, "finish_reason": None}]) + "data: [DONE]\n\n",
    "other-index-only": _chunk([{"index": 1, "delta": {"content": "x"}}]) + "data: [DONE]\n\n",
}


@pytest.mark.parametrize("body", EMPTY_STREAMS.values(), ids=EMPTY_STREAMS.keys())
async def test_a_stream_that_carries_no_choice_is_malformed(replay_server: ReplayServer, body: str) -> None:
    replay_server.enqueue(200, body, SSE)
    adapter = OpenAICompatibleAdapter("k" * 8, f"{replay_server.base_url}/v1")
    try:
        with pytest.raises(MalformedStreamError, match="no chunk carried a choice"):
            async for _ in adapter.stream(REQUEST):
                pass
    finally:
        await adapter.close()


async def test_an_empty_but_real_answer_still_completes(replay_server: ReplayServer) -> None:
    """A choice that finishes without text is the model's (empty) answer, not a broken reply."""
    replay_server.enqueue(200, _chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]) + "data: [DONE]\n\n", SSE)
    adapter = OpenAICompatibleAdapter("k" * 8, f"{replay_server.base_url}/v1")
    try:
        events = [e async for e in adapter.stream(REQUEST)]
    finally:
        await adapter.close()
    assert events[-1].response is not None and events[-1].response.text == ""


@pytest.mark.parametrize(
    "body",
    [
        {"id": "r", "choices": [{"index": 0, "message": None, "finish_reason": "stop"}]},
        {"id": "r", "choices": [{"index": 0, "finish_reason": "stop"}]},
    ],
    ids=["null-message", "no-message"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream-answered-as-json"])
async def test_a_reply_whose_choice_has_no_message_is_malformed(
    replay_server: ReplayServer, body: dict[str, object], stream: bool
) -> None:
    replay_server.enqueue(200, body)
    adapter = OpenAICompatibleAdapter("k" * 8, f"{replay_server.base_url}/v1")
    try:
        with pytest.raises(MalformedResponseError, match="malformed reply"):
            if stream:
                async for _ in adapter.stream(REQUEST):
                    pass
            else:
                await adapter.complete(REQUEST)
    finally:
        await adapter.close()
    assert issubclass(MalformedResponseError, ProviderError) and issubclass(MalformedStreamError, StreamError)


@pytest.mark.parametrize(
    "body", [EMPTY_STREAMS["only-done"], EMPTY_STREAMS["no-choices"]], ids=["only-done", "no-choices"]
)
def test_the_command_reports_an_empty_reply_as_an_error(replay_server: ReplayServer, tmp_path: Path, body: str) -> None:
    """Through the real ``ra`` (before: status "completed", an empty answer, exit 0). A stream
    with tools that breaks off before any event is asked again without streaming (llama.cpp's
    server refuses that way); the second answer, a null message, is malformed too: exit 3."""
    replay_server.enqueue(200, body, SSE)
    replay_server.enqueue(200, {"id": "r", "choices": [{"index": 0, "message": None, "finish_reason": "stop"}]})
    args = ["--json", "--base-url", f"{replay_server.base_url}/v1", "--model", "m", "hi"]

    done = run_ra(args, clean_env(tmp_path / "home"), cwd=tmp_path, timeout=30)

    result = jsonl(done.stdout)[-1]
    assert done.returncode == 3, done.stderr
    assert result["status"] == "error" and result["text"] is None
    assert "malformed reply" in result["error"], result["error"]
    assert [bool(r.json().get("stream")) for r in replay_server.requests] == [True, False]

"""Messages to JSON and back (``ra.llm.serialization``): equal field for field, real replies included."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ra.llm.errors import SDKError
from ra.llm.serialization import message_from_json, message_to_json, messages_from_json, messages_to_json
from ra.llm.types import (
    AudioData,
    ContentKind,
    ContentPart,
    DocumentData,
    ImageData,
    Message,
    Request,
    Role,
    StreamEventType,
    ThinkingData,
    ToolCallData,
)
from tests.support.replay import CASSETTES, ReplayServer, load_cassette


def round_trip(message: Message) -> Message:
    return message_from_json(json.loads(json.dumps(message_to_json(message))))


def _adapter(api: str, server: ReplayServer) -> Any:
    if api == "openai-chat":
        from ra.llm.providers.openai_chat import OpenAICompatibleAdapter

        return OpenAICompatibleAdapter("k", f"{server.base_url}/v1")
    if api == "openai-responses":
        from ra.llm.providers.openai_responses import OpenAIAdapter

        return OpenAIAdapter("k", f"{server.base_url}/v1")
    if api == "anthropic-messages":
        from ra.llm.providers.anthropic import AnthropicAdapter

        return AnthropicAdapter("k", server.base_url)
    from ra.llm.providers.gemini import GeminiAdapter

    return GeminiAdapter("k", server.base_url)


@pytest.mark.parametrize("api", ["openai-chat", "openai-responses", "anthropic-messages", "gemini"])
async def test_every_recorded_reply_survives_a_save(api: str, replay_server: ReplayServer) -> None:
    """Each successful reply of the provider cassettes, through its real adapter (streamed replies
    through the stream): the assistant message comes back from JSON equal to what the adapter
    built - signatures, provider data and all."""
    adapter = _adapter(api, replay_server)
    kinds: set[str] = set()
    count = 0
    for path in sorted((CASSETTES / api).glob("*.yaml")):
        for interaction in load_cassette(path):
            response = interaction.response
            if response.status != 200 or not response.body:
                continue
            replay_server.enqueue_response(response)
            request = Request("m", [Message.user("go")])
            try:
                if response.is_sse:
                    final = [e async for e in adapter.stream(request) if e.type is StreamEventType.FINISH]
                    if not final or final[0].response is None:
                        continue
                    message = final[0].response.message
                else:
                    message = (await adapter.complete(request)).message
            except SDKError:
                continue  # a recorded refusal or a reply for another kind of request
            assert round_trip(message) == message, path.name
            kinds.update(str(p.kind) for p in message.content)
            count += 1
    assert count >= 10
    assert {"text", "tool_call", "thinking"} <= kinds  # every API's cassettes carry reasoning


def test_every_part_kind_and_field() -> None:
    png = b"\x89PNG\r\n\x1a\nbytes"
    messages = [
        Message.system("be brief"),
        Message(Role.DEVELOPER, [ContentPart.of_text("dev")], name="ops"),
        Message.user(
            [
                ContentPart.of_text("look"),
                ContentPart.of_image(ImageData(data=png, media_type="image/png", detail="high")),
                ContentPart.of_image(ImageData(url="https://example.com/a.png")),
                ContentPart(ContentKind.AUDIO, audio=AudioData(data=b"RIFF", media_type="audio/wav")),
                ContentPart(
                    ContentKind.DOCUMENT, document=DocumentData(url="/tmp/a.pdf", media_type="application/pdf")
                ),
            ]
        ),
        Message.assistant(
            [
                ContentPart.of_thinking(ThinkingData("plan", signature="sig==", provider_data={"id": "rs_1"})),
                ContentPart.of_thinking(ThinkingData("opaque", redacted=True)),
                ContentPart.of_text("calling"),
                ContentPart.of_tool_call(ToolCallData("c1", "read", {"path": "a", "n": [1, 2.5, None]})),
                ContentPart.of_tool_call(ToolCallData("c2", "bad", '{"path": ', provider_data={"sig": "x"})),
            ]
        ),
        Message.tool_result("c1", {"lines": ["a"], "ok": True}, name="read"),
        Message.tool_result("c2", "not JSON", True, image_data=png, image_media_type="image/png"),
        Message.user([ContentPart("x-host-note", text="a host's own kind")]),
    ]
    back = messages_from_json(json.loads(json.dumps(messages_to_json(messages))))
    assert back == messages
    assert back[3].content[0].kind is ContentKind.THINKING and back[3].content[1].kind is ContentKind.REDACTED_THINKING
    assert back[-1].content[0].kind == "x-host-note"
    assert message_to_json(Message.user("hi")) == {"role": "user", "content": [{"kind": "text", "text": "hi"}]}


@pytest.mark.parametrize(
    ("obj", "named"),
    [
        ([{"role": "robot", "content": []}], "messages[0]: message.role: unknown role 'robot'"),
        ([{"role": "user"}], "message.content: missing"),
        ([{"role": "user", "content": [{"text": "x"}]}], "message.content[0].kind: missing"),
        (
            [{"role": "assistant", "content": [{"kind": "tool_call", "tool_call": {"id": "c", "name": 3}}]}],
            "message.content[0].tool_call.name: expected str, got int",
        ),
        (
            [{"role": "user", "content": [{"kind": "image", "image": {"data_base64": "!!"}}]}],
            "message.content[0].image.data_base64: not valid base64",
        ),
        (
            [{"role": "user", "content": [{"kind": "image", "image": {}}]}],
            "message.content[0].image: ImageData needs exactly one of url or data",
        ),
        ({"role": "user"}, "messages: expected a list"),
    ],
)
def test_what_was_not_written_by_ra_names_the_field(obj: Any, named: str) -> None:
    with pytest.raises(ValueError) as info:
        messages_from_json(obj)
    assert named in str(info.value)

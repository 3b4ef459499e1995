"""The Anthropic adapter's request bytes: joined from cached per-message JSON, equal to a fresh
translation's (and to encoding ``build_body``'s dict) byte for byte, while a step looks only at
what is new in the history."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from ra.llm.errors import InvalidRequestError
from ra.llm.http import AdapterTimeout
from ra.llm.providers.anthropic import AnthropicAdapter
from ra.llm.providers.conversations import CACHE_LIMIT
from ra.llm.types import (
    AudioData,
    ContentKind,
    ContentPart,
    DocumentData,
    Message,
    Request,
    Role,
    ThinkingData,
    ToolCallData,
    ToolChoice,
    ToolDefinition,
)
from tests.llm.encoder_kit import (
    check_a_vouched_conversation_is_not_read_again,
    check_a_vouched_prefix_that_is_not_the_same_objects_is_translated_again,
)
from tests.support.replay import ReplayServer

TOOLS = [
    ToolDefinition("look", "Look something up", {"type": "object", "properties": {"n": {"type": "integer"}}}),
    ToolDefinition("fix", "Fix it", {"type": "object", "properties": {"path": {"type": "string"}}}),
]
AUTO_CACHE = {"on": None, "off": {"anthropic": {"auto_cache": False}}}


def dumps(value: Any) -> bytes:
    """How the HTTP layer encodes a dict body (ra.llm.http)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def fresh_bytes(request: Request, *, stream: bool = True) -> bytes:
    """The body a new adapter (nothing cached) sends for ``request``, checked against encoding
    its ``build_body`` dict the way the adapter sent it before it had a cache."""
    adapter = AnthropicAdapter(api_key="k")
    encoded = adapter.encode_body(request, stream=stream)
    assert encoded == dumps(AnthropicAdapter(api_key="k").build_body(request, stream=stream))
    return encoded


def agent_step(i: int) -> list[Message]:
    """One step's new messages: signed thinking, one or two tool calls and their results (two
    tool messages merge into one user message), every third result with an image, now and then
    a user message that merges with the results, redacted thinking, unsigned thinking that is not
    sent, a document, and text that is not ASCII."""
    calls = [ToolCallData(f"c{i}", "look", {"n": i, "note": "über ✓"})]
    if i % 2:
        calls.append(ToolCallData(f"d{i}", "fix", f'{{"path": "src/m{i}.py"}}'))  # arguments as a string
    parts = [ContentPart.of_thinking(ThinkingData(f"thinking {i}", f"sig-{i}+/=="))]
    if i % 5 == 4:
        parts.append(ContentPart.of_thinking(ThinkingData(f"opaque {i}", None, True)))
    parts.append(ContentPart.of_text(f"step {i} — «looking»"))
    parts += [ContentPart.of_tool_call(c) for c in calls]
    step = [Message.assistant(parts)]
    for call in calls:
        image = b"\x89PNG" + bytes([i % 256]) * 64 if i % 3 == 0 and call.name == "look" else None
        result = Message.tool_result(call.id, f"result {i}\n", image_data=image, image_media_type="image/png")
        result.name = call.name
        step.append(result)
    if i % 4 == 3:
        step.append(Message.user(f"go on {i}"))
    if i % 7 == 6:
        notes = DocumentData(data=b"notes", media_type="text/plain")
        step.append(Message.user([ContentPart(ContentKind.DOCUMENT, document=notes)]))
    if i % 6 == 5:
        # Only unsigned thinking: nothing is sent for it, and the run of user messages goes on.
        step.append(Message.assistant([ContentPart.of_thinking(ThinkingData("no signature"))]))
        step.append(Message.user("and then"))
    return step


def start() -> list[Message]:
    return [Message.system("sys"), Message.user("task ünïcode")]


class CountingCache(dict[int, Any]):
    """The adapter's translation cache, counting how many messages a request looks up."""

    lookups = 0

    def get(self, key: int, default: Any = None) -> Any:
        self.lookups += 1
        return super().get(key, default)


@pytest.mark.parametrize("cache", sorted(AUTO_CACHE))
@pytest.mark.parametrize("choice", [None, "none"])
def test_each_step_walks_only_the_new_messages(cache: str, choice: str | None) -> None:
    """Over 120 growing steps the bytes stay those of a fresh translation and of encoding
    ``build_body``, with breakpoints on or off (and with tool_choice none, which depends on tool
    blocks anywhere in the history), while each message is looked up once in all."""
    adapter = AnthropicAdapter(api_key="k")
    counting = CountingCache()
    adapter._msg_cache = counting
    history = start()
    added = len(history)
    tool_choice = ToolChoice.none() if choice == "none" else None
    for i in range(120):
        request = Request(
            "m", history, tools=TOOLS, tool_choice=tool_choice, max_tokens=2000, provider_options=AUTO_CACHE[cache]
        )
        assert adapter.encode_body(request, stream=True) == fresh_bytes(request), i
        step = agent_step(i)
        history.extend(step)
        added += len(step)
    assert counting.lookups <= added
    body = json.loads(adapter.encode_body(Request("m", history, provider_options=AUTO_CACHE[cache]), stream=False))
    marks = [b for m in body["messages"] for b in m["content"] if "cache_control" in b]
    assert len(marks) == (2 if cache == "on" else 0)


def test_a_request_that_ends_with_the_assistant() -> None:
    """A prefilled answer: the last two user messages, where the breakpoints go, are then the
    second and fourth wire messages from the end."""
    adapter = AnthropicAdapter(api_key="k")
    history = start()
    for i in range(12):
        history.extend(agent_step(i))
        for prefill in ("Sure", ""):
            request = Request("m", [*history, Message.assistant(prefill)], tools=TOOLS)
            assert adapter.encode_body(request, stream=True) == fresh_bytes(request), i


def test_signed_thinking_goes_back_byte_for_byte() -> None:
    signature = 'EqQBCkYIBxgCKkB+/=\\u00e9"é'
    thinking = ThinkingData("I should look — carefully.\n", signature)
    assistant = Message.assistant(
        [ContentPart.of_thinking(thinking), ContentPart.of_tool_call(ToolCallData("t", "look", {}))]
    )
    history = [Message.user("q"), assistant, Message.tool_result("t", "ok")]
    adapter = AnthropicAdapter(api_key="k")
    for _ in range(3):
        data = adapter.encode_body(Request("m", history), stream=False)
        [block] = [b for m in json.loads(data)["messages"] for b in m["content"] if b["type"] == "thinking"]
        assert (block["thinking"], block["signature"]) == (thinking.text, signature)
        assert dumps(signature) in data
        history.append(Message.user("again"))


def test_a_changed_prefix_is_noticed() -> None:
    """Whatever changes in the history already sent is sent as it is now."""
    adapter = AnthropicAdapter(api_key="k")
    history = start()
    for i in range(8):
        history.extend(agent_step(i))

    def check(messages: list[Message], **options: Any) -> None:
        po = {"anthropic": options} if options else None
        adapter.encode_body(Request("m", messages, provider_options=po), stream=True)  # remember this place
        for change in changes:
            change(messages)
            request = Request("m", messages, provider_options=po)
            assert adapter.encode_body(request, stream=True) == fresh_bytes(request), change.__name__

    def replace_content(ms: list[Message]) -> None:
        ms[1].content = [ContentPart.of_text("other task")]

    def append_part(ms: list[Message]) -> None:
        ms[2].content.append(ContentPart.of_text(" and more"))

    def replace_part(ms: list[Message]) -> None:
        ms[1].content[0] = ContentPart.of_text("third task")

    def drop_part(ms: list[Message]) -> None:
        del ms[2].content[0]

    def change_role(ms: list[Message]) -> None:
        ms[0].role = Role.USER  # the system prompt becomes a user message

    def to_system(ms: list[Message]) -> None:
        ms[1].role = Role.DEVELOPER

    def change_call_id(ms: list[Message]) -> None:
        ms[3].tool_call_id = "other"  # not on the wire, but checked

    def change_name(ms: list[Message]) -> None:
        ms[3].name = "someone"

    def swap_message(ms: list[Message]) -> None:
        ms[4] = Message.user("swapped in")

    def truncate(ms: list[Message]) -> None:
        del ms[-3:]

    def insert_front(ms: list[Message]) -> None:
        ms.insert(1, Message.user("inserted"))

    def grow_again(ms: list[Message]) -> None:
        ms.extend(agent_step(9))

    def last_tool_result_replaced(ms: list[Message]) -> None:
        ms[-1] = Message.tool_result("x", "replaced")

    changes = [
        replace_content,
        grow_again,
        append_part,
        replace_part,
        drop_part,
        change_role,
        grow_again,
        to_system,
        change_call_id,
        change_name,
        swap_message,
        truncate,
        grow_again,
        last_tool_result_replaced,
        insert_front,
    ]
    check(history)
    check(list(history), auto_cache=False)


def test_remembered_conversations_are_bounded() -> None:
    """Many conversations on one adapter keep at most _CACHE_LIMIT messages alive beyond the
    newest conversation; a dropped conversation is still sent right, from scratch."""
    adapter = AnthropicAdapter(api_key="k")
    first = [Message.system("first"), Message.user("x")]
    adapter.encode_body(Request("m", first), stream=False)
    size = 400
    for c in range(3 * CACHE_LIMIT // size):
        history = [Message.user(f"conversation {c}")]
        history += [Message.assistant(f"{c}.{j}") if j % 2 else Message.user(f"{c}.{j}") for j in range(size - 1)]
        adapter.encode_body(Request("m", history), stream=False)
        held = sum(len(p.messages) for p in adapter._conversations.prefixes.values())
        assert held == adapter._conversations.total <= CACHE_LIMIT + size
        assert len(adapter._msg_cache) <= CACHE_LIMIT
    assert all(p.messages[0] is not first[0] for p in adapter._conversations.prefixes.values())
    first.append(Message.assistant("y"))
    request = Request("m", first)
    assert adapter.encode_body(request, stream=True) == fresh_bytes(request)


def test_a_vouched_conversation_is_not_read_again() -> None:
    check_a_vouched_conversation_is_not_read_again(
        lambda: AnthropicAdapter(api_key="k"), "m", start, agent_step, fresh_bytes
    )


def test_a_vouched_prefix_that_is_not_the_same_objects_is_translated_again() -> None:
    check_a_vouched_prefix_that_is_not_the_same_objects_is_translated_again(
        lambda: AnthropicAdapter(api_key="k"), "m", start, agent_step, fresh_bytes
    )


Option = Callable[[list[Message]], dict[str, Any]]


@pytest.mark.parametrize(
    "options",
    [
        {"messages": [{"role": "user", "content": "raw"}]},  # the caller's own messages
        {"system": "raw system"},
        {"system": [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}] * 4},
        {"cache_control": {"type": "ephemeral"}},  # Anthropic's automatic mode: no marks of ours
        {"top_k": 5, 7: "a key json turns into text", "service_tier": "auto"},
        {"thinking": {"type": "enabled", "budget_tokens": 1024}},
        {"disable_parallel_tool_use": True, "beta_headers": ["x-beta"]},
    ],
    ids=["messages", "system", "four-marks", "top-cache", "extra-keys", "thinking", "parallel"],
)
def test_escape_hatch_options_give_the_same_bytes(options: dict[Any, Any]) -> None:
    adapter = AnthropicAdapter(api_key="k")
    history = start()
    for i in range(6):
        history.extend(agent_step(i))
        request = Request("m", history, tools=TOOLS, provider_options={"anthropic": options}, max_tokens=4000)
        assert adapter.encode_body(request, stream=False) == fresh_bytes(request, stream=False)
        headers = adapter._prepare(request, stream=False, encode=True).headers
        assert headers == AnthropicAdapter(api_key="k").build_headers(request)


def test_bad_input_is_refused_and_the_conversation_goes_on() -> None:
    adapter = AnthropicAdapter(api_key="k")
    history = start() + agent_step(0)
    adapter.encode_body(Request("m", history), stream=True)
    bad = Message.user([ContentPart(ContentKind.AUDIO, audio=AudioData(data=b"RIFF", media_type="audio/wav"))])
    with pytest.raises(InvalidRequestError, match="audio"):
        adapter.encode_body(Request("m", [*history, Message.user("fine"), bad]), stream=True)
    history.extend(agent_step(1))
    request = Request("m", history)
    assert adapter.encode_body(request, stream=True) == fresh_bytes(request)


@pytest.fixture
async def http_adapter(replay_server: ReplayServer) -> AsyncIterator[AnthropicAdapter]:
    a = AnthropicAdapter(
        api_key="test-key",
        base_url=replay_server.base_url,
        timeout=AdapterTimeout(connect=2, request=10, stream_read=5),
    )
    yield a
    await a.close()


def reply(text: str) -> dict[str, Any]:
    return {
        "id": "msg_x",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }


def text_stream(text: str) -> bytes:
    events = [
        {"type": "message_start", "message": {"id": "msg_s", "model": "m", "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


async def test_the_server_receives_the_encoded_bytes(
    http_adapter: AnthropicAdapter, replay_server: ReplayServer
) -> None:
    """complete() and stream() send encode_body's bytes, which are a fresh translation's."""
    history = start()
    conversation = object()
    sent = 0
    for i in range(6):
        request = Request("m", list(history), tools=TOOLS, conversation=conversation, unchanged=sent)
        if i % 2:
            replay_server.enqueue(200, text_stream(f"ok {i}"), {"content-type": "text/event-stream"})
            events = [e async for e in http_adapter.stream(request)]
            assert events[-1].response is not None and events[-1].response.text == f"ok {i}"
        else:
            replay_server.enqueue(200, reply(f"ok {i}"), {"content-type": "application/json"})
            assert (await http_adapter.complete(request)).text == f"ok {i}"
        received = replay_server.requests[-1]
        assert received.body == fresh_bytes(request, stream=bool(i % 2))
        assert received.headers.get("anthropic-beta") == "prompt-caching-2024-07-31"
        sent = len(history)
        history.extend(agent_step(i))

"""The OpenAI Responses adapter's request bytes: joined from cached per-message input items' JSON,
equal to a fresh translation's (and to encoding ``build_body``'s dict) byte for byte, while a step
looks only at what is new in the history."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ra.llm.errors import InvalidRequestError
from ra.llm.http import AdapterTimeout
from ra.llm.providers.conversations import CACHE_LIMIT
from ra.llm.providers.openai_responses import OpenAIAdapter
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
STORE = {"off": None, "on": {"openai": {"store": True}}}
#: Encrypted reasoning as the API sends it, with what JSON escapes differently from text.
ENCRYPTED = 'gAAAAABo+/=\\u00e9"é\u2028\x01'


def dumps(value: Any) -> bytes:
    """How the HTTP layer encodes a dict body (ra.llm.http)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def fresh_bytes(request: Request, *, stream: bool = True) -> bytes:
    """The body a new adapter (nothing cached) sends for ``request``, checked against encoding
    its ``build_body`` dict, which is what the adapter sent before it had a cache."""
    encoded = OpenAIAdapter(api_key="k").encode_body(request, stream=stream)
    assert encoded == dumps(OpenAIAdapter(api_key="k").build_body(request, stream=stream))
    return encoded


def reasoning(i: int, encrypted: bool = True) -> ThinkingData:
    data: dict[str, Any] = {
        "type": "reasoning",
        "id": f"rs_{i:04d}",
        "encrypted_content": f"{ENCRYPTED}{i}" if encrypted else None,
        "summary": [{"type": "summary_text", "text": f"I should look at {i} — «carefully»"}],
    }
    return ThinkingData(f"I should look at {i}", provider_data=data)


def agent_step(i: int) -> list[Message]:
    """One step's new messages: encrypted reasoning (now and then without its encrypted content,
    or another provider's thinking, which are not sent), text now and then, one or two function calls (with
    item ids, sent under store only; arguments as a dict or as text) and their results (a dict,
    text, every third with an image), now and then a developer note, a named user message, a
    document, a tool message with only text, a system message mid-way and non-ASCII text."""
    calls = [ToolCallData(f"call_{i}", "look", {"n": i, "note": "über ✓"}, provider_data={"id": f"fc_{i}"})]
    if i % 2:
        calls.append(ToolCallData(f"call_d{i}", "fix", f'{{"path": "src/m{i}.py"}}'))
    parts = [ContentPart.of_thinking(reasoning(i, encrypted=i % 5 != 4))]
    if i % 6 == 5:
        parts.append(ContentPart.of_thinking(ThinkingData("claude thoughts", "sig")))
    if i % 3:  # under store, reasoning is only sent when a function call follows it directly
        parts.append(ContentPart.of_text(f"step {i} — «looking»"))
    parts += [ContentPart.of_tool_call(c) for c in calls]
    step = [Message.assistant(parts)]
    for call in calls:
        image = b"\x89PNG" + bytes([i % 256]) * 64 if i % 3 == 0 and call.name == "look" else None
        content: Any = {"lines": [f"result {i}"], "ok": True} if call.name == "fix" else f"result {i}\n"
        step.append(Message.tool_result(call.id, content, image_data=image, image_media_type="image/png"))
    if i % 4 == 3:
        step.append(Message(Role.USER, [ContentPart.of_text(f"go on {i}")], name="alice"))
    if i % 7 == 6:
        notes = DocumentData(data=b"notes", media_type="text/plain", file_name="notes.txt")
        step.append(Message.user([ContentPart.of_text("see"), ContentPart(ContentKind.DOCUMENT, document=notes)]))
    if i % 8 == 7:
        step.append(Message(Role.DEVELOPER, [ContentPart.of_text(f"note {i}")]))
        step.append(Message(Role.TOOL, [ContentPart.of_text("late")], tool_call_id=f"call_{i}"))
    if i % 10 == 9:
        step.append(Message.system(f"also rule {i}"))
        step.append(Message.assistant(""))  # nothing to send
    return step


def start() -> list[Message]:
    return [Message.system("sys"), Message.user("task ünïcode")]


class CountingCache(dict[int, Any]):
    """The adapter's translation cache, counting how many messages a request looks up."""

    lookups = 0

    def get(self, key: int, default: Any = None) -> Any:
        self.lookups += 1
        return super().get(key, default)


@pytest.mark.parametrize("store", sorted(STORE))
@pytest.mark.parametrize("stream", [True, False])
def test_each_step_walks_only_the_new_messages(store: str, stream: bool) -> None:
    """Over 120 growing steps the bytes stay those of a fresh translation and of encoding
    ``build_body`` (reasoning, function calls and their outputs, images, store on and off), while
    each message is looked up once in all."""
    adapter = OpenAIAdapter(api_key="k")
    counting = CountingCache()
    adapter._msg_cache = counting
    history = start()
    added = len(history)
    for i in range(120):
        request = Request(
            "gpt-5",
            history,
            tools=TOOLS,
            tool_choice=ToolChoice.auto(),
            reasoning_effort="low",
            max_tokens=2000,
            provider_options=STORE[store],
        )
        assert adapter.encode_body(request, stream=stream) == fresh_bytes(request, stream=stream), i
        step = agent_step(i)
        history.extend(step)
        added += len(step)
    assert counting.lookups <= added
    body = json.loads(adapter.encode_body(Request("gpt-5", history, provider_options=STORE[store]), stream=False))
    assert body["instructions"] == "\n\n".join(["sys", *(f"also rule {i}" for i in range(9, 120, 10))])
    kinds = {item["type"] for item in body["input"]}
    assert kinds == {"message", "reasoning", "function_call", "function_call_output"}


def test_encrypted_reasoning_and_call_ids_go_back_byte_for_byte() -> None:
    """The reasoning item (id, summary, encrypted content) is sent as it came, from the cache as
    from a fresh translation; function-call item ids only under store."""
    thinking = reasoning(7)
    call = ToolCallData("call_7", "look", {"n": 7}, provider_data={"id": "fc_7"})
    assistant = Message.assistant([ContentPart.of_thinking(thinking), ContentPart.of_tool_call(call)])
    history = [Message.user("q"), assistant, Message.tool_result("call_7", "ok")]
    data_in = thinking.provider_data
    assert data_in is not None
    for store in (False, True):
        adapter = OpenAIAdapter(api_key="k")
        for _ in range(3):
            request = Request("gpt-5", list(history), provider_options={"openai": {"store": store}})
            data = adapter.encode_body(request, stream=False)
            assert data == fresh_bytes(request, stream=False)
            items = json.loads(data)["input"]
            assert items[1] == {
                "type": "reasoning",
                "id": "rs_0007",
                "summary": data_in["summary"],
                "encrypted_content": data_in["encrypted_content"],
            }
            assert dumps(data_in["encrypted_content"]) in data
            assert ("id" in items[2]) is store and items[3]["output"] == "ok"
            history.append(Message.user("again"))


def test_images_in_tool_outputs_stay_in_the_output() -> None:
    """A tool result with an image is one function_call_output whose output is input_text then
    input_image, as before; without text, the image alone."""
    png = b"\x89PNG\r\n" + bytes(range(40))
    history = [
        Message.user("look"),
        Message.assistant([ContentPart.of_tool_call(ToolCallData("c1", "shot", {}))]),
        Message.tool_result("c1", "a screenshot", image_data=png, image_media_type="image/png"),
        Message.assistant([ContentPart.of_tool_call(ToolCallData("c2", "shot", {}))]),
        Message.tool_result("c2", "", image_data=png),
        Message.user([ContentPart.of_text("and"), ContentPart.of_image(ImageData(data=png, media_type="image/png"))]),
    ]
    adapter = OpenAIAdapter(api_key="k")
    adapter.encode_body(Request("gpt-4o", history[:3]), stream=True)
    request = Request("gpt-4o", history)
    data = adapter.encode_body(request, stream=True)
    assert data == fresh_bytes(request)
    items = json.loads(data)["input"]
    first, second = items[2], items[4]
    assert first["type"] == second["type"] == "function_call_output"
    assert [p["type"] for p in first["output"]] == ["input_text", "input_image"]
    assert [p["type"] for p in second["output"]] == ["input_image"]
    assert first["output"][1]["image_url"].startswith("data:image/png;base64,")
    assert [p["type"] for p in items[5]["content"]] == ["input_text", "input_image"]


def test_short_histories() -> None:
    """No input items at all (no messages, only system text, a message with nothing to send),
    one, two and three items: the brackets and commas are right."""
    histories = [
        [],
        [Message.system("only rules")],
        [Message.system("rules"), Message.assistant("")],
        [Message.user("one")],
        [Message.user("one"), Message.assistant("two")],
        [Message.system("s"), Message.user("one"), Message.assistant("two"), Message.user("three")],
    ]
    adapter = OpenAIAdapter(api_key="k")
    for messages, count in zip(histories, [0, 0, 0, 1, 2, 3], strict=True):
        request = Request("gpt-4o", messages)
        data = adapter.encode_body(request, stream=False)
        assert data == fresh_bytes(request, stream=False), messages
        assert len(json.loads(data)["input"]) == count


def test_a_changed_prefix_is_noticed() -> None:
    """Whatever changes in the history already sent is sent as it is now."""
    adapter = OpenAIAdapter(api_key="k")
    history = start()
    for i in range(8):
        history.extend(agent_step(i))

    def check(messages: list[Message], **options: Any) -> None:
        po = {"openai": options} if options else None
        adapter.encode_body(Request("gpt-5", messages, provider_options=po), stream=True)  # remember this place
        for change in changes:
            change(messages)
            request = Request("gpt-5", messages, provider_options=po)
            assert adapter.encode_body(request, stream=True) == fresh_bytes(request), change.__name__

    def replace_content(ms: list[Message]) -> None:
        ms[1].content = [ContentPart.of_text("other task")]

    def append_part(ms: list[Message]) -> None:
        ms[2].content.append(ContentPart.of_text(" and more"))

    def replace_part(ms: list[Message]) -> None:
        ms[1].content[0] = ContentPart.of_text("third task")

    def drop_part(ms: list[Message]) -> None:
        del ms[2].content[0]  # the reasoning item goes

    def change_role(ms: list[Message]) -> None:
        ms[0].role = Role.USER  # the system prompt becomes a user message: no instructions

    def to_system(ms: list[Message]) -> None:
        ms[1].role = Role.SYSTEM

    def to_developer(ms: list[Message]) -> None:
        ms[1].role = Role.DEVELOPER

    def change_call_id(ms: list[Message]) -> None:
        ms[3].tool_call_id = "other"  # not on the wire (the result part has its id), but checked

    def name_it(ms: list[Message]) -> None:
        ms[5].name = "someone"

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
        grow_again,
        to_developer,
        change_call_id,
        name_it,
        swap_message,
        truncate,
        grow_again,
        last_tool_result_replaced,
        insert_front,
    ]
    check(history)
    check(list(history), store=True)


def test_a_change_of_store_translates_the_history_again() -> None:
    """``store`` decides what an assistant turn sends back (call item ids, which reasoning items):
    the same history sent with another ``store`` is translated for it."""
    adapter = OpenAIAdapter(api_key="k")
    history = start()
    conversation = object()
    sent = 0
    for i in range(12):
        history.extend(agent_step(i))
        store = bool(i % 3 == 2)
        request = Request(
            "gpt-5",
            list(history),
            provider_options={"openai": {"store": store}},
            conversation=conversation,
            unchanged=sent,
        )
        data = adapter.encode_body(request, stream=True)
        assert data == fresh_bytes(request), i
        assert (b'"id":"fc_0"' in data) is store
        sent = len(history)


def test_the_name_warning_outlives_the_step_that_added_the_name() -> None:
    """A named message in the remembered prefix still gives the warning on later requests."""
    adapter = OpenAIAdapter(api_key="k")
    conversation = object()
    history = [Message.system("s"), Message(Role.USER, [ContentPart.of_text("hi")], name="alice")]
    sent = 0
    for i in range(4):
        request = Request("gpt-4o", list(history), conversation=conversation, unchanged=sent)
        data, warnings = adapter._encode(request, stream=True)
        assert data == fresh_bytes(request)
        assert [w.code for w in warnings] == ["unsupported_name"], i
        sent = len(history)
        history += [Message.assistant(f"a{i}"), Message.user(f"u{i}")]
    plain = [Message.user("hi"), Message.assistant("a")]
    assert adapter._encode(Request("gpt-4o", plain), stream=True)[1] == []


def test_remembered_conversations_are_bounded() -> None:
    """Many conversations on one adapter keep at most CACHE_LIMIT messages alive beyond the
    newest conversation; a dropped conversation is still sent right, from scratch."""
    adapter = OpenAIAdapter(api_key="k")
    first = [Message.system("first"), Message.user("x")]
    adapter.encode_body(Request("gpt-4o", first), stream=False)
    size = 400
    for c in range(3 * CACHE_LIMIT // size):
        history = [Message.user(f"conversation {c}")]
        history += [Message.assistant(f"{c}.{j}") if j % 2 else Message.user(f"{c}.{j}") for j in range(size - 1)]
        adapter.encode_body(Request("gpt-4o", history), stream=False)
        held = sum(len(p.messages) for p in adapter._conversations.prefixes.values())
        assert held == adapter._conversations.total <= CACHE_LIMIT + size
        assert len(adapter._msg_cache) <= CACHE_LIMIT
    assert all(p.messages[0] is not first[0] for p in adapter._conversations.prefixes.values())
    first.append(Message.assistant("y"))
    request = Request("gpt-4o", first)
    assert adapter.encode_body(request, stream=True) == fresh_bytes(request)


def test_a_vouched_conversation_is_not_read_again() -> None:
    check_a_vouched_conversation_is_not_read_again(
        lambda: OpenAIAdapter(api_key="k"), "gpt-5", start, agent_step, fresh_bytes
    )


def test_a_vouched_prefix_that_is_not_the_same_objects_is_translated_again() -> None:
    check_a_vouched_prefix_that_is_not_the_same_objects_is_translated_again(
        lambda: OpenAIAdapter(api_key="k"), "gpt-5", start, agent_step, fresh_bytes
    )


@pytest.mark.parametrize(
    "options",
    [
        {"input": [{"type": "message", "role": "user", "content": "raw"}]},  # the caller's own input
        {"input": "just text"},
        {"instructions": "raw instructions"},
        {"previous_response_id": "resp_123", "store": True},
        {"tools": [{"type": "web_search"}], "include": ["file_search_call.results", "reasoning.encrypted_content"]},
        {"reasoning": {"effort": "high"}, "text": {"verbosity": "low"}, "reasoning_summary": "auto"},
        {"strict_tools": True, "encrypted_reasoning": False, "service_tier": "flex", 7: "a key json turns into text"},
        {"model": "gpt-4.1", "stream": False, "prompt_cache_key": "k1", "truncation": "auto"},
    ],
    ids=["input", "input-text", "instructions", "previous-response", "tools", "merge", "extra-keys", "overrides"],
)
def test_escape_hatch_options_give_the_same_bytes(options: dict[Any, Any]) -> None:
    adapter = OpenAIAdapter(api_key="k")
    history = start()
    for i in range(6):
        history.extend(agent_step(i))
        request = Request(
            "gpt-5",
            history,
            tools=TOOLS,
            reasoning_effort="medium",
            provider_options={"openai": options},
            max_tokens=4000,
        )
        for stream in (False, True):
            assert adapter.encode_body(request, stream=stream) == fresh_bytes(request, stream=stream), i
    body = json.loads(adapter.encode_body(request, stream=False))
    for key, value in options.items():
        if key in ("input", "instructions", "previous_response_id", "service_tier", "model"):
            assert body[key] == value


def test_bad_input_is_refused_and_the_conversation_goes_on() -> None:
    """A message the Responses API cannot carry is refused with a clear error, in the history or
    in the new messages; nothing of it is remembered, and the next good request is right."""
    adapter = OpenAIAdapter(api_key="k")
    conversation = object()
    history = start() + agent_step(0)
    adapter.encode_body(Request("gpt-5", list(history), conversation=conversation), stream=True)
    sent = len(history)
    audio = Message.user([ContentPart(ContentKind.AUDIO, audio=AudioData(data=b"RIFF", media_type="audio/wav"))])
    image = ContentPart.of_image(ImageData(url="https://example.com/a.png"))
    bad = [
        (audio, "audio"),
        (Message(Role.SYSTEM, [image]), "system messages may only hold text"),
        (Message(Role.TOOL, [ContentPart.of_text("orphan")]), "tool_call_id"),
        (Message.assistant([image]), "assistant message cannot carry"),
    ]
    for message, error in bad:
        messages = [*history, Message.user("fine"), message]
        with pytest.raises(InvalidRequestError, match=error):
            adapter.encode_body(Request("gpt-5", messages, conversation=conversation, unchanged=sent), stream=True)
        with pytest.raises(InvalidRequestError, match=error):
            OpenAIAdapter(api_key="k").build_body(Request("gpt-5", messages), stream=True)
    history.extend(agent_step(1))
    request = Request("gpt-5", list(history), conversation=conversation, unchanged=sent)
    assert adapter.encode_body(request, stream=True) == fresh_bytes(request)


@pytest.fixture
async def http_adapter(replay_server: ReplayServer) -> AsyncIterator[OpenAIAdapter]:
    a = OpenAIAdapter(
        api_key="test-key",
        base_url=replay_server.base_url,
        timeout=AdapterTimeout(connect=2, request=10, stream_read=5),
    )
    yield a
    await a.close()


def _response(text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_x",
        "object": "response",
        "model": "gpt-5",
        "status": status,
        "output": [
            {
                "type": "message",
                "id": "msg_x",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            }
        ],
        "usage": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
    }


def text_stream(text: str) -> bytes:
    item = {"type": "message", "id": "msg_s", "role": "assistant", "content": []}
    events = [
        {"type": "response.created", "response": {**_response(""), "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.output_text.delta", "item_id": "msg_s", "output_index": 0, "delta": text},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": _response(text)},
    ]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


async def test_the_server_receives_the_encoded_bytes(http_adapter: OpenAIAdapter, replay_server: ReplayServer) -> None:
    """complete() and stream() send encode_body's bytes, which are a fresh translation's, and
    report the warnings of the whole history (a name dropped steps ago, the ignored stops)."""
    history = [*start(), Message(Role.USER, [ContentPart.of_text("me too")], name="bob")]
    conversation = object()
    sent = 0
    for i in range(6):
        request = Request(
            "gpt-5",
            list(history),
            tools=TOOLS,
            stop_sequences=["END"],
            conversation=conversation,
            unchanged=sent,
        )
        if i % 2:
            replay_server.enqueue(200, text_stream(f"ok {i}"), {"content-type": "text/event-stream"})
            events = [e async for e in http_adapter.stream(request)]
            assert events[-1].type == StreamEventType.FINISH and events[-1].response is not None
            assert events[-1].response.text == f"ok {i}"
            warnings = events[0].warnings or []
        else:
            replay_server.enqueue(200, _response(f"ok {i}"), {"content-type": "application/json"})
            response = await http_adapter.complete(request)
            assert response.text == f"ok {i}"
            warnings = response.warnings
        assert sorted(w.code or "" for w in warnings) == ["unsupported_name", "unsupported_stop"]
        received = replay_server.requests[-1]
        assert received.body == fresh_bytes(request, stream=bool(i % 2))
        assert received.headers.get("authorization") == "Bearer test-key"
        sent = len(history)
        history.extend(agent_step(i))

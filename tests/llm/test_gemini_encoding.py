"""The Gemini adapter's request bytes: joined from cached per-message JSON, equal to a fresh
translation's (and to encoding ``build_body``'s dict) byte for byte, while a step looks only at
what is new in the history - except when a new tool call changes how earlier results are named."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ra.llm.errors import InvalidRequestError
from ra.llm.http import AdapterTimeout
from ra.llm.providers.conversations import CACHE_LIMIT
from ra.llm.providers.gemini import GeminiAdapter
from ra.llm.types import (
    ContentKind,
    ContentPart,
    ImageData,
    Message,
    Request,
    Role,
    ThinkingData,
    ToolCallData,
    ToolDefinition,
)
from tests.llm.encoder_kit import (
    check_a_vouched_conversation_is_not_read_again,
    check_a_vouched_prefix_that_is_not_the_same_objects_is_translated_again,
)
from tests.support.replay import ReplayServer

MODEL = "gemini-2.5-flash"
TOOLS = [
    ToolDefinition("look", "Look something up", {"type": "object", "properties": {"n": {"type": "integer"}}}),
    ToolDefinition("fix", "Fix it", {"type": "object", "properties": {"path": {"type": "string"}}}),
]


def dumps(value: Any) -> bytes:
    """How the HTTP layer encodes a dict body (ra.llm.http)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def fresh_bytes(request: Request, *, stream: bool = True) -> bytes:
    """The body a new adapter (nothing cached) sends for ``request``, checked against encoding
    its ``build_body`` dict the way the adapter sent it before it had a cache."""
    encoded = GeminiAdapter(api_key="k").encode_body(request, stream=stream)
    assert encoded == dumps(GeminiAdapter(api_key="k").build_body(request, stream=stream))
    return encoded


def gemini_thinking(text: str, signature: str | None, part: str = "thought") -> ContentPart:
    return ContentPart.of_thinking(ThinkingData(text, signature, provider_data={"gemini": {"part": part}}))


def agent_step(i: int) -> list[Message]:
    """One step's new messages: a signed thought, a signed answer text, one or two calls (the
    first with a thought signature and, now and then, Gemini's own id), their results (two tool
    messages merge into one user content; every third with an image), a user message now and then
    (it merges too), another provider's thinking that is not sent, and text that is not ASCII."""
    extra: dict[str, Any] = {"thoughtSignature": f"c2ln{i}=="}
    if i % 4 == 1:
        extra["id"] = f"fc-{i}"
    calls = [ToolCallData(f"call_{i}", "look", {"n": i, "note": "über ✓"}, provider_data={"gemini": extra})]
    if i % 2:
        calls.append(ToolCallData(f"call_{i}b", "fix", f'{{"path": "src/m{i}.py"}}'))
    parts = [gemini_thinking(f"thinking {i}", f"sig{i}")]
    parts.append(ContentPart.of_text(f"step {i} — «looking»"))
    parts.append(gemini_thinking("", f"textsig{i}", part="text"))
    if i % 5 == 4:
        parts.append(ContentPart.of_thinking(ThinkingData("another provider's", "xx")))
    parts += [ContentPart.of_tool_call(c) for c in calls]
    step = [Message.assistant(parts)]
    for call in calls:
        image = b"\x89PNG" + bytes([i % 256]) * 64 if i % 3 == 0 and call.name == "look" else None
        content: Any = {"rows": [i, "ü"]} if i % 2 else f"result {i}\n"
        step.append(Message.tool_result(call.id, content, is_error=i % 7 == 6, image_data=image))
    if i % 4 == 3:
        step.append(Message.user(f"go on {i}"))
    if i % 6 == 5:
        step.append(Message.user([ContentPart.of_image(ImageData(url="https://example.com/x.png"))]))
        step.append(Message.assistant([ContentPart.of_thinking(ThinkingData("redacted", None, True))]))  # not sent
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


def test_each_step_walks_only_the_new_messages() -> None:
    """Over 120 growing steps the bytes stay those of a fresh translation and of encoding
    ``build_body``, while each message is looked up once in all."""
    adapter = GeminiAdapter(api_key="k")
    counting = CountingCache()
    adapter._msg_cache = counting
    history = start()
    added = len(history)
    for i in range(120):
        request = Request(MODEL, history, tools=TOOLS, max_tokens=2000, reasoning_effort="low")
        assert adapter.encode_body(request, stream=True) == fresh_bytes(request), i
        step = agent_step(i)
        history.extend(step)
        added += len(step)
    assert counting.lookups <= added


def test_thought_signatures_go_back_byte_for_byte() -> None:
    history = start() + agent_step(1)
    data = GeminiAdapter(api_key="k").encode_body(Request(MODEL, history), stream=False)
    model = json.loads(data)["contents"][1]["parts"]
    assert model[0] == {"text": "thinking 1", "thought": True, "thoughtSignature": "sig1"}
    assert model[1] == {"text": "step 1 — «looking»", "thoughtSignature": "textsig1"}
    assert model[2]["thoughtSignature"] == "c2ln1==" and model[2]["functionCall"]["id"] == "fc-1"
    assert "«looking»".encode() in data  # not ASCII-escaped


def test_a_changed_prefix_is_noticed() -> None:
    """Whatever changes in the history already sent is sent as it is now."""
    adapter = GeminiAdapter(api_key="k")
    history = start()
    for i in range(8):
        history.extend(agent_step(i))

    def replace_content(ms: list[Message]) -> None:
        ms[1].content = [ContentPart.of_text("other task")]

    def append_part(ms: list[Message]) -> None:
        ms[2].content.append(ContentPart.of_text(" and more"))

    def replace_part(ms: list[Message]) -> None:
        ms[1].content[0] = ContentPart.of_text("third task")

    def drop_part(ms: list[Message]) -> None:
        del ms[2].content[0]

    def change_role(ms: list[Message]) -> None:
        ms[0].role = Role.USER

    def to_system(ms: list[Message]) -> None:
        ms[1].role = Role.DEVELOPER

    def change_name(ms: list[Message]) -> None:
        ms[3].name = "someone"

    def swap_message(ms: list[Message]) -> None:
        ms[3] = Message.user("swapped in")

    def truncate(ms: list[Message]) -> None:
        del ms[-3:]

    def insert_front(ms: list[Message]) -> None:
        ms.insert(1, Message.user("inserted"))

    def grow_again(ms: list[Message]) -> None:
        ms.extend(agent_step(9))

    def rename_a_call(ms: list[Message]) -> None:
        # The call that earlier results were named after is replaced by one of another name.
        j, old = next((j, p.tool_call) for j, p in enumerate(ms[2].content) if p.tool_call is not None)
        ms[2].content[j] = ContentPart.of_tool_call(ToolCallData(old.id, "renamed", {}))

    changes = [
        replace_content,
        grow_again,
        append_part,
        replace_part,
        drop_part,
        rename_a_call,
        change_role,
        grow_again,
        to_system,
        change_name,
        swap_message,
        truncate,
        grow_again,
        insert_front,
    ]
    adapter.encode_body(Request(MODEL, history), stream=True)
    for change in changes:
        change(history)
        request = Request(MODEL, history)
        assert adapter.encode_body(request, stream=True) == fresh_bytes(request), change.__name__


@pytest.mark.parametrize("vouched", [True, False])
def test_a_new_call_renames_results_sent_before(vouched: bool) -> None:
    """A tool result is named after the call with its id anywhere in the history, the last one
    when ids repeat: a new call with an id already answered (or answered before any call had it,
    named by Message.name) changes results already sent, and they are sent renamed."""
    adapter = GeminiAdapter(api_key="k")
    conversation = object()
    orphan = Message.tool_result("early", "from before the call")
    orphan.name = "guess"
    history = [*start(), orphan, *agent_step(0)]
    sent = 0
    for extra in (
        [Message.assistant([ContentPart.of_tool_call(ToolCallData("early", "actual", {}))])],
        [Message.assistant([ContentPart.of_tool_call(ToolCallData("call_0", "look_again", {}))])],
        [Message.user("and now")],
        agent_step(1),
    ):
        request = Request(MODEL, list(history), conversation=conversation, unchanged=sent if vouched else 0)
        assert adapter.encode_body(request, stream=True) == fresh_bytes(request)
        sent = len(history)
        history.extend(extra)
    request = Request(MODEL, list(history), conversation=conversation, unchanged=sent if vouched else 0)
    data = adapter.encode_body(request, stream=True)
    assert data == fresh_bytes(request)
    responses = [
        p["functionResponse"] for c in json.loads(data)["contents"] for p in c["parts"] if "functionResponse" in p
    ]
    assert [r["name"] for r in responses][:2] == ["actual", "look_again"]


def test_remembered_conversations_are_bounded() -> None:
    adapter = GeminiAdapter(api_key="k")
    first = [Message.system("first"), Message.user("x")]
    adapter.encode_body(Request(MODEL, first), stream=False)
    size = 400
    for c in range(3 * CACHE_LIMIT // size):
        history = [Message.user(f"conversation {c}")]
        history += [Message.assistant(f"{c}.{j}") if j % 2 else Message.user(f"{c}.{j}") for j in range(size - 1)]
        adapter.encode_body(Request(MODEL, history), stream=False)
        held = sum(len(p.messages) for p in adapter._conversations.prefixes.values())
        assert held == adapter._conversations.total <= CACHE_LIMIT + size
        assert len(adapter._msg_cache) <= CACHE_LIMIT
    assert all(p.messages[0] is not first[0] for p in adapter._conversations.prefixes.values())
    first.append(Message.assistant("y"))
    request = Request(MODEL, first)
    assert adapter.encode_body(request, stream=True) == fresh_bytes(request)


def test_a_vouched_conversation_is_not_read_again() -> None:
    check_a_vouched_conversation_is_not_read_again(
        lambda: GeminiAdapter(api_key="k"), MODEL, start, agent_step, fresh_bytes
    )


def test_a_vouched_prefix_that_is_not_the_same_objects_is_translated_again() -> None:
    check_a_vouched_prefix_that_is_not_the_same_objects_is_translated_again(
        lambda: GeminiAdapter(api_key="k"), MODEL, start, agent_step, fresh_bytes, removed_index=3
    )


@pytest.mark.parametrize(
    "options",
    [
        {"contents": [{"role": "user", "parts": [{"text": "raw"}]}]},
        {"systemInstruction": {"parts": [{"text": "merged"}]}},
        {"system_instruction": "raw"},
        {"safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}], 7: "text key"},
        {"tools": [{"googleSearch": {}}], "toolConfig": {"x": 1}, "include_thoughts": True},
    ],
    ids=["contents", "system-merge", "system-raw", "extra-keys", "tools"],
)
def test_escape_hatch_options_give_the_same_bytes(options: dict[Any, Any]) -> None:
    adapter = GeminiAdapter(api_key="k")
    history = start()
    for i in range(5):
        history.extend(agent_step(i))
        request = Request(MODEL, history, tools=TOOLS, provider_options={"gemini": options})
        assert adapter.encode_body(request, stream=False) == fresh_bytes(request, stream=False)


def test_bad_input_is_refused_and_the_conversation_goes_on() -> None:
    adapter = GeminiAdapter(api_key="k")
    history = start() + agent_step(0)
    adapter.encode_body(Request(MODEL, history), stream=True)
    nameless = Message.tool_result("nobody", "no call and no name")
    with pytest.raises(InvalidRequestError, match="function name"):
        adapter.encode_body(Request(MODEL, [*history, Message.user("fine"), nameless]), stream=True)
    system_image = Message(Role.SYSTEM, [ContentPart(ContentKind.IMAGE, image=ImageData(url="https://x/a.png"))])
    with pytest.raises(InvalidRequestError, match="only text"):
        adapter.encode_body(Request(MODEL, [*history, system_image]), stream=True)
    history.extend(agent_step(1))
    request = Request(MODEL, history)
    assert adapter.encode_body(request, stream=True) == fresh_bytes(request)
    assert adapter.encode_body(Request(MODEL, []), stream=False) == fresh_bytes(Request(MODEL, []), stream=False)


@pytest.fixture
async def http_adapter(replay_server: ReplayServer) -> AsyncIterator[GeminiAdapter]:
    a = GeminiAdapter(
        api_key="test-key",
        base_url=replay_server.base_url,
        timeout=AdapterTimeout(connect=2, request=10, stream_read=5),
    )
    yield a
    await a.close()


def reply(text: str) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1, "totalTokenCount": 4},
    }


async def test_the_server_receives_the_encoded_bytes(http_adapter: GeminiAdapter, replay_server: ReplayServer) -> None:
    """complete() and stream() send encode_body's bytes, which are a fresh translation's."""
    history = start()
    conversation = object()
    sent = 0
    for i in range(6):
        request = Request(MODEL, list(history), tools=TOOLS, conversation=conversation, unchanged=sent)
        if i % 2:
            body = f"data: {json.dumps(reply(f'ok {i}'))}\n\n".encode()
            replay_server.enqueue(200, body, {"content-type": "text/event-stream"})
            events = [e async for e in http_adapter.stream(request)]
            assert events[-1].response is not None and events[-1].response.text == f"ok {i}"
        else:
            replay_server.enqueue(200, reply(f"ok {i}"), {"content-type": "application/json"})
            assert (await http_adapter.complete(request)).text == f"ok {i}"
        assert replay_server.requests[-1].body == fresh_bytes(request, stream=bool(i % 2))
        sent = len(history)
        history.extend(agent_step(i))

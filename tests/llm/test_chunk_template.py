"""The byte-level fast path for streamed text chunks (ra.llm.providers.chunk_template).

The fast path may only ever agree with the full parser: every recorded Chat Completions stream,
and synthetic ones built to mislead it, must give the same events with it as without it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ra.llm.providers import openai_chat_reply
from ra.llm.providers.chunk_template import TextChunkTemplate
from ra.llm.types import Message, Request, StreamEventType
from tests.llm.test_openai_chat import make_adapter, summary
from tests.support.replay import ReplayServer, cassette_path, load_cassette

T = StreamEventType
HEAD = '{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'


def text_chunk(text: str, **delta: Any) -> str:
    return (
        HEAD + json.dumps({"choices": [{"index": 0, "delta": {"content": text, **delta}, "finish_reason": None}]})[1:]
    )


def learned(raw: str) -> TextChunkTemplate:
    template = TextChunkTemplate("content", openai_chat_reply._with_content)
    chunk = json.loads(raw)
    template.learn(raw, chunk, chunk["choices"][0]["delta"]["content"])
    return template


# -- the template alone ------------------------------------------------------------------------------
def test_a_sibling_chunk_is_read_from_its_text_alone() -> None:
    template = learned(text_chunk("Hello"))
    for text in [" world", "", 'quote " and \\ backslash', "naïve ☃ \U0001f600", "line\nbreak", "\u0000"]:
        assert template.text_of(text_chunk(text).encode()) == text


@pytest.mark.parametrize(
    "data",
    [
        HEAD + '"choices":[{"index":0,"delta":{"content":"a","reasoning_content":"b"},"finish_reason":null}]}',
        HEAD + '"choices":[{"index":0,"delta":{"content":null},"finish_reason":null}]}',
        HEAD + '"choices":[{"index":0,"delta":{"content":42},"finish_reason":null}]}',
        HEAD + '"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}',
        HEAD + '"choices":[{"index":0,"delta":{"content":"unterminated},"finish_reason":null}]}',
        '{"id":"c2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}',
        "[DONE]",
        "",
    ],
)
def test_anything_else_goes_to_the_full_parser(data: str) -> None:
    assert learned(text_chunk("Hello")).text_of(data.encode()) is None


def test_bytes_that_are_not_utf8_go_to_the_full_parser() -> None:
    template = learned(text_chunk("Hello"))
    head, tail = text_chunk("\x00").encode().split(b"\\u0000")
    assert template.text_of(head + b"\xff\xfe" + tail) is None


@pytest.mark.parametrize(
    "raw",
    [
        # the first "content" in the bytes belongs to the log probabilities, with the same text
        HEAD + '"choices":[{"index":0,"logprobs":{"content":"tok"},"delta":{"content":"tok"},"finish_reason":null}]}',
        # the real key written with an escape; a lookalike key holds the same text
        HEAD + '"choices":[{"index":0,"delta":{"\\"content":"tok","cont\\u0065nt":"tok"},"finish_reason":null}]}',
        # the text also appears as a value of an unrelated "content" key earlier on
        '{"content":"tok",' + text_chunk("tok")[1:],
    ],
)
def test_a_lookalike_of_the_text_field_is_never_learned(raw: str) -> None:
    chunk = json.loads(raw)
    assert chunk["choices"][0]["delta"]["content"] == "tok"
    template = learned(raw)
    sibling = raw.replace('"tok"', '"other"', 1)  # the first occurrence: not the text field
    assert template.text_of(sibling.encode()) is None
    assert template.text_of(raw.encode()) is None


# -- the adapter, with and without the fast path -------------------------------------------------------
def sse(chunks: list[str]) -> bytes:
    return "".join(f"data: {c}\n\n" for c in [*chunks, "[DONE]"]).encode()


def finish(reason: str = "stop") -> str:
    return HEAD + f'"choices":[{{"index":0,"delta":{{}},"finish_reason":"{reason}"}}]}}'


def tool_delta(index: int, args: str, *, call_id: str | None = None, name: str | None = None) -> str:
    fn: dict[str, Any] = {"arguments": args}
    if name:
        fn["name"] = name
    tc: dict[str, Any] = {"index": index, "function": fn}
    if call_id:
        tc["id"] = call_id
    return HEAD + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [tc]}, "finish_reason": None}]})[1:]


SYNTHETIC = {
    "plain": [text_chunk("", role="assistant"), *(text_chunk(f" t{i}") for i in range(30)), finish()],
    "reasoning-text-reasoning-text": [
        HEAD + '"choices":[{"index":0,"delta":{"reasoning_content":"think"},"finish_reason":null}]}',
        text_chunk("a"),
        text_chunk("b"),
        HEAD + '"choices":[{"index":0,"delta":{"reasoning_content":"more"},"finish_reason":null}]}',
        text_chunk("c"),
        text_chunk("d"),
        finish(),
    ],
    "text-then-tools": [
        text_chunk("Let me look."),
        text_chunk(" Now."),
        tool_delta(0, "", call_id="call_1", name="read_file"),
        tool_delta(0, '{"path":'),
        tool_delta(0, '"a.py"}'),
        text_chunk("after the call"),
        finish("tool_calls"),
    ],
    "changing-logprobs": [
        HEAD + json.dumps({"choices": [{"index": 0, "delta": {"content": f"w{i}"}, "logprobs": {"content": [i]}}]})[1:]
        for i in range(12)
    ]
    + [finish()],
    "per-chunk-ids": [text_chunk(f"x{i}").replace('"c1"', f'"c{i}"') for i in range(12)] + [finish()],
    "two-choices": [
        HEAD + '"choices":[{"index":1,"delta":{"content":"second"}},{"index":0,"delta":{"content":"first"}}]}',
        text_chunk("one"),
        HEAD + '"choices":[{"index":0,"delta":{"content":"two"}},{"index":1,"delta":{"content":"other"}}]}',
        text_chunk("three"),
        finish(),
    ],
    "usage-on-every-chunk": [
        HEAD + f'"choices":[{{"index":0,"delta":{{"content":"u{i}"}}}}],"usage":{{"completion_tokens":{i}}}}}'
        for i in range(1, 8)
    ]
    + [finish()],
    # chunks that carry text and something else: the something else must not be dropped
    "reasoning-with-each-text": [text_chunk(f"r{i}", reasoning_content="~") for i in range(8)] + [finish()],
    "arguments-with-each-text": [
        tool_delta(0, "", call_id="call_1", name="count"),
        *(
            HEAD
            + json.dumps(
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"content": f"n{i}", "tool_calls": [{"index": 0, "function": {"arguments": "1"}}]},
                        }
                    ]
                }
            )[1:]
            for i in range(8)
        ),
        finish("tool_calls"),
    ],
    "finish-with-text": [
        text_chunk("a"),
        HEAD + '"choices":[{"index":0,"delta":{"content":"z"},"finish_reason":"length"}]}',
    ],
    "a-text-that-looks-like-json": [text_chunk("a"), text_chunk('","reasoning_content":"x'), text_chunk("b"), finish()],
}


def recorded_streams() -> list[tuple[str, bytes]]:
    out = []
    for path in sorted(Path(cassette_path("openai-chat", "x")).parent.glob("*.yaml")):
        for i, interaction in enumerate(load_cassette(path)):
            response = interaction.response
            body = response.body if isinstance(response.body, bytes) else str(response.body).encode()
            if b"data:" in body and response.status == 200:
                out.append((f"{path.name}#{i}", body))
    return out


async def summaries(server: ReplayServer, body: bytes, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    request = Request("m", [Message.user("go")])
    out = []
    for fast in (True, False):
        with monkeypatch.context() as patch:
            if not fast:
                patch.setattr(TextChunkTemplate, "text_of", lambda self, data: None)
            for chunking in ("events", "random:7"):
                server.enqueue(200, body, {"content-type": "text/event-stream"}, chunking=chunking)
                events: list[Any] = []
                try:
                    async for event in make_adapter(server).stream(request):
                        events.append(event)  # noqa: PERF401 - the events before an error count too
                except Exception as exc:  # a recorded error stream: the same error, after the same events
                    out.append((type(exc), str(exc), [(e.type, e.delta, e.reasoning_delta) for e in events]))
                else:
                    out.append(summary(events))
    return out


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
async def test_synthetic_streams_read_the_same_with_the_fast_path(
    name: str, replay_server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, *others = await summaries(replay_server, sse(SYNTHETIC[name]), monkeypatch)
    for other in others:
        assert other == first
    assert first["text"]


async def test_recorded_streams_read_the_same_with_the_fast_path(
    replay_server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    streams = recorded_streams()
    assert len(streams) >= 5
    for _name, body in streams:
        first, *others = await summaries(replay_server, body, monkeypatch)
        for other in others:
            assert other == first


async def test_the_fast_path_is_taken(replay_server: ReplayServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Most chunks of a plain answer skip the full parse (so the speed-up is real)."""
    parsed: list[str] = []
    real = openai_chat_reply._decode_json

    def counting(text: str) -> Any:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(openai_chat_reply, "_decode_json", counting)
    replay_server.enqueue(200, sse(SYNTHETIC["plain"]), {"content-type": "text/event-stream"}, chunking="random:7")
    events = [e async for e in make_adapter(replay_server).stream(Request("m", [Message.user("go")]))]
    assert "".join(e.delta or "" for e in events if e.type == T.TEXT_DELTA) == "".join(f" t{i}" for i in range(30))
    assert len(parsed) <= 4  # the role chunk, the first text chunk, the finish chunk

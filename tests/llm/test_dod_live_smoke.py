"""The spec's integration smoke test (unified-llm-spec 8.10) and the turn-5 caching check (8.6),
against the real provider APIs.

These cost money and need the network, so they only run when ``RA_LIVE_TESTS=1`` is set; each
provider's tests also need its key (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY`` or
``GOOGLE_API_KEY``). Everything else in the suite is offline and proves the same behaviour against
recorded and scripted traffic.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import AsyncIterator

import pytest

from ra.llm.catalog import get_latest_model
from ra.llm.client import Client
from ra.llm.errors import NotFoundError
from ra.llm.generation import generate, generate_object, stream
from ra.llm.types import ContentPart, ImageData, Message, StreamEventType, Tool

pytestmark = pytest.mark.skipif(
    os.environ.get("RA_LIVE_TESTS") != "1", reason="live provider tests: set RA_LIVE_TESTS=1 and the API keys"
)

KEYS = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
PROVIDERS = ["anthropic", "openai", "gemini"]


def need(provider: str) -> None:
    if not any(os.environ.get(k) for k in KEYS[provider]):
        pytest.skip(f"no API key for {provider}")


def latest(provider: str) -> str:
    info = get_latest_model(provider)
    assert info is not None, f"the catalog has no model for {provider}"
    return info.id


@pytest.fixture
async def live() -> AsyncIterator[Client]:
    client = Client.from_env()
    yield client
    await client.close()


def tiny_png() -> bytes:
    """A valid 8x8 red PNG, built here so the test needs no image file."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 8 for _ in range(8))
    header = struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def weather_tool() -> Tool:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    return Tool("get_weather", "Current weather for a city", schema, execute=lambda city: f"{city}: 18C, clear")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_basic_generation(provider: str, live: Client) -> None:
    need(provider)
    result = await generate(
        latest(provider), "Say hello in one sentence.", max_tokens=100, provider=provider, client=live
    )
    assert result.text
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.finish_reason.reason == "stop"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_streaming_deltas_make_the_response(provider: str, live: Client) -> None:
    need(provider)
    result = stream(latest(provider), "Write a haiku.", provider=provider, client=live)
    chunks = [e.delta async for e in result if e.type == StreamEventType.TEXT_DELTA and e.delta]
    assert "".join(chunks) == (await result.response()).text != ""


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_parallel_tool_calling(provider: str, live: Client) -> None:
    need(provider)
    result = await generate(
        latest(provider),
        "What is the weather in San Francisco and New York?",
        tools=[weather_tool()],
        max_tool_rounds=3,
        provider=provider,
        client=live,
    )
    assert len(result.steps) >= 2
    assert "San Francisco" in result.text and "New York" in result.text


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_image_input(provider: str, live: Client) -> None:
    need(provider)
    message = Message.user([ContentPart.of_text("What do you see?"), ContentPart.of_image(ImageData(data=tiny_png()))])
    result = await generate(latest(provider), messages=[message], provider=provider, client=live)
    assert result.text


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_structured_output(provider: str, live: Client) -> None:
    need(provider)
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    result = await generate_object(
        latest(provider), "Extract: Alice is 30 years old", schema=schema, provider=provider, client=live
    )
    assert result.output == {"name": "Alice", "age": 30}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_unknown_model_is_not_found(provider: str, live: Client) -> None:
    need(provider)
    with pytest.raises(NotFoundError):
        await generate("nonexistent-model-xyz", "test", provider=provider, client=live)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_cache_reads_dominate_by_turn_five(provider: str, live: Client) -> None:
    """An agent-like session with a long, stable prefix: from turn 5 on, most input is cached."""
    need(provider)
    rules = "\n".join(f"Rule {i}: keep answers short and cite rule numbers when relevant." for i in range(400))
    messages = [Message.system(f"You are a careful assistant.\n{rules}")]
    usages = []
    for turn in range(1, 6):
        messages.append(Message.user(f"Turn {turn}: reply with the single word 'ok'."))
        result = await generate(latest(provider), messages=messages, max_tokens=200, provider=provider, client=live)
        messages = result.messages
        usages.append(result.usage)
    last = usages[-1]
    assert last.cache_read_tokens is not None and last.cache_read_tokens > 0.5 * last.input_tokens, usages

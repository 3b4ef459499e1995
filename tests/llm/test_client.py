"""The core client (spec 2.2-2.6, 8.1): from_env, routing, default provider, middleware, default client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from ra.llm import client as client_module
from ra.llm.client import Client, Middleware, get_default_client, set_default_client
from ra.llm.errors import ConfigurationError
from ra.llm.testing import ScriptedAdapter, reply
from ra.llm.types import Message, Request, Response, StreamEvent, StreamEventType


def _request(provider: str | None = None) -> Request:
    return Request(model="m", messages=[Message.user("hi")], provider=provider)


@pytest.fixture
def fresh_default() -> Iterator[None]:
    saved = client_module._default_client
    set_default_client(None)
    try:
        yield
    finally:
        set_default_client(saved)


# -- from_env --------------------------------------------------------------------------------------


def test_from_env_registers_only_providers_with_keys() -> None:
    pytest.importorskip("ra.llm.providers.anthropic")
    client = Client.from_env({"ANTHROPIC_API_KEY": "sk-ant", "UNRELATED": "x"})
    assert list(client.providers) == ["anthropic"]
    assert client.default_provider == "anthropic"
    assert Client.from_env({}).providers == {}
    assert Client.from_env({}).default_provider is None


def test_from_env_openai_with_all_options() -> None:
    mod = pytest.importorskip("ra.llm.providers.openai_responses")
    client = Client.from_env(
        {
            "OPENAI_API_KEY": "sk-1",
            "OPENAI_BASE_URL": "https://proxy.example/v1/",
            "OPENAI_ORG_ID": "org-1",
            "OPENAI_PROJECT_ID": "proj-1",
        }
    )
    adapter = client.providers["openai"]
    assert isinstance(adapter, mod.OpenAIAdapter)
    assert adapter.api_key == "sk-1"
    assert adapter.base_url == "https://proxy.example/v1"
    assert (adapter.organization, adapter.project) == ("org-1", "proj-1")


def test_from_env_anthropic_base_url() -> None:
    mod = pytest.importorskip("ra.llm.providers.anthropic")
    client = Client.from_env({"ANTHROPIC_API_KEY": "sk-ant", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"})
    adapter = client.providers["anthropic"]
    assert isinstance(adapter, mod.AnthropicAdapter)
    assert adapter.api_key == "sk-ant" and adapter.base_url == "http://127.0.0.1:9"


def test_from_env_gemini_key_and_google_fallback() -> None:
    mod = pytest.importorskip("ra.llm.providers.gemini")
    client = Client.from_env({"GEMINI_API_KEY": "g-1", "GEMINI_BASE_URL": "http://127.0.0.1:9"})
    adapter = client.providers["gemini"]
    assert isinstance(adapter, mod.GeminiAdapter)
    assert adapter.api_key == "g-1" and adapter.base_url == "http://127.0.0.1:9"
    fallback = Client.from_env({"GOOGLE_API_KEY": "g-2"})
    assert fallback.providers["gemini"].api_key == "g-2"
    both = Client.from_env({"GEMINI_API_KEY": "g-1", "GOOGLE_API_KEY": "g-2"})
    assert both.providers["gemini"].api_key == "g-1"  # the primary name wins


def test_from_env_openai_compatible() -> None:
    mod = pytest.importorskip("ra.llm.providers.openai_chat")
    client = Client.from_env({"OPENAI_COMPATIBLE_BASE_URL": "http://127.0.0.1:8080/v1"})
    adapter = client.providers["openai-compatible"]
    assert isinstance(adapter, mod.OpenAICompatibleAdapter)
    assert adapter.base_url == "http://127.0.0.1:8080/v1"
    assert client.default_provider == "openai-compatible"


def test_from_env_order_makes_the_first_present_provider_the_default() -> None:
    for name in ("openai_responses", "anthropic", "gemini"):
        pytest.importorskip(f"ra.llm.providers.{name}")
    client = Client.from_env({"GEMINI_API_KEY": "g", "ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"})
    assert list(client.providers) == ["openai", "anthropic", "gemini"]
    assert client.default_provider == "openai"
    no_openai = Client.from_env({"GEMINI_API_KEY": "g", "ANTHROPIC_API_KEY": "a"})
    assert no_openai.default_provider == "anthropic"
    explicit = Client.from_env({"GEMINI_API_KEY": "g", "ANTHROPIC_API_KEY": "a"}, default_provider="gemini")
    assert explicit.default_provider == "gemini"


def test_from_env_ignores_empty_values() -> None:
    assert Client.from_env({"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}).providers == {}


# -- routing ---------------------------------------------------------------------------------------


async def test_routing_by_provider_field_and_default() -> None:
    one, two = ScriptedAdapter([reply("from one")], name="one"), ScriptedAdapter([reply("from two")], name="two")
    client = Client(providers={"one": one, "two": two})
    assert client.default_provider == "one"  # first registered
    assert (await client.complete(_request("two"))).text == "from two"
    assert (await client.complete(_request())).text == "from one"
    assert len(one.requests) == 1 and len(two.requests) == 1


async def test_explicit_default_provider() -> None:
    one, two = ScriptedAdapter([], name="one"), ScriptedAdapter([reply("two")], name="two")
    client = Client(providers={"one": one, "two": two}, default_provider="two")
    assert (await client.complete(_request())).text == "two"


async def test_stream_is_routed_too() -> None:
    adapter = ScriptedAdapter([reply("streamed")])
    client = Client(providers={"s": adapter})
    events = [e async for e in client.stream(_request("s"))]
    assert events[0].type == StreamEventType.STREAM_START
    assert events[-1].type == StreamEventType.FINISH
    assert "".join(e.delta or "" for e in events if e.type == StreamEventType.TEXT_DELTA) == "streamed"


async def test_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="no provider"):
        await Client().complete(_request())
    client = Client(providers={"one": ScriptedAdapter([])})
    with pytest.raises(ConfigurationError, match="'nope' is not registered"):
        await client.complete(_request("nope"))
    with pytest.raises(ConfigurationError):
        Client(providers={"one": ScriptedAdapter([])}, default_provider="two")
    with pytest.raises(ConfigurationError):
        [e async for e in Client().stream(_request())]


def test_register_calls_initialize_and_sets_the_default() -> None:
    class Adapter(ScriptedAdapter):
        initialized = 0

        def initialize(self) -> None:
            self.initialized += 1

    adapter = Adapter([])
    client = Client()
    client.register("a", adapter)
    assert adapter.initialized == 1 and client.default_provider == "a"


async def test_close_closes_adapters() -> None:
    adapter = ScriptedAdapter([])
    async with Client(providers={"s": adapter}):
        pass
    assert adapter.closed


# -- middleware ------------------------------------------------------------------------------------


class _Recorder(Middleware):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def complete(self, request: Request, call_next: Any) -> Response:
        self.log.append(f"{self.name}:request")
        response = await call_next(request)
        self.log.append(f"{self.name}:response")
        return response

    async def stream(self, request: Request, call_next: Any) -> AsyncIterator[StreamEvent]:
        self.log.append(f"{self.name}:open")
        async for event in call_next(request):
            if event.type == StreamEventType.FINISH:
                self.log.append(f"{self.name}:finish")
            yield event
        self.log.append(f"{self.name}:closed")


async def test_middleware_onion_order_for_complete() -> None:
    log: list[str] = []
    client = Client(providers={"s": ScriptedAdapter([reply("ok")])}, middleware=[_Recorder("a", log)])
    client.use(_Recorder("b", log))
    await client.complete(_request())
    assert log == ["a:request", "b:request", "b:response", "a:response"]


async def test_middleware_onion_order_for_stream() -> None:
    log: list[str] = []
    client = Client(
        providers={"s": ScriptedAdapter([reply("ok")])}, middleware=[_Recorder("a", log), _Recorder("b", log)]
    )
    [e async for e in client.stream(_request())]
    # The innermost layer sees each event first; closing unwinds from the inside out.
    assert log == ["a:open", "b:open", "b:finish", "a:finish", "b:closed", "a:closed"]


async def test_function_middleware_can_modify_requests_responses_and_events() -> None:
    adapter = ScriptedAdapter([reply("hello"), reply("stream me")])

    async def add_metadata(request: Request, call_next: Any) -> Response:
        request.metadata = {"trace": "t1"}
        response = await call_next(request)
        response.message = Message.assistant(response.text.upper())
        return response

    async def shout_events(request: Request, call_next: Any) -> AsyncIterator[StreamEvent]:
        async for event in call_next(request):
            if event.type == StreamEventType.TEXT_DELTA and event.delta:
                event.delta = event.delta.upper()
            yield event

    client = Client(providers={"s": adapter}, middleware=[add_metadata, shout_events])
    response = await client.complete(_request())
    assert response.text == "HELLO"
    assert adapter.requests[0].metadata == {"trace": "t1"}
    deltas = [e.delta async for e in client.stream(_request()) if e.type == StreamEventType.TEXT_DELTA]
    assert "".join(d or "" for d in deltas) == "STREAM ME"
    # A coroutine middleware applies to complete() only; the stream request was not touched.
    assert adapter.requests[1].metadata is None


async def test_middleware_can_short_circuit() -> None:
    adapter = ScriptedAdapter([])
    canned = Response("cached", "m", "cache", Message.assistant("from cache"), finish_reason=_stop())

    async def cache(request: Request, call_next: Any) -> Response:
        return canned

    client = Client(providers={"s": adapter}, middleware=[cache])
    assert await client.complete(_request()) is canned
    assert adapter.requests == []


def _stop() -> Any:
    from ra.llm.types import FinishReason

    return FinishReason("stop")


# -- module-level default client -------------------------------------------------------------------


def test_default_client_is_built_lazily_from_the_environment(
    fresh_default: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ra.llm.providers.anthropic")
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_COMPATIBLE_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert client_module._default_client is None
    first = get_default_client()
    assert list(first.providers) == ["anthropic"]
    assert get_default_client() is first  # built once


def test_set_default_client_overrides_and_resets(fresh_default: None, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "OPENAI_COMPATIBLE_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    mine = Client(providers={"s": ScriptedAdapter([])})
    set_default_client(mine)
    assert get_default_client() is mine
    set_default_client(None)
    rebuilt = get_default_client()
    assert rebuilt is not mine and rebuilt.providers == {}

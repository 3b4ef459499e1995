"""The core client (spec layer 3): provider routing, middleware, the module-level default client.

Middleware runs as an onion: the first registered sees the request first and the response last.
A middleware is either

* an object with ``async def complete(self, request, call_next)`` and/or
  ``def stream(self, request, call_next)`` (an async generator over events) - see :class:`Middleware`;
* an ``async def fn(request, call_next)`` coroutine function: applies to ``complete()`` only;
* an ``async def fn(request, call_next)`` async *generator* function: applies to ``stream()`` only.

Adapters are imported only when ``from_env`` or a caller needs them, to keep ``import ra`` light.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from .adapter import ProviderAdapter
from .call_ids import renumber_duplicate_call_ids
from .errors import ConfigurationError
from .timeouts import AdapterTimeout, guard_stream
from .types import Request, Response, StreamEvent

__all__ = [
    "Client",
    "Middleware",
    "get_default_client",
    "set_default_client",
]

CompleteNext = Callable[[Request], Awaitable[Response]]
StreamNext = Callable[[Request], AsyncIterator[StreamEvent]]


class Middleware:
    """Base class: override ``complete`` and/or ``stream``; the defaults pass straight through."""

    async def complete(self, request: Request, call_next: CompleteNext) -> Response:
        return await call_next(request)

    def stream(self, request: Request, call_next: StreamNext) -> AsyncIterator[StreamEvent]:
        return call_next(request)


def _complete_layer(mw: Any) -> Callable[[Request, CompleteNext], Awaitable[Response]] | None:
    if isinstance(mw, Middleware) or hasattr(mw, "complete"):
        return mw.complete
    if inspect.iscoroutinefunction(mw):
        return mw
    return None


def _stream_layer(mw: Any) -> Callable[[Request, StreamNext], AsyncIterator[StreamEvent]] | None:
    if isinstance(mw, Middleware) or hasattr(mw, "stream"):
        return mw.stream
    if inspect.isasyncgenfunction(mw):
        return mw
    return None


class Client:
    def __init__(
        self,
        providers: Mapping[str, ProviderAdapter] | None = None,
        default_provider: str | None = None,
        middleware: list[Any] | None = None,
    ) -> None:
        self.providers: dict[str, ProviderAdapter] = {}
        self.default_provider: str | None = None
        for name, adapter in (providers or {}).items():
            self.register(name, adapter)
        if default_provider is not None:
            if default_provider not in self.providers:
                raise ConfigurationError(f"default provider {default_provider!r} is not registered")
            self.default_provider = default_provider
        self.middleware: list[Any] = list(middleware or [])
        self._complete_chain: CompleteNext | None = None
        self._stream_chain: StreamNext | None = None

    # -- configuration ---------------------------------------------------------------------
    def register(self, name: str, adapter: ProviderAdapter) -> None:
        """Add an adapter; the first one registered becomes the default provider."""
        initialize = getattr(adapter, "initialize", None)
        if callable(initialize):
            initialize()
        self.providers[name] = adapter
        if self.default_provider is None:
            self.default_provider = name

    def use(self, middleware: Any) -> None:
        self.middleware.append(middleware)
        self._complete_chain = self._stream_chain = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **kwargs: Any) -> Client:
        """Register every provider whose key is set: OpenAI, Anthropic, Gemini (in that order, so
        the first one present is the default). ``OPENAI_COMPATIBLE_BASE_URL`` adds the Chat
        Completions adapter as ``openai-compatible`` (no key needed for local servers)."""
        env = os.environ if environ is None else environ
        providers: dict[str, ProviderAdapter] = {}
        if env.get("OPENAI_API_KEY"):
            from .providers.openai_responses import OpenAIAdapter

            providers["openai"] = OpenAIAdapter(
                api_key=env["OPENAI_API_KEY"],
                base_url=env.get("OPENAI_BASE_URL") or None,
                organization=env.get("OPENAI_ORG_ID") or None,
                project=env.get("OPENAI_PROJECT_ID") or None,
            )
        if env.get("ANTHROPIC_API_KEY"):
            from .providers.anthropic import AnthropicAdapter

            providers["anthropic"] = AnthropicAdapter(
                api_key=env["ANTHROPIC_API_KEY"], base_url=env.get("ANTHROPIC_BASE_URL") or None
            )
        gemini_key = env.get("GEMINI_API_KEY") or env.get("GOOGLE_API_KEY")
        if gemini_key:
            from .providers.gemini import GeminiAdapter

            providers["gemini"] = GeminiAdapter(api_key=gemini_key, base_url=env.get("GEMINI_BASE_URL") or None)
        if env.get("OPENAI_COMPATIBLE_BASE_URL"):
            from .providers.openai_chat import OpenAICompatibleAdapter

            providers["openai-compatible"] = OpenAICompatibleAdapter(
                api_key=env.get("OPENAI_COMPATIBLE_API_KEY") or None,
                base_url=env["OPENAI_COMPATIBLE_BASE_URL"],
            )
        return cls(providers=providers, **kwargs)

    # -- routing ---------------------------------------------------------------------------
    def adapter_for(self, request: Request) -> ProviderAdapter:
        name = request.provider or self.default_provider
        if name is None:
            raise ConfigurationError(
                "no provider: the request names none and the client has no default provider "
                "(set an API key such as OPENAI_API_KEY, or register an adapter)"
            )
        adapter = self.providers.get(name)
        if adapter is None:
            known = ", ".join(sorted(self.providers)) or "none"
            raise ConfigurationError(f"provider {name!r} is not registered (registered: {known})")
        return adapter

    async def _route_complete(self, request: Request) -> Response:
        return await self.adapter_for(request).complete(request)

    def _route_stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        adapter = self.adapter_for(request)
        events = adapter.stream(request)
        # Every stream is bounded by its adapter's stream_idle / stream_total (keep-alives never
        # keep a call alive for ever); see ra.llm.http.guard_stream.
        limits = getattr(adapter, "timeout", None)
        if isinstance(limits, AdapterTimeout) and (limits.stream_idle is not None or limits.stream_total is not None):
            name = getattr(adapter, "name", None) or request.provider or "provider"
            return guard_stream(events, idle=limits.stream_idle, total=limits.stream_total, provider=name)
        return events

    def _build_chains(self) -> None:
        complete: CompleteNext = self._route_complete
        stream: StreamNext = self._route_stream
        # Wrap from the innermost (last registered) outwards so the first registered runs first.
        for mw in reversed(self.middleware):
            layer = _complete_layer(mw)
            if layer is not None:
                complete = _bind_complete(layer, complete)
            slayer = _stream_layer(mw)
            if slayer is not None:
                stream = _bind_stream(slayer, stream)
        self._complete_chain, self._stream_chain = complete, stream

    # -- calls -----------------------------------------------------------------------------
    async def complete(self, request: Request) -> Response:
        """One model call through the middleware chain. Never retries (see ``ra.llm.retrying``)."""
        if self._complete_chain is None:
            self._build_chains()
        assert self._complete_chain is not None
        response = await self._complete_chain(request)
        renumber_duplicate_call_ids(response.message)  # every call answerable by its own id
        return response

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """A streaming model call through the middleware chain. Never retries."""
        if self._stream_chain is None:
            self._build_chains()
        assert self._stream_chain is not None
        return self._stream_chain(request)

    async def close(self) -> None:
        for adapter in self.providers.values():
            close = getattr(adapter, "close", None)
            if close is not None:
                result = close()
                if inspect.isawaitable(result):
                    await result

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _bind_complete(layer: Callable[[Request, CompleteNext], Awaitable[Response]], nxt: CompleteNext) -> CompleteNext:
    async def call(request: Request) -> Response:
        return await layer(request, nxt)

    return call


def _bind_stream(layer: Callable[[Request, StreamNext], AsyncIterator[StreamEvent]], nxt: StreamNext) -> StreamNext:
    def call(request: Request) -> AsyncIterator[StreamEvent]:
        return layer(request, nxt)

    return call


_default_client: Client | None = None


def set_default_client(client: Client | None) -> None:
    """Replace the client the high-level functions use (None: build from the environment again)."""
    global _default_client
    _default_client = client


def get_default_client() -> Client:
    """The module-level client, created from the environment on first use."""
    global _default_client
    if _default_client is None:
        _default_client = Client.from_env()
    return _default_client

"""Build the model client for a run: one adapter, sampling settings, the model name.

The client holds exactly one adapter, registered under the provider name the profile sends in
its requests, so a request can never be routed anywhere the user did not choose. Sampling
parameters (``--temperature``, ``--top-p``, ``--max-tokens``) are applied by a middleware that
sets them on every request only when configured: with none configured the request carries none,
and the provider's defaults apply (ra-spec).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from .errors import ExitCode, RunError

if TYPE_CHECKING:
    from ra.llm.adapter import ProviderAdapter
    from ra.llm.client import Client
    from ra.llm.types import Request, Response, StreamEvent

    from .config import Settings

__all__ = [
    "SamplingMiddleware",
    "build_adapter",
    "build_client",
    "catalogue_family",
    "list_served_models",
    "models_url",
    "resolve_model",
]


def _timeout() -> Any:
    from ra.llm.http import AdapterTimeout

    # Local servers can take a while before the first token of a long prompt; a broken connection
    # is still noticed at once.
    return AdapterTimeout(connect=10.0, request=600.0, stream_read=300.0)


def build_adapter(settings: Settings) -> ProviderAdapter:
    provider = settings.provider
    if provider == "openai-compatible":
        from ra.llm.providers.openai_chat import OpenAICompatibleAdapter

        return OpenAICompatibleAdapter(settings.api_key, settings.base_url, timeout=_timeout())
    if provider == "openai":
        import os

        from ra.llm.providers.openai_responses import OpenAIAdapter

        return OpenAIAdapter(
            settings.api_key,
            settings.base_url,
            timeout=_timeout(),
            organization=os.environ.get("OPENAI_ORG_ID") or None,
            project=os.environ.get("OPENAI_PROJECT_ID") or None,
        )
    if provider == "anthropic":
        from ra.llm.providers.anthropic import AnthropicAdapter

        return AnthropicAdapter(settings.api_key, settings.base_url, timeout=_timeout())
    if provider == "gemini":
        from ra.llm.providers.gemini import GeminiAdapter

        return GeminiAdapter(settings.api_key, settings.base_url, timeout=_timeout())
    if provider == "local":
        from ra.llm.providers.local_llama import LocalLlamaAdapter

        return LocalLlamaAdapter(examples=local_examples())
    raise RunError(f"unknown provider {provider!r}", ExitCode.USAGE)


def local_examples() -> list[Any]:
    """A worked example for the in-process model: create a file with ``shell_command``, run it,
    answer. The default local model is a 270M base model that copies a demonstration far better
    than it follows instructions; the adapter shows the example only when ``shell_command`` is
    offered (the ra profile), in the JSON shape it holds the model to."""
    from ra.llm.types import ContentPart, Message, ToolCallData

    def call(call_id: str, command: str) -> Message:
        return Message.assistant(
            [ContentPart.of_tool_call(ToolCallData(call_id, "shell_command", {"command": command}))]
        )

    return [
        Message.user("Make sum.py that prints the sum of 2 and 3, then run it."),
        call("call_1", "echo \"print('Sum:', 2 + 3)\" > sum.py"),
        Message.tool_result("call_1", "Exit code: 0\nDuration: 3 ms\nOutput: (none)"),
        call("call_2", "python3 sum.py"),
        Message.tool_result("call_2", "Exit code: 0\nDuration: 21 ms\nOutput:\nSum: 5"),
        Message.assistant("Created sum.py and ran it; it prints Sum: 5."),
    ]


class SamplingMiddleware:
    """Sets the configured sampling fields on every request (and nothing else)."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields

    def _apply(self, request: Request) -> Request:
        return dataclasses.replace(request, **self.fields) if self.fields else request

    async def complete(self, request: Request, call_next: Any) -> Response:
        return await call_next(self._apply(request))

    def stream(self, request: Request, call_next: Any) -> AsyncIterator[StreamEvent]:
        return call_next(self._apply(request))


def sampling_fields(settings: Settings) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if settings.temperature is not None:
        fields["temperature"] = float(settings.temperature)
    if settings.top_p is not None:
        fields["top_p"] = float(settings.top_p)
    if settings.max_tokens is not None:
        fields["max_tokens"] = int(settings.max_tokens)
    return fields


def build_client(settings: Settings, adapter: ProviderAdapter | None = None) -> Client:
    from ra.llm.client import Client

    adapter = adapter if adapter is not None else build_adapter(settings)
    client = Client(providers={settings.provider: adapter})
    fields = sampling_fields(settings)
    if fields:
        client.use(SamplingMiddleware(fields))
    return client


async def resolve_model(settings: Settings, adapter: ProviderAdapter) -> str:
    """The model to use: the configured one, else a sensible default for the provider.

    For an OpenAI-compatible server at a custom URL the default is the first model the server
    lists at ``GET /models`` (what llama.cpp, vLLM, Ollama and LM Studio serve); for the hosted
    providers it is the catalog's newest tool-capable model.
    """
    if settings.model:
        return settings.model
    provider = settings.provider
    if provider == "local":
        return local_model_name()
    if provider == "openai-compatible" and settings.base_url:
        return await _first_listed_model(settings, adapter)
    from ra.llm.catalog import get_latest_model

    info = get_latest_model(catalogue_family(provider), "tools")
    if info is None:
        raise RunError(f"no default model is known for {provider}: pass --model or set RA_MODEL", ExitCode.USAGE)
    return info.id


def catalogue_family(provider: str | None) -> str | None:
    """The catalogue's provider for ``provider``: a Chat Completions server is looked up under
    OpenAI's models (what its names most often are)."""
    return "openai" if provider == "openai-compatible" else provider


def local_model_name() -> str:
    """A name for the model the local provider loads (shown in the header and the trajectory; the
    adapter serves whatever file it loaded): the GGUF file's stem, or the bundled default's name."""
    import os
    from pathlib import Path

    path = os.environ.get("RA_LOCAL_MODEL")
    return Path(path).stem if path else "gemma-3-270m"


async def _first_listed_model(settings: Settings, adapter: Any) -> str:
    url = models_url(settings.provider, adapter)
    try:
        listed = await list_served_models(settings, adapter)
    except RunError as exc:
        raise RunError(f"no model given and {exc}: pass --model or set RA_MODEL", ExitCode.USAGE) from None
    if not listed:
        raise RunError(f"no model given and {url} lists none: pass --model or set RA_MODEL", ExitCode.USAGE)
    return listed[0]


#: Bounds on a model listing: the whole answer's time, and its size.
_LISTING_SECONDS = 10.0
_LISTING_BYTES = 4 * 2**20


def models_url(provider: str, adapter: Any) -> str:
    """Where ``provider`` lists its models: ``GET {base}/models`` for OpenAI and Chat Completions
    servers, Anthropic's ``/v1/models``, Gemini's ``/v1beta/models``."""
    base = str(adapter.base_url).rstrip("/")
    if provider == "anthropic":
        return f"{base}/models" if base.endswith("/v1") else f"{base}/v1/models"
    if provider == "gemini":
        import re

        return f"{base}/models" if re.search(r"/v\d+(?:alpha|beta)?\d*$", base) else f"{base}/v1beta/models"
    return f"{base}/models"


def _listing_headers(provider: str, adapter: Any) -> dict[str, str]:
    headers = dict(adapter.headers()) if hasattr(adapter, "headers") else {}
    if provider == "anthropic":
        headers.setdefault("anthropic-version", getattr(adapter, "api_version", "2023-06-01"))
        if getattr(adapter, "api_key", None):
            headers.setdefault("x-api-key", adapter.api_key)
    return headers


async def list_served_models(settings: Settings, adapter: Any) -> list[str]:
    """The model ids the provider's server lists, in its order (bounded: 10 s for the whole answer,
    4 MiB). Authentication
    failures raise the provider's error (exit 3); anything else a :class:`RunError` naming the URL."""
    import asyncio
    import json

    import httpx

    from ra.llm.errors import NetworkError, error_from_response

    url = models_url(settings.provider, adapter)
    content = bytearray()
    try:
        # One deadline for the whole answer: httpx's timeout bounds each read, and a server that
        # drips a byte every few seconds would never end. The body is bounded too.
        async with asyncio.timeout(_LISTING_SECONDS), httpx.AsyncClient(timeout=_LISTING_SECONDS) as http:
            headers = _listing_headers(settings.provider, adapter)
            async with http.stream("GET", url, headers=headers) as response:
                async for chunk in response.aiter_bytes():
                    content += chunk
                    if len(content) > _LISTING_BYTES:
                        raise RunError(
                            f"{url} answered with more than {_LISTING_BYTES // 2**20} MiB", ExitCode.PROVIDER
                        )
    except TimeoutError:
        raise RunError(f"{url} did not answer within {_LISTING_SECONDS:g}s", ExitCode.PROVIDER) from None
    except httpx.HTTPError as exc:
        raise NetworkError(f"{settings.provider}: {exc.__class__.__name__}: {exc}", cause=exc) from exc
    text = content.decode("utf-8", "replace")
    if response.status_code >= 400:
        try:
            body: Any = json.loads(text)
        except (ValueError, RecursionError):
            body = text
        if response.status_code in (401, 403):  # the adapter's key is redacted by the error itself
            raise error_from_response(settings.provider, response.status_code, body, response.headers)
        raise RunError(f"{url} did not list models (HTTP {response.status_code})", ExitCode.PROVIDER)
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):
        raise RunError(f"{url} did not answer with JSON", ExitCode.PROVIDER) from None
    return _model_ids(payload)


def _model_ids(payload: Any) -> list[str]:
    """Ids from ``{"data": [{"id": ...}]}`` (OpenAI, Anthropic, llama.cpp, vLLM, Ollama) or
    ``{"models": [{"name": "models/..."}]}`` (Gemini); anything else lists nothing."""
    if not isinstance(payload, dict):
        return []
    data, models = payload.get("data"), payload.get("models")
    ids = [item["id"] for item in data if _named(item, "id")] if isinstance(data, list) else []
    if isinstance(models, list):
        ids.extend(item["name"].removeprefix("models/") for item in models if _named(item, "name"))
    return ids


def _named(item: Any, key: str) -> bool:
    return isinstance(item, dict) and isinstance(item.get(key), str) and bool(item[key])

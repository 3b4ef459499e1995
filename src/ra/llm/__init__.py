"""ra.llm: one client for OpenAI (Responses), Anthropic (Messages), Gemini and any
OpenAI-compatible Chat Completions server, each spoken natively over httpx.

Names are resolved lazily (PEP 562) so that ``import ra.llm`` costs almost nothing: the HTTP stack
and the adapters load only when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

# name -> submodule that defines it
_EXPORTS: dict[str, str] = {}


def _export(module: str, *names: str) -> None:
    for name in names:
        _EXPORTS[name] = "." + module


_export(
    "types",
    "AudioData",
    "ContentKind",
    "ContentPart",
    "DocumentData",
    "FinishReason",
    "ImageData",
    "Message",
    "RateLimitInfo",
    "Request",
    "Response",
    "ResponseFormat",
    "Role",
    "StreamEvent",
    "StreamEventType",
    "ThinkingData",
    "Tool",
    "ToolCall",
    "ToolCallData",
    "ToolChoice",
    "ToolDefinition",
    "ToolResult",
    "ToolResultData",
    "Usage",
    "Warning",
)
_EXPORTS["ProviderWarning"] = ".types"
_export(
    "errors",
    "AbortError",
    "AccessDeniedError",
    "AuthenticationError",
    "ConfigurationError",
    "ConnectionPoolError",
    "ContentFilterError",
    "ContextLengthError",
    "InvalidRequestError",
    "InvalidToolCallError",
    "NetworkError",
    "NoObjectGeneratedError",
    "NotFoundError",
    "ProviderError",
    "QuotaExceededError",
    "RateLimitError",
    "RequestTimeoutError",
    "SDKError",
    "ServerError",
    "StreamError",
    "UnsupportedToolChoiceError",
)
_export("adapter", "ProviderAdapter")
_export("http", "AdapterTimeout")
_export("client", "Client", "Middleware", "get_default_client", "set_default_client")
_export("retrying", "RetryPolicy", "retry")
_export("catalog", "ModelInfo", "get_model_info", "list_models", "get_latest_model")
_export("accumulator", "StreamAccumulator")
_export("serialization", "message_to_json", "message_from_json", "messages_to_json", "messages_from_json")
_export(
    "generation",
    "AbortController",
    "AbortSignal",
    "GenerateResult",
    "StepResult",
    "StreamResult",
    "StreamObjectResult",
    "TimeoutConfig",
    "generate",
    "generate_object",
    "stream",
    "stream_object",
    "generate_sync",
    "generate_object_sync",
)
_export("providers.openai_responses", "OpenAIAdapter")
_export("providers.anthropic", "AnthropicAdapter")
_export("providers.gemini", "GeminiAdapter")
_export("providers.openai_chat", "OpenAICompatibleAdapter")

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, {"ProviderWarning": "Warning"})


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .accumulator import StreamAccumulator
    from .adapter import ProviderAdapter
    from .catalog import ModelInfo, get_latest_model, get_model_info, list_models
    from .client import Client, Middleware, get_default_client, set_default_client
    from .errors import *
    from .generation import (
        AbortController,
        AbortSignal,
        GenerateResult,
        StepResult,
        StreamObjectResult,
        StreamResult,
        TimeoutConfig,
        generate,
        generate_object,
        generate_object_sync,
        generate_sync,
        stream,
        stream_object,
    )
    from .http import AdapterTimeout
    from .providers.anthropic import AnthropicAdapter
    from .providers.gemini import GeminiAdapter
    from .providers.openai_chat import OpenAICompatibleAdapter
    from .providers.openai_responses import OpenAIAdapter
    from .retrying import RetryPolicy, retry
    from .serialization import message_from_json, message_to_json, messages_from_json, messages_to_json
    from .types import *

"""Error taxonomy (unified-llm-spec 6.1-6.5) and the one place that turns an HTTP error into it.

Adapters call :func:`error_from_response` with the status, headers and decoded body; the status
table, the gRPC table, message classification and Retry-After parsing all live here so that every
provider classifies the same way.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from typing import Any

from .redaction import redact, redact_value

__all__ = [
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
    "error_from_response",
    "error_in_answer",
    "in_answer_status",
    "parse_retry_after",
]


class SDKError(Exception):
    """Base of every ra.llm error. ``retryable`` defaults to True: unknown errors are retried."""

    retryable: bool = True

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        # Error text travels far (events, --json, trajectories, stderr): never with a key in it.
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.cause = cause
        if cause is not None:
            self.__cause__ = cause


class ProviderError(SDKError):
    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None = None,
        error_code: str | None = None,
        retryable: bool | None = None,
        retry_after: float | None = None,
        raw: Any = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message, cause=cause)
        self.provider = provider
        self.status_code = status_code
        self.error_code = error_code
        if retryable is not None:
            self.retryable = retryable
        self.retry_after = retry_after
        self.raw = redact_value(raw)

    def __str__(self) -> str:
        where = f"{self.provider}" + (f" HTTP {self.status_code}" if self.status_code else "")
        return f"{self.message} ({where})"


class AuthenticationError(ProviderError):
    retryable = False


class AccessDeniedError(ProviderError):
    retryable = False


class NotFoundError(ProviderError):
    retryable = False


class InvalidRequestError(ProviderError):
    retryable = False


class RateLimitError(ProviderError):
    retryable = True


class ServerError(ProviderError):
    retryable = True


class ContentFilterError(ProviderError):
    retryable = False


class ContextLengthError(ProviderError):
    retryable = False


class QuotaExceededError(ProviderError):
    retryable = False


class RequestTimeoutError(SDKError):
    """A timeout. Not retryable by default (unified-llm-spec 6.4): a caller's own deadline - a
    per-step or total timeout, a stream's total bound - would only be broken again. ``network``
    marks one on the network instead - connecting, waiting for an answer, a stream gone silent -
    which is transient: the agent loop retries those (:func:`ra.llm.retrying.transient`, the
    Go-port spec's "network timeout: retry with backoff")."""

    retryable = False
    network = False

    def __init__(
        self,
        message: str,
        *,
        cause: BaseException | None = None,
        network: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, cause=cause)
        self.network = network
        #: A server's ``Retry-After`` with its 408, which a retry waits for.
        self.retry_after = retry_after


class AbortError(SDKError):
    retryable = False


class NetworkError(SDKError):
    retryable = True


class StreamError(SDKError):
    retryable = True


class ConnectionPoolError(SDKError):
    """No connection of the local HTTP pool came free in time: too many requests in flight on one
    httpx client in this process (a client shared by several adapters, or one passed in with
    smaller limits than the adapter's ``max_concurrency``). A local, passing condition - the
    request never reached the provider - so it is retried, and it is never reported as the
    provider's or the model's failure."""

    retryable = True


class InvalidToolCallError(SDKError):
    retryable = False


class UnsupportedToolChoiceError(SDKError):
    retryable = False


class NoObjectGeneratedError(SDKError):
    retryable = False

    def __init__(self, message: str, *, text: str = "", cause: BaseException | None = None) -> None:
        super().__init__(message, cause=cause)
        self.text = text


class ConfigurationError(SDKError):
    retryable = False


_STATUS: dict[int, type[ProviderError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: AccessDeniedError,
    404: NotFoundError,
    413: ContextLengthError,
    422: InvalidRequestError,
    429: RateLimitError,
}

_GRPC: dict[str, type[ProviderError]] = {
    "NOT_FOUND": NotFoundError,
    "INVALID_ARGUMENT": InvalidRequestError,
    "UNAUTHENTICATED": AuthenticationError,
    "PERMISSION_DENIED": AccessDeniedError,
    "RESOURCE_EXHAUSTED": RateLimitError,
    "UNAVAILABLE": ServerError,
    "INTERNAL": ServerError,
}

# Message classification (spec 6.5), checked in this order; first hit wins. The patterns cover the
# providers' real wordings: OpenAI "context_length_exceeded" / "maximum context length", Anthropic
# "prompt is too long", Gemini "input token count ... exceeds the maximum", llama.cpp
# "exceeds the available context size".
_MESSAGE_RULES: list[tuple[re.Pattern[str], type[ProviderError]]] = [
    (
        re.compile(
            r"context[ _]length|context window|too many tokens|prompt is too long|maximum context"
            r"|token count .*exceeds|exceeds the (?:available )?context|input is too long|reduce the length",
            re.I,
        ),
        ContextLengthError,
    ),
    (re.compile(r"insufficient_quota|credit balance is too low|quota_exceeded", re.I), QuotaExceededError),
    (re.compile(r"content[ _]filter|safety|content_policy|blocked", re.I), ContentFilterError),
    (
        re.compile(r"unauthori[sz]ed|invalid[ _-]?(?:api[ _-]?)?key|api key not valid|authentication", re.I),
        AuthenticationError,
    ),
    (re.compile(r"not[ _]found|does not exist|unknown model", re.I), NotFoundError),
]


def parse_retry_after(headers: Mapping[str, str] | None, body: Any = None) -> float | None:
    """Seconds to wait, from ``retry-after-ms``, ``retry-after`` (seconds or HTTP date), or a
    Gemini ``google.rpc.RetryInfo`` detail (``"retryDelay": "12s"``) in the error body."""
    if headers:
        lower = {k.lower(): v for k, v in headers.items()}
        ms = lower.get("retry-after-ms")
        if ms:
            try:
                return max(0.0, float(ms) / 1000.0)
            except ValueError:
                pass
        value = lower.get("retry-after")
        if value:
            try:
                return max(0.0, float(value))
            except ValueError:
                try:
                    parsed = email.utils.parsedate_to_datetime(value)
                except (TypeError, ValueError):
                    parsed = None  # neither seconds nor an HTTP date: ignore it, as if absent
                if parsed is not None:
                    return max(0.0, parsed.timestamp() - time.time())
    if isinstance(body, dict):
        error = body.get("error")
        details = error.get("details") if isinstance(error, dict) else None
        if isinstance(details, list):
            for detail in details:
                if isinstance(detail, dict) and "retryDelay" in detail:
                    delay = str(detail["retryDelay"])
                    try:
                        return float(delay.rstrip("s"))
                    except ValueError:
                        return None
    return None


def _extract(body: Any) -> tuple[str | None, str | None, str | None]:
    """(message, error code, error type/gRPC status) from the providers' error bodies."""
    if isinstance(body, list) and body:
        body = body[0]  # Gemini sometimes wraps the error in a one-element array
    if not isinstance(body, dict):
        return (body if isinstance(body, str) and body else None), None, None
    error = body.get("error", body)
    if isinstance(error, str):
        return error, None, body.get("type") if isinstance(body.get("type"), str) else None
    if not isinstance(error, dict):
        return None, None, None
    message = error.get("message")
    code = error.get("code")
    kind = error.get("type") or error.get("status")
    return (
        message if isinstance(message, str) else None,
        str(code) if code is not None else None,
        kind if isinstance(kind, str) else None,
    )


def error_from_response(
    provider: str,
    status: int,
    body: Any,
    headers: Mapping[str, str] | None = None,
    *,
    default_message: str | None = None,
) -> SDKError:
    """Build the right error for an HTTP error response (or an error payload inside a stream,
    passed with the status it would have had)."""
    message, code, kind = _extract(body)
    message = message or default_message or f"HTTP {status}"
    retry_after = parse_retry_after(headers, body)
    haystack = " ".join(x for x in (message, code, kind) if x)

    cls: type[ProviderError] | None = None
    if kind in _GRPC:
        cls = _GRPC[kind]
    elif kind == "DEADLINE_EXCEEDED" or status == 408:
        # The server's own clock ran out (HTTP 408, gRPC DEADLINE_EXCEEDED), not the caller's
        # deadline: transient, as a timeout on the network is (the agent loop retries it).
        return RequestTimeoutError(f"{message} ({provider} HTTP {status})", network=True, retry_after=retry_after)
    elif kind == "overloaded_error" or status == 529:
        cls = ServerError
    if cls is None:
        cls = _STATUS.get(status)
        if cls is None and status >= 500:
            cls = ServerError
    # Message classification refines an ambiguous status (400/403/404/413/429 bodies often say more).
    for pattern, refined in _MESSAGE_RULES:
        if pattern.search(haystack):
            if cls in (None, InvalidRequestError, ProviderError) or (
                refined in (ContextLengthError, QuotaExceededError, ContentFilterError)
                and cls in (InvalidRequestError, RateLimitError, AccessDeniedError, NotFoundError, None)
            ):
                # Gemini answers a bad key with 400 INVALID_ARGUMENT "API key not valid".
                cls = refined
            break
    if cls is None:
        return ProviderError(
            message,
            provider=provider,
            status_code=status,
            error_code=code,
            retry_after=retry_after,
            raw=body,
        )
    return cls(
        message,
        provider=provider,
        status_code=status,
        error_code=code or kind,
        retry_after=retry_after,
        raw=body,
    )


#: The HTTP status an error payload found inside a 200 answer (a stream's error event, a failed
#: response) would have had, by the error's ``code`` or ``type`` as Anthropic, OpenAI (Responses
#: and Chat Completions) and OpenAI-compatible servers name them, so that such an error is
#: classified exactly as the same error over HTTP (retryable or not, fallback or not).
IN_ANSWER_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "invalid_prompt": 400,
    "invalid_image": 400,
    "invalid_value": 400,
    "context_length_exceeded": 400,
    "authentication_error": 401,
    "invalid_api_key": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "api_error": 500,
    "server_error": 500,
    "internal_error": 500,
    "server_is_overloaded": 503,
    "overloaded": 503,
    "slow_down": 503,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def in_answer_status(payload: Any) -> int:
    """The HTTP status an ``{"error": {...}}`` payload inside a 200 answer would have had: the
    error's numeric ``code`` (Gemini sends the status itself), else :data:`IN_ANSWER_STATUS` of
    its ``code`` or ``type``, else 500."""
    error = payload.get("error") if isinstance(payload, Mapping) else None
    if not isinstance(error, Mapping):
        return 500
    code = error.get("code")
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return code
    if isinstance(code, str) and code.isdigit() and 400 <= int(code) <= 599:
        return int(code)
    return IN_ANSWER_STATUS.get(str(code)) or IN_ANSWER_STATUS.get(str(error.get("type"))) or 500


def error_in_answer(provider: str, payload: Any, *, default_message: str) -> SDKError:
    """The error an ``{"error": {...}}`` payload inside a 200 answer stands for: classified by
    :func:`error_from_response` with the status of :func:`in_answer_status`."""
    return error_from_response(provider, in_answer_status(payload), payload, default_message=default_message)

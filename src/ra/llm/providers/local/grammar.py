"""How tools are offered to the local model and how its replies are held to shape.

Small local models have no reliable native tool-call format, so the adapter brings its own: the
tools are described in the system turn (:func:`tool_block`, :func:`example_block`) and the reply
is sampled under a llama.cpp GBNF grammar built from the same JSON Schemas (:func:`calls_grammar`,
:func:`format_grammar`, :func:`answer_grammar`, joined by :func:`union_grammar`). The description
and the grammars live together because they must agree: what the prompt asks for (the call
shape, required arguments only, ``{"answer": ...}``) is exactly what the grammar accepts.
llama-cpp-python's schema converter is imported only when a grammar is built.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from ...errors import InvalidRequestError
from ...types import Message, Request, ToolChoice, ToolDefinition, Warning
from .loading import PROVIDER
from .prompt import PLAIN_LABELS, json_text, to_turns


def tool_block(
    tools: list[ToolDefinition], choice: ToolChoice, max_calls: int, *, structured: bool, compact: bool
) -> str:
    """The system-turn text that offers ``tools``: the reply shape, then the tools.

    ``compact`` lists each tool as a signature and the first sentence of its description instead
    of its whole JSON Schema: a small model reads a quarter of the tokens, and the grammar holds
    the arguments to the schema either way."""
    call_shape = '{"tool_calls": [{"name": "<tool name>", "arguments": {<the tool\'s parameters>}}]}'
    if choice.mode == "auto" and structured:
        lines = [
            "Reply with exactly one JSON object and nothing else. To use a tool:",
            call_shape,
            'When the task is finished, give your final answer instead: {"answer": "<what you did and found>"}',
        ]
    else:
        lines = ["You can call tools. To call tools, reply with only a JSON object of this form and nothing else:"]
        lines.append(call_shape)
    lines.append(f"List at most {max_calls} calls; they run in order." if max_calls > 1 else "Call one tool at a time.")
    lines.append("Each result comes back in a Tool message.")
    if choice.mode == "auto" and not structured:
        lines.append("To answer without calling a tool, reply in plain text.")
    lines.append("Tools:")
    if compact:
        lines += [_signature(t) for t in tools]
    else:
        lines += [json_text({"name": t.name, "description": t.description, "parameters": t.parameters}) for t in tools]
    if choice.mode == "named":
        lines.append(f"Call the tool {choice.tool_name} now.")
    elif choice.mode == "required":
        lines.append("Reply with a tool call now.")
    return "\n".join(lines)


def example_block(examples: list[Message], tools: list[ToolDefinition], structured: bool) -> str | None:
    """``examples`` written out as a short transcript in the reply shape the model is held to,
    or None when they call a tool that is not offered (an example must not suggest a tool the
    grammar would refuse). Small base models copy a worked example far better than they follow
    a description: one is often the difference between calling tools sensibly and not at all."""
    offered = {t.name for t in tools}
    called = {p.tool_call.name for m in examples for p in m.content if p.tool_call is not None}
    if not called <= offered:
        return None
    turns = to_turns(examples, None, structured=structured)
    return "\n".join(["Example:", *(f"{PLAIN_LABELS[t.role]}: {t.text}" for t in turns)])


def required_only(tool: ToolDefinition) -> ToolDefinition:
    """``tool`` with only its required top-level parameters. A small model fills in every
    optional parameter it is allowed to (a made-up ``workdir``, a timeout of 10^15 ms) and
    breaks calls that would otherwise work; without them the tools use their defaults."""
    schema = tool.parameters
    props = schema.get("properties")
    if not isinstance(props, dict):
        return tool
    required = [name for name in schema.get("required") or [] if name in props]
    if len(required) == len(props):
        return tool
    trimmed = {**schema, "properties": {name: props[name] for name in required}, "required": required}
    return ToolDefinition(tool.name, tool.description, trimmed)


def _signature(tool: ToolDefinition) -> str:
    """``- name(a: string, b?: integer): First sentence of the description.``"""
    schema = tool.parameters if isinstance(tool.parameters, dict) else {}
    props = schema.get("properties")
    required = set(schema.get("required") or [])
    params = []
    if isinstance(props, dict):
        for name, prop in props.items():
            mark = "" if name in required else "?"
            params.append(f"{name}{mark}: {_type_label(prop)}")
    text = f"- {tool.name}({', '.join(params)})"
    summary = _first_sentence(tool.description or "")
    return f"{text}: {summary}" if summary else text


def _type_label(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(json_text(v) for v in schema["enum"])
    if "const" in schema:
        return json_text(schema["const"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array":
        return f"array of {_type_label(schema.get('items'))}"
    if isinstance(kind, str):
        return kind
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(_type_label(v) for v in schema[key])
    return "any"


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    match = re.search(r"[.!?](?=\s|$)", text)
    return text[: match.end()] if match else text


def _calls_schema(tools: list[ToolDefinition], max_calls: int, loose: set[str]) -> dict[str, Any]:
    variants = [
        {
            "type": "object",
            "properties": {
                "name": {"const": tool.name},
                "arguments": {"type": "object"} if tool.name in loose else tool.parameters,
            },
            "required": ["name", "arguments"],
        }
        for tool in tools
    ]
    item: dict[str, Any] = variants[0] if len(variants) == 1 else {"oneOf": variants}
    return {
        "type": "object",
        "properties": {"tool_calls": {"type": "array", "items": item, "minItems": 1, "maxItems": max_calls}},
        "required": ["tool_calls"],
    }


_STRING_RULE = 'string ::= "\\"" char* "\\"" space'
_TRIMMED_STRING_RULES = (
    'string ::= "\\"" ( char* string-last )? "\\"" space\n'
    'string-last ::= [^"\\\\ \\t\\n\\r] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])'
)


def trimmed_strings(grammar: str) -> str:
    """``grammar`` with its plain JSON strings unable to end in a blank (an escaped ``\\n`` may).

    Asked for ``echo "print('Hi')" > hi.py``, the default 270M model writes ``echo "`` and the
    ``"`` ends the JSON string, leaving the command ``echo `` (a quarter to half of all first calls
    in our runs). Refusing a string that ends in a blank makes it write ``\\"`` or ``'`` instead.
    Applied for base models only; a grammar whose string rule looks different is left alone."""
    if _STRING_RULE not in grammar.splitlines():
        return grammar
    return "\n".join(_TRIMMED_STRING_RULES if line == _STRING_RULE else line for line in grammar.splitlines())


def _gbnf(schema: dict[str, Any]) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(json.dumps(schema))


def calls_grammar(tools: list[ToolDefinition], max_calls: int, warnings: list[Warning]) -> str:
    """GBNF for a tool turn. A tool whose schema the converter cannot handle falls back to "any
    JSON object" for its arguments (still valid JSON, no longer schema-checked), with a Warning."""
    try:
        return _gbnf(_calls_schema(tools, max_calls, set()))
    except Exception:
        pass
    loose: set[str] = set()
    for tool in tools:
        try:
            _gbnf(_calls_schema([tool], 1, set()))
        except Exception as exc:
            loose.add(tool.name)
            warnings.append(
                Warning(
                    f"tool {tool.name!r}: its parameter schema cannot be turned into a grammar ({exc}); its "
                    "arguments are only constrained to be a JSON object",
                    "loose_tool_schema",
                )
            )
    return _gbnf(_calls_schema(tools, max_calls, loose))


def format_grammar(request: Request) -> str | None:
    fmt = request.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json":
        return _gbnf({"type": "object"})
    try:
        return _gbnf(fmt.json_schema or {})
    except Exception as exc:
        raise InvalidRequestError(
            f"response_format schema cannot be turned into a grammar: {exc}", provider=PROVIDER
        ) from exc


@functools.cache
def answer_grammar() -> str:
    return _gbnf(
        {"type": "object", "properties": {"answer": {"type": "string", "minLength": 1}}, "required": ["answer"]}
    )


def union_grammar(calls: str, answer: str) -> str:
    """GBNF accepting either grammar: both are renamed apart, then joined under a new root."""
    return "\n".join([_prefixed(calls, "c-"), _prefixed(answer, "a-"), "root ::= c-root | a-root"])


def _prefixed(grammar: str, prefix: str) -> str:
    """``grammar`` with every rule name prefixed (outside string literals and character classes)."""
    names = {m.group(1) for m in re.finditer(r"^([a-zA-Z][a-zA-Z0-9-]*)\s*::=", grammar, re.M)}
    return "\n".join(_rename_line(line, names, prefix) for line in grammar.splitlines())


def _rename_line(line: str, names: set[str], prefix: str) -> str:
    result: list[str] = []
    i = 0
    n = len(line)
    while i < n:
        char = line[i]
        if char == '"':
            j = i + 1
            while j < n and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            result.append(line[i : j + 1])
            i = j + 1
        elif char == "[":
            j = i + 1
            while j < n and line[j] != "]":
                j += 2 if line[j] == "\\" else 1
            result.append(line[i : j + 1])
            i = j + 1
        elif char.isalpha():
            j = i
            while j < n and (line[j].isalnum() or line[j] == "-"):
                j += 1
            word = line[i:j]
            result.append(prefix + word if word in names else word)
            i = j
        else:
            result.append(char)
            i += 1
    return "".join(result)

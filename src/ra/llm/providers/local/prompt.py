"""Rendering a conversation into the prompt the local model reads.

Messages become role/text turns (tool calls and results written out as text, in the JSON shape
the tool grammar enforces), and the turns become one of the prompt formats: a plain transcript
for base models, Gemma or ChatML turn markers, or the GGUF's own Jinja2 chat template. Kept apart
from the adapter so that the prompt is a function of the messages alone, checked without loading
a model. Role markers are separate special-token segments and message text is plain text, so a
message can never forge a turn boundary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigurationError, InvalidRequestError
from ...types import ContentKind, Message, Role, ToolCallData, ToolResultData
from .loading import PROVIDER


@dataclass(slots=True)
class Turn:
    role: str  # system | user | assistant | tool
    text: str


@dataclass(slots=True)
class Prompt:
    #: (text, parse special tokens) pieces, tokenised one by one.
    segments: list[tuple[str, bool]]
    stops: list[str]
    add_bos: bool

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.segments)


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _calls_json(calls: list[ToolCallData]) -> str:
    items = []
    for call in calls:
        args: Any = call.arguments
        if isinstance(args, str):  # malformed arguments stay as the model wrote them
            try:
                args = json.loads(args, strict=False)
            except ValueError:
                pass
        items.append({"name": call.name, "arguments": args})
    return json_text({"tool_calls": items})


def _result_text(result: ToolResultData, name: str | None) -> str:
    content = result.content if isinstance(result.content, str) else json_text(result.content)
    head = "Error from" if result.is_error else "Result of"
    return f"{head} {name or 'tool'} (call {result.tool_call_id}):\n{content}"


def _text_of(message: Message, what: str) -> str:
    texts = []
    for part in message.content:
        if part.kind == ContentKind.TEXT:
            texts.append(part.text or "")
        else:
            raise InvalidRequestError(f"{what} messages may only hold text, got a {part.kind} part", provider=PROVIDER)
    return "\n".join(texts)


def to_turns(messages: list[Message], tool_block: str | None, *, structured: bool = False) -> list[Turn]:
    """The conversation as role/text turns, with tool calls and results written out as text.

    ``structured``: earlier text-only replies are written as ``{"answer": ...}`` objects, the
    shape the model is held to, so the transcript shows it only that shape."""
    names: dict[str, str] = {}
    turns: list[Turn] = []
    for message in messages:
        role = message.role
        if role in (Role.SYSTEM, Role.DEVELOPER):
            turns.append(Turn("system", _text_of(message, str(role))))
        elif role == Role.ASSISTANT:
            texts: list[str] = []
            calls: list[ToolCallData] = []
            for part in message.content:
                if part.kind == ContentKind.TEXT and part.text:
                    texts.append(part.text)
                elif part.tool_call is not None:
                    calls.append(part.tool_call)
                    names[part.tool_call.id] = part.tool_call.name
                elif part.kind in (ContentKind.THINKING, ContentKind.REDACTED_THINKING):
                    continue  # other providers' reasoning means nothing to this model
                elif part.kind != ContentKind.TEXT:
                    raise InvalidRequestError(
                        f"assistant messages may hold text and tool calls, got a {part.kind} part", provider=PROVIDER
                    )
            if calls:
                texts.append(_calls_json(calls))
            elif structured and texts:
                texts = [json_text({"answer": "\n".join(texts)})]
            turns.append(Turn("assistant", "\n".join(texts)))
        else:  # USER, TOOL
            texts = []
            for part in message.content:
                if part.kind == ContentKind.TEXT:
                    texts.append(part.text or "")
                elif part.tool_result is not None:
                    if texts:
                        turns.append(Turn("user", "\n".join(texts)))
                        texts = []
                    name = message.name or names.get(part.tool_result.tool_call_id)
                    turns.append(Turn("tool", _result_text(part.tool_result, name)))
                else:
                    raise InvalidRequestError(
                        f"the local model reads text only; a {part.kind} part cannot be sent to it", provider=PROVIDER
                    )
            if texts or (role == Role.USER and not message.content):
                turns.append(Turn("tool" if role == Role.TOOL else "user", "\n".join(texts)))
    if tool_block:
        first = next((i for i, turn in enumerate(turns) if turn.role == "system"), None)
        if first is None:
            turns.insert(0, Turn("system", tool_block))
        else:
            turns[first] = Turn("system", f"{turns[first].text}\n\n{tool_block}")
    return turns


PLAIN_LABELS = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}


def _merged(turns: list[Turn], roles: dict[str, str]) -> list[Turn]:
    """Turns mapped onto a template's roles, consecutive turns of one role joined (many
    templates insist on alternating roles)."""
    out: list[Turn] = []
    for turn in turns:
        role = roles[turn.role]
        text = f"Tool output:\n{turn.text}" if turn.role == "tool" else turn.text
        if out and out[-1].role == role:
            out[-1] = Turn(role, f"{out[-1].text}\n\n{text}")
        else:
            out.append(Turn(role, text))
    return out


def render_plain(turns: list[Turn], add_bos: bool) -> Prompt:
    body = "".join(f"{PLAIN_LABELS[turn.role]}: {turn.text}\n\n" for turn in turns)
    stops = [f"\n{label}:" for label in ("User", "System", "Tool", "Assistant")]
    return Prompt([(body + "Assistant:", False)], stops, add_bos)


def _render_marked(
    turns: list[Turn], add_bos: bool, *, roles: dict[str, str], open_: str, close: str, reply: str
) -> Prompt:
    segments: list[tuple[str, bool]] = []
    for turn in _merged(turns, roles):
        segments += [(open_.format(role=turn.role), True), (turn.text, False), (close, True)]
    segments.append((reply, True))
    stops = [close.strip(), open_.split("{", 1)[0]]
    return Prompt(segments, stops, add_bos)


def render_gemma(turns: list[Turn], add_bos: bool) -> Prompt:
    roles = {"system": "user", "user": "user", "tool": "user", "assistant": "model"}
    return _render_marked(
        turns,
        add_bos,
        roles=roles,
        open_="<start_of_turn>{role}\n",
        close="<end_of_turn>\n",
        reply="<start_of_turn>model\n",
    )


def render_chatml(turns: list[Turn], add_bos: bool) -> Prompt:
    roles = {"system": "system", "user": "user", "tool": "user", "assistant": "assistant"}
    return _render_marked(
        turns,
        add_bos,
        roles=roles,
        open_="<|im_start|>{role}\n",
        close="<|im_end|>\n",
        reply="<|im_start|>assistant\n",
    )


def render_template(template: Any, turns: list[Turn], add_bos: bool) -> Prompt:
    """``turns`` through a GGUF's own chat template (a llama-cpp-python ``Jinja2ChatFormatter``).

    The template writes the role markers itself, so its output is one special-token segment; a
    BOS token it already writes is not added a second time."""
    roles = {"system": "system", "user": "user", "tool": "user", "assistant": "assistant"}
    merged = _merged(turns, roles)
    messages = [{"role": t.role, "content": t.text} for t in merged]
    try:
        result = template(messages=messages)
    except Exception:
        # Some templates refuse a system role: fold it into the first user turn.
        system = "\n\n".join(t.text for t in merged if t.role == "system")
        rest = [m for m in messages if m["role"] != "system"]
        if system:
            if rest and rest[0]["role"] == "user":
                rest[0] = {"role": "user", "content": f"{system}\n\n{rest[0]['content']}"}
            else:
                rest.insert(0, {"role": "user", "content": system})
        try:
            result = template(messages=rest)
        except Exception as exc:
            raise ConfigurationError(
                f"the model's chat template failed ({exc}); pass chat_format='plain', 'gemma' or 'chatml'",
                cause=exc,
            ) from exc
    stops = result.stop if isinstance(result.stop, list) else [result.stop] if result.stop else []
    bos_text = template.bos_token
    if bos_text and result.prompt.startswith(bos_text):
        add_bos = False
    return Prompt([(result.prompt, True)], [s for s in stops if s], add_bos)

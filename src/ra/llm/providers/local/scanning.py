"""Reading the local model's output while it is generated, character by character.

The worker thread decodes tokens into text; these classes turn that text into the worker's items
(``("text", delta)``, ``("call_start", ...)``, ``("call_delta", ...)``, ``("call_end", ...)``)
without waiting for the reply to end: :class:`TextFilter` cuts free text at stop sequences,
:class:`CallScanner` announces each tool call as soon as its name is complete and streams its
arguments, :class:`StructuredReply` routes a structured-auto reply to calls or to a streamed
``{"answer": ...}``. They hold no model state, so they are tested (and fuzzed) on plain strings.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any


class TextFilter:
    """Turns decoded model text into deltas: cuts at the first stop sequence, holds back what
    might be the start of one (and trailing blanks) until the next piece shows whether it is,
    and drops the reply's leading blanks."""

    __slots__ = ("pending", "started", "stopped", "stops")

    def __init__(self, stops: list[str]) -> None:
        self.stops = [s for s in stops if s]
        self.pending = ""
        self.started = False
        self.stopped = False

    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        pending = self.pending + text
        cut = min((i for i in (pending.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            self.pending = ""
            return self._out(pending[:cut].rstrip())
        hold = len(pending) - len(pending.rstrip())
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(pending)), hold, -1):
                if pending.endswith(stop[:size]):
                    hold = size
                    break
        kept = pending[: len(pending) - hold]
        hold += len(kept) - len(kept.rstrip())  # blanks before a possible stop wait with it
        self.pending = pending[len(pending) - hold :] if hold else ""
        return self._out(pending[: len(pending) - hold])

    def _out(self, text: str) -> str:
        if not self.started:
            text = text.lstrip()
            if not text:
                return ""
            self.started = True
        return text

    def finish(self) -> str:
        rest, self.pending = self.pending.rstrip(), ""
        return "" if self.stopped else self._out(rest)


_NAME = re.compile(r'"name"\s*:\s*("(?:[^"\\]|\\.)*")')
_ARGS_KEY = re.compile(r'"arguments"\s*:\s*$')


class CallScanner:
    """Follows a grammar-shaped tool turn ``{"tool_calls": [{"name": ..., "arguments": {...}}]}``
    character by character, so that each call is announced as soon as its name is complete and
    its argument text streams as it is generated."""

    def __init__(self, emit: Callable[[tuple[Any, ...]], None]) -> None:
        self.emit = emit
        self.depth = 0
        self.in_string = False
        self.escape = False
        self.call: list[str] | None = None  # text of the open call object
        self.call_id = ""
        self.name: str | None = None
        self.args: list[str] | None = None  # argument text seen so far (None: not started)
        self.args_open = False
        self.sent = 0  # argument characters already emitted
        self.completed = 0

    def feed(self, text: str) -> None:
        for char in text:
            self._char(char)
        self._progress()

    def _char(self, char: str) -> None:
        if self.call is not None:
            self.call.append(char)
        if self.args_open:
            assert self.args is not None
            self.args.append(char)
        if self.in_string:
            if self.escape:
                self.escape = False
            elif char == "\\":
                self.escape = True
            elif char == '"':
                self.in_string = False
            return
        if char == '"':
            self.in_string = True
        elif char in "{[":
            self.depth += 1
            if self.depth == 3 and char == "{":
                self.call, self.call_id, self.name, self.args, self.sent = [char], _call_id(), None, None, 0
            elif (
                self.depth == 4
                and self.call is not None
                and self.args is None
                and _ARGS_KEY.search("".join(self.call[:-1]))
            ):
                self.args = [char]
                self.args_open = True
        elif char in "}]":
            self.depth -= 1
            if self.depth == 3:
                self.args_open = False
            elif self.depth == 2 and self.call is not None:
                self._close(complete=True)

    def _progress(self) -> None:
        if self.call is None:
            return
        if self.name is None:
            head = "".join(self.call)
            if self.args is not None:
                head = head[: len(head) - len(self.args)]
            match = _NAME.search(head)
            if match is None:
                return
            self.name = json.loads(match.group(1))
            self.emit(("call_start", self.call_id, self.name))
        if self.args is not None and len(self.args) > self.sent:
            self.emit(("call_delta", self.call_id, self.name, "".join(self.args[self.sent :])))
            self.sent = len(self.args)

    def _close(self, *, complete: bool) -> None:
        self._progress()
        assert self.call is not None
        name = self.name
        raw = "".join(self.args or [])
        if name is None:  # cut off before the name was complete
            name = ""
            self.emit(("call_start", self.call_id, name))
        self.emit(("call_end", self.call_id, name, raw, complete))
        if complete:
            self.completed += 1
        self.call = None
        self.args = None
        self.args_open = False

    def finish(self) -> None:
        """The reply ended: a call still open was cut off (its arguments are reported as is)."""
        if self.call is not None:
            self._close(complete=False)


_REPLY_KEY = re.compile(r'\s*\{\s*"(tool_calls|answer)"')
_ANSWER_OPEN = re.compile(r'\s*\{\s*"answer"\s*:\s*"')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class _AnswerScanner:
    """Follows ``{"answer": "..."}`` as it is generated and emits the string's decoded text as it
    grows, so a final answer produced under the grammar still streams as text. The text is cut at
    the prompt's stop sequences, as free text is: a base model may go on inside the string with
    the next turn of the transcript (``\\n\\nUser: ...``); :attr:`stopped` then ends generation."""

    def __init__(self, emit: Callable[[tuple[Any, ...]], None], stops: list[str] | None = None) -> None:
        self.emit = emit
        self.buffer = ""  # text not yet decoded (the opening, or an escape still incomplete)
        self.opened = False
        self.closed = False
        self.text = TextFilter(stops or [])  # cuts at stops, drops leading blanks, holds trailing ones

    @property
    def stopped(self) -> bool:
        """A stop sequence appeared in the answer: nothing more will be emitted."""
        return self.text.stopped

    def feed(self, chunk: str) -> None:
        if self.closed:
            return
        self.buffer += chunk
        if not self.opened:
            match = _ANSWER_OPEN.match(self.buffer)
            if match is None:
                return
            self.opened = True
            self.buffer = self.buffer[match.end() :]
        out: list[str] = []
        i = 0
        buf = self.buffer
        while i < len(buf):
            char = buf[i]
            if char == '"':
                self.closed = True
                i = len(buf)
                break
            if char != "\\":
                out.append(char)
                i += 1
                continue
            decoded, used = _unescape(buf, i)
            if used == 0:
                break  # the escape is not complete yet
            out.append(decoded)
            i += used
        self.buffer = buf[i:]
        self._send("".join(out))

    def _send(self, text: str) -> None:
        delta = self.text.feed(text) if text else ""
        if self.closed or self.text.stopped:
            self.closed = True
            delta += self.text.finish()
        if delta:
            self.emit(("text", delta))

    def finish(self) -> None:
        """The reply ended (a string cut off by the token limit ends where it stopped)."""
        if not self.closed:
            self.closed = True
            self._send("")


def _unescape(buf: str, i: int) -> tuple[str, int]:
    """The character the JSON escape at ``buf[i]`` stands for and how many characters it took;
    ``("", 0)`` while ``buf`` ends before the escape does. A lone surrogate becomes U+FFFD."""
    if i + 1 >= len(buf):
        return "", 0
    kind = buf[i + 1]
    if kind != "u":
        return _ESCAPES.get(kind, kind), 2
    if i + 6 > len(buf):
        return "", 0
    code = _hex(buf[i + 2 : i + 6])
    if code is None:
        return "\ufffd", 2  # not a valid escape (the grammar forbids it; be safe anyway)
    if 0xDC00 <= code < 0xE000:
        return "\ufffd", 6
    if not 0xD800 <= code < 0xDC00:
        return chr(code), 6
    # A high surrogate: the low one should follow as another \uXXXX escape.
    tail = buf[i + 6 : i + 12]
    if len(tail) < 6 and "\\u"[: len(tail)] == tail[:2]:
        return "", 0  # could still become a pair
    if tail.startswith("\\u") and len(tail) == 6:
        low = _hex(tail[2:]) or 0
        if 0xDC00 <= low < 0xE000:
            return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)), 12
    return "\ufffd", 6


def _hex(text: str) -> int | None:
    if len(text) != 4 or any(c not in "0123456789abcdefABCDEF" for c in text):
        return None
    return int(text, 16)


class StructuredReply:
    """Routes a reply generated under the structured-auto grammar: a ``tool_calls`` object goes
    to a :class:`CallScanner`, an ``answer`` object to an :class:`_AnswerScanner`. The two
    are told apart by the first key, a few tokens in; nothing is emitted before that."""

    def __init__(self, emit: Callable[[tuple[Any, ...]], None], stops: list[str] | None = None) -> None:
        self.head = ""
        self.route: CallScanner | _AnswerScanner | None = None
        self.calls = CallScanner(emit)
        self.answer = _AnswerScanner(emit, stops)

    def feed(self, text: str) -> None:
        if self.route is None:
            self.head += text
            match = _REPLY_KEY.match(self.head)
            if match is None:
                return
            self.route = self.calls if match.group(1) == "tool_calls" else self.answer
            text, self.head = self.head, ""
        self.route.feed(text)

    def finish(self) -> None:
        if self.route is not None:
            self.route.finish()

    @property
    def is_answer(self) -> bool:
        return self.route is self.answer


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def parse_tool_turn(text: str, names: set[str]) -> bool:
    """Whether ``text`` (a complete reply) is a tool turn for one of ``names``."""
    try:
        value = json.loads(text, strict=False)
    except ValueError:
        return False
    if not isinstance(value, dict) or set(value) != {"tool_calls"} or not isinstance(value["tool_calls"], list):
        return False
    return bool(value["tool_calls"]) and all(
        isinstance(c, dict) and c.get("name") in names and isinstance(c.get("arguments"), dict)
        for c in value["tool_calls"]
    )

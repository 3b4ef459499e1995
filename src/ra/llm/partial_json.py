"""Incremental parsing of a JSON document that is still arriving (for ``stream_object``).

:class:`PartialJSONParser` is fed text as the model produces it and can say, at any point, what the
document holds so far: open strings are cut where they end, open arrays and objects are closed, a
member whose key or value has not begun is left out, a half-written ``tru`` becomes ``true`` and a
number is taken as far as it is valid (``12.`` reads as ``12``).

Why the design: re-parsing the whole prefix in Python after every token would cost O(n^2) over a
stream. Instead each chunk is scanned once, in Python, only to track *where* the document stands
(the stack of open containers, whether we are inside a string, where the current member began);
reading the value then means cutting the text at the right place, appending the closing brackets
and handing that to the C ``json`` decoder. Scanning stays linear in the total length; reading a
snapshot is one fast C parse.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = ["NOTHING", "PartialJSONError", "PartialJSONParser", "parse_json_output", "parse_partial_json"]


class _Nothing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOTHING"

    def __bool__(self) -> bool:
        return False


#: Returned when the text holds no value yet (only whitespace, or a member that cannot be shown).
NOTHING: Final = _Nothing()


class PartialJSONError(ValueError):
    """The text is not a prefix of any JSON document."""


# Container states.
_OBJ_FIRST, _OBJ_KEY, _OBJ_COLON, _OBJ_VALUE, _OBJ_AFTER = range(5)
_ARR_FIRST, _ARR_VALUE, _ARR_AFTER = range(5, 8)
# Token kinds.
_NONE, _STR, _NUM, _LIT = range(4)

_WS = frozenset(" \t\r\n")
_NUM_CHARS = frozenset("0123456789+-.eE")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_STRING_STOP = re.compile(r'["\\]')
_HEX = frozenset("0123456789abcdefABCDEF")
_ESCAPES = frozenset('"\\/bfnrtu')
_LITERALS = {"t": "true", "f": "false", "n": "null"}


class _Frame:
    __slots__ = ("cut", "obj", "state")

    def __init__(self, obj: bool, cut: int) -> None:
        self.obj = obj
        self.state = _OBJ_FIRST if obj else _ARR_FIRST
        # Where to cut the text to drop the member now being written (its leading comma included).
        self.cut = cut


class PartialJSONParser:
    """Feed text with :meth:`feed`; read the best current value with :meth:`value`.

    With ``allow_trailing`` (the default) anything after a complete top-level value is ignored, so
    a closing Markdown fence does not spoil the result; :func:`parse_json_output` decides about it
    at the end.
    """

    __slots__ = (
        "_cache",
        "_chunks",
        "_done",
        "_done_at",
        "_esc",
        "_esc_at",
        "_key",
        "_lit",
        "_num",
        "_pos",
        "_stack",
        "_tok",
        "_tok_at",
        "allow_trailing",
    )

    def __init__(self, *, allow_trailing: bool = True) -> None:
        self.allow_trailing = allow_trailing
        self._chunks: list[str] = []
        self._pos = 0  # absolute offset of the next character to scan
        self._stack: list[_Frame] = []
        self._done = False  # top-level value complete
        self._done_at = 0  # where it ended
        self._tok = _NONE
        self._tok_at = 0
        self._key = False  # the open string is an object key
        self._esc = 0  # 0 none, 1 after backslash, 2..5 inside \\uXXXX
        self._esc_at = 0
        self._lit = ""
        self._num: list[str] = []  # characters of the number being read
        self._cache: tuple[int, Any] | None = None

    @property
    def text(self) -> str:
        if len(self._chunks) > 1:
            self._chunks = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""

    @property
    def complete(self) -> bool:
        """True once a whole top-level value has been read (a bare number never is: it may go on)."""
        return self._done

    def feed(self, chunk: str) -> None:
        """Scan ``chunk``; raises :class:`PartialJSONError` as soon as the text cannot be JSON."""
        if not chunk:
            return
        base = self._pos
        self._chunks.append(chunk)
        self._pos += len(chunk)
        i, n = 0, len(chunk)
        while i < n:
            if self._done and not self._stack and self._tok == _NONE:
                if self.allow_trailing:
                    return
                rest = chunk[i:].strip()
                if rest:
                    raise PartialJSONError(f"unexpected {rest[0]!r} after the JSON value at offset {base + i}")
                return
            tok = self._tok
            if tok == _STR:
                i = self._scan_string(chunk, i, base)
                continue
            c = chunk[i]
            if tok == _NUM:
                if c in _NUM_CHARS:
                    self._num.append(c)
                    i += 1
                    continue
                self._end_number()
                # fall through: c is structural
            elif tok == _LIT:
                k = base + i - self._tok_at
                if k < len(self._lit) and c == self._lit[k]:
                    i += 1
                    if k + 1 == len(self._lit):
                        self._tok = _NONE
                        self._value_done(base + i)
                    continue
                raise PartialJSONError(f"invalid literal at offset {self._tok_at}")
            self._structural(c, base + i)
            i += 1

    # -- scanning ------------------------------------------------------------------------------
    def _scan_string(self, chunk: str, i: int, base: int) -> int:
        n = len(chunk)
        while i < n:
            esc = self._esc
            if esc == 1:
                c = chunk[i]
                if c not in _ESCAPES:
                    raise PartialJSONError(f"invalid escape \\{c} at offset {base + i - 1}")
                self._esc = 2 if c == "u" else 0
                i += 1
            elif esc >= 2:
                if chunk[i] not in _HEX:
                    raise PartialJSONError(f"invalid \\u escape at offset {self._esc_at}")
                self._esc = 0 if esc == 5 else esc + 1
                i += 1
            else:
                m = _STRING_STOP.search(chunk, i)
                if m is None:
                    return n
                i = m.end()
                if m.group() == "\\":
                    self._esc = 1
                    self._esc_at = base + i - 1
                else:
                    self._tok = _NONE
                    self._value_done(base + i, key=self._key)
                    return i
        return i

    def _end_number(self) -> None:
        text = "".join(self._num)
        if _NUMBER.fullmatch(text) is None:
            raise PartialJSONError(f"invalid number {text!r} at offset {self._tok_at}")
        self._tok = _NONE
        self._value_done(self._tok_at + len(text))

    def _value_done(self, end: int, key: bool = False) -> None:
        if key:
            self._stack[-1].state = _OBJ_COLON
        elif self._stack:
            top = self._stack[-1]
            top.state = _OBJ_AFTER if top.obj else _ARR_AFTER
        else:
            self._done = True
            self._done_at = end

    def _structural(self, c: str, at: int) -> None:
        if c in _WS:
            return
        top = self._stack[-1] if self._stack else None
        state = top.state if top is not None else (None if self._done else _ARR_VALUE)
        if state in (_OBJ_VALUE, _ARR_FIRST, _ARR_VALUE):
            if c == "{":
                self._stack.append(_Frame(True, at + 1))
            elif c == "[":
                self._stack.append(_Frame(False, at + 1))
            elif c == '"':
                self._tok, self._tok_at, self._key = _STR, at, False
            elif c == "-" or "0" <= c <= "9":
                self._tok, self._tok_at, self._num = _NUM, at, [c]
            elif c in _LITERALS:
                self._tok, self._tok_at, self._lit = _LIT, at, _LITERALS[c]
            elif c == "]" and state == _ARR_FIRST:
                self._close(at)
            else:
                raise PartialJSONError(f"expected a value, got {c!r} at offset {at}")
        elif state in (_OBJ_FIRST, _OBJ_KEY):
            if c == '"':
                self._tok, self._tok_at, self._key = _STR, at, True
            elif c == "}" and state == _OBJ_FIRST:
                self._close(at)
            else:
                raise PartialJSONError(f"expected an object key, got {c!r} at offset {at}")
        elif state == _OBJ_COLON:
            if c != ":":
                raise PartialJSONError(f"expected ':', got {c!r} at offset {at}")
            assert top is not None
            top.state = _OBJ_VALUE
        elif state == _OBJ_AFTER:
            assert top is not None
            if c == ",":
                top.state, top.cut = _OBJ_KEY, at
            elif c == "}":
                self._close(at)
            else:
                raise PartialJSONError(f"expected ',' or '}}', got {c!r} at offset {at}")
        elif state == _ARR_AFTER:
            assert top is not None
            if c == ",":
                top.state, top.cut = _ARR_VALUE, at
            elif c == "]":
                self._close(at)
            else:
                raise PartialJSONError(f"expected ',' or ']', got {c!r} at offset {at}")
        else:
            raise PartialJSONError(f"unexpected {c!r} after the JSON value at offset {at}")

    def _close(self, at: int) -> None:
        self._stack.pop()
        self._value_done(at + 1)

    # -- reading -------------------------------------------------------------------------------
    def value(self) -> Any:
        """The value the text holds so far, or :data:`NOTHING`."""
        if self._cache is not None and self._cache[0] == self._pos:
            return self._cache[1]
        value = self._snapshot()
        self._cache = (self._pos, value)
        return value

    def _snapshot(self) -> Any:
        text = self.text
        end = self._pos
        suffix = ""
        tok = self._tok
        drop_member = False
        if tok == _STR:
            if self._key:
                drop_member = True
            else:
                if self._esc:
                    end = self._esc_at
                suffix = '"'
        elif tok == _NUM:
            m = _NUMBER.match("".join(self._num))
            if m is None:
                drop_member = True
            else:
                end = self._tok_at + m.end()
        elif tok == _LIT:
            end = self._tok_at
            suffix = self._lit
        elif self._stack:
            drop_member = self._stack[-1].state in (_OBJ_KEY, _OBJ_COLON, _OBJ_VALUE, _ARR_VALUE)
        elif self._done:
            end = self._done_at
        else:
            return NOTHING
        if drop_member:
            if not self._stack:
                return NOTHING
            end = self._stack[-1].cut
        closers = "".join("}" if f.obj else "]" for f in reversed(self._stack))
        try:
            return json.loads(text[:end] + suffix + closers, strict=False)
        except ValueError as exc:  # pragma: no cover - the scanner admits only JSON prefixes
            raise PartialJSONError(f"cannot read the partial document: {exc}") from exc


def parse_partial_json(text: str) -> Any:
    """One-shot: the best value of a (possibly truncated) JSON text, or :data:`NOTHING`."""
    parser = PartialJSONParser()
    parser.feed(text)
    return parser.value()


_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)\r?\n?```\s*$", re.S)


def parse_json_output(text: str) -> Any:
    """Parse a model's complete JSON answer. Tolerates surrounding whitespace and a Markdown
    code fence around the document; raises ``ValueError`` (``json.JSONDecodeError``) otherwise."""
    stripped = text.strip()
    match = _FENCE.match(stripped)
    if match is not None:
        stripped = match.group(1).strip()
    return json.loads(stripped, strict=False)

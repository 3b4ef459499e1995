"""Recognise a streamed text chunk by its bytes, without parsing the whole chunk.

Why: a streamed answer is mostly chunks that differ from the one before only in a few characters
of text, e.g. Chat Completions'
``{"id":"x","object":"chat.completion.chunk",...,"choices":[{"index":0,"delta":{"content":"tok"}, ...}]}``.
Parsing each of them whole is most of the time a stream costs: ``json`` builds the same dozen
objects again per token. Once one such chunk has been parsed, what comes before its text and
what comes after it are known; a later chunk that starts and ends with the same bytes, with one
JSON string between them, *is* that chunk with another text, so only the string is decoded.

That holds by the JSON grammar: swapping one string token for another leaves every other value
where it was. The one thing to make sure of is that the string found in the bytes really is the
text field (not a lookalike in another field, an escaped key, or a value that merely contains
the field's name): a template is only kept after a chunk built from it with a probe text parses
to exactly the chunk with that text put in its place. Anything that does not match a template
byte for byte goes through the full parser, so the fast path can only ever agree with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

__all__ = ["TextChunkTemplate"]

_decode = json.JSONDecoder().decode
_PROBE = "\u0001ra-probe\u0002"
#: Learning costs a second parse; a stream whose chunks never repeat (per-chunk ids, running
#: usage, log probabilities) stops trying after this many templates that did not match.
_MAX_LEARNED = 4


class TextChunkTemplate:
    """The bytes around the text of one kind of chunk, learned from a parsed chunk.

    ``key`` names the text field as it appears in the bytes (``"content"``, ``"text"``);
    ``put(chunk, text)`` returns a copy of a parsed chunk with its text replaced, the shape a
    provider's chunks have (it decides which field is the text).
    """

    __slots__ = ("_key", "_learned", "_min_len", "_prefix", "_put", "_suffix")

    def __init__(self, key: str, put: Callable[[Any, str], Any]) -> None:
        self._key = f'"{key}"'
        self._put = put
        self._prefix = b""
        self._suffix = b""
        self._min_len = -1  # no template yet: nothing matches
        self._learned = 0

    def text_of(self, data: bytes) -> str | None:
        """The text of ``data`` when it is the template's chunk with another text; else None."""
        prefix, suffix = self._prefix, self._suffix
        if len(data) < self._min_len or not data.startswith(prefix) or not data.endswith(suffix):
            return None
        middle = data[len(prefix) : len(data) - len(suffix)]
        try:
            text = _decode(middle.decode())
        except ValueError:  # not one JSON value (UnicodeDecodeError included)
            return None
        return text if type(text) is str else None

    def learn(self, raw: str, chunk: Any, text: str) -> None:
        """Take ``raw`` (a chunk's decoded payload, parsed as ``chunk``) as the template, if its
        text field can be found in it and proven to be ``text``'s place."""
        if self._learned >= _MAX_LEARNED:
            return
        self._learned += 1
        start = _value_start(raw, self._key)
        if start < 0:
            return
        try:
            value, end = scanstring(raw, start + 1)
        except ValueError:
            return
        if value != text:
            return
        head, tail = raw[:start], raw[end:]
        try:
            probed = _decode(head + json.dumps(_PROBE) + tail)
        except ValueError:
            return
        if probed != self._put(chunk, _PROBE):
            return  # the string found is not (only) the text field
        self._prefix, self._suffix = head.encode(), tail.encode()
        self._min_len = len(self._prefix) + len(self._suffix) + 2


def _value_start(raw: str, key: str) -> int:
    """Where the string value of the first ``key``: pair in ``raw`` starts (its quote), or -1."""
    pos = raw.find(key)
    while pos >= 0:
        i = pos + len(key)
        n = len(raw)
        while i < n and raw[i] in " \t\r\n":
            i += 1
        if i < n and raw[i] == ":":
            i += 1
            while i < n and raw[i] in " \t\r\n":
                i += 1
            if i < n and raw[i] == '"':
                return i
        pos = raw.find(key, pos + 1)
    return -1

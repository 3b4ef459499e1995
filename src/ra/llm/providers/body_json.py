"""A request body's JSON, with one field's encoding supplied by the caller.

Adapters that cache their history's JSON send bytes instead of a dict (``post_json`` and
``open_stream`` take either). Those bytes must be exactly what the HTTP layer would make of the
dict - compact separators, no ASCII escaping - because providers' prompt caches match on
byte-identical prefixes; ``join_body`` encodes every other field the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["dumps", "join_body"]


def dumps(value: Any) -> bytes:
    """JSON as ``ra.llm.http`` encodes a body: compact, not ASCII-escaped, UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def join_body(body: Mapping[Any, Any], key: str, value: object, pieces: Iterable[bytes]) -> bytes:
    """``dumps(body)``, except that ``body[key]``, when it is the object ``value`` (an option may
    have replaced it), is written as the concatenation of ``pieces`` (its JSON, already made)."""
    out: list[bytes] = []
    for name, item in body.items():
        out.append(b"{" if not out else b",")
        # A key that is not text is coerced the way json coerces it.
        out.append(dumps(name) if isinstance(name, str) else dumps({name: 0})[1:-3])
        out.append(b":")
        if name == key and item is value:
            out += pieces
        else:
            out.append(dumps(item))
    out.append(b"}" if out else b"{}")
    return b"".join(out)

"""Checks for ``label`` and ``custom`` entries (``Session.label``, ``Session.record_custom``).

A label is a name a person or host gives a point of a conversation, to go back to it
(``Session.open(resume_at=NAME)``). So it must be a name one can type and that cannot be taken
for an entry id: entry ids win when a name is both, and a label shaped like one would never be
found. Custom data is written as JSON: what is not JSON is refused when it is given, not lost at
the next write.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_NAME", "check_custom", "check_label"]

#: Longest label name or custom key, in characters.
MAX_NAME = 200
#: Deepest nesting of custom data: far below what would exhaust the stack where the Recorder
#: encodes it (data that failed there would stop the recording of the whole session).
MAX_DEPTH = 100
_ENTRY_ID = re.compile(r"[0-9a-f]{8}")


def check_label(name: object) -> None:
    """Raise ValueError (TypeError for a non-string) when ``name`` cannot be a label."""
    if not isinstance(name, str):
        raise TypeError(f"a label is a string, got {type(name).__name__}")
    if not name.strip() or name != name.strip():
        raise ValueError(f"a label is a non-empty name without leading or trailing spaces, got {name!r}")
    if len(name) > MAX_NAME:
        raise ValueError(f"a label is at most {MAX_NAME} characters, got {len(name)}")
    if any(ch < " " or ch == "\x7f" for ch in name):
        raise ValueError(f"a label cannot hold control characters (newlines, tabs, ...): {name!r}")
    if _ENTRY_ID.fullmatch(name):
        raise ValueError(f"label {name!r} has the shape of an entry id (8 hex digits): resume_at= would read it as one")


def check_custom(key: object, data: Any) -> None:
    """Raise TypeError/ValueError when ``key`` is not a name or ``data`` is not JSON."""
    if not isinstance(key, str):
        raise TypeError(f"a custom entry's key is a string, got {type(key).__name__}")
    if not key.strip() or len(key) > MAX_NAME:
        raise ValueError(f"a custom entry's key is a non-empty string of at most {MAX_NAME} characters, got {key!r}")
    if _depth(data) > MAX_DEPTH:
        raise ValueError(f"custom entry {key!r}: the data is nested more than {MAX_DEPTH} levels deep")
    try:
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(f"custom entry {key!r}: the data is not JSON-serialisable ({exc})") from None


def _depth(data: Any) -> int:
    """How deeply lists and dicts nest in ``data``, counted without recursion (stops past MAX_DEPTH)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list | tuple):
            if level > MAX_DEPTH:
                return level
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest

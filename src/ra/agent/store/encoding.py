"""Entries to JSON lines, cheaply, with secrets redacted - the recorder's per-step path.

The recorder writes two small batches per step, so what a batch costs to encode is a large part
of what persistence costs a session. Three things here keep it small:

* one C encoder, made once (``json.JSONEncoder.encode`` builds a new one at every call; that
  is half its cost for an entry of a few hundred bytes). It writes compact, UTF-8 (no ``\\u``
  escapes), strict JSON (no NaN) - the record format of docs/sessions.md. :func:`encode_value`
  and :func:`encode_string` give the same text for one value, for :mod:`.lines`, which writes a
  step's entries without building their dicts;
* redaction on the encoded text (:func:`redact_lines`). JSON encodes a string character by
  character, so a string that holds a secret encodes to text that holds the secret's own
  encoding: when none of the secrets' encodings occurs in a line (nearly always), no string of
  the entry holds a secret and the line is written as it is. When one occurs, the entry is
  decoded, redacted value by value and encoded again: replacing inside the text could cut an
  escape in two (``\\n`` followed by a secret that starts with ``n``) or match across two
  strings, and the line must stay valid JSON;
* a file store takes the lines as bytes (:func:`lines_bytes`); any other store gets the entries
  decoded from them, so it holds exactly what a file would.
"""

from __future__ import annotations

import json
import json.encoder
from typing import Any

from ra.llm.redaction import MASK, secret_values

__all__ = [
    "EntryEncodeError",
    "encode_entry",
    "encode_string",
    "encode_value",
    "lines_bytes",
    "redact_entries",
    "redact_lines",
    "secret_forms",
]


class EntryEncodeError(ValueError):
    """An entry that is not a dict or cannot be written as strict JSON."""


def _default(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_C_MAKE = getattr(json.encoder, "c_make_encoder", None)
_C_STR = getattr(json.encoder, "c_encode_basestring", None)
# markers=None: no table of containers being encoded (a fresh one per call is what makes
# JSONEncoder.encode slow; a shared one would go stale after an error). A circular entry hits
# the recursion limit instead, reported as EntryEncodeError like any other bad entry.
_C_ENCODE = _C_MAKE(None, _default, _C_STR, None, ":", ",", False, False, False) if _C_MAKE and _C_STR else None
_PY_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def encode_entry(entry: Any) -> str:
    """One entry as one line of compact, UTF-8, strict JSON (no newline at its end)."""
    if not isinstance(entry, dict):
        raise EntryEncodeError(f"an entry must be a dict, got {type(entry).__name__}")
    return encode_value(entry)


def encode_value(value: Any) -> str:
    """Any JSON value as compact, UTF-8, strict JSON (the text it has inside an entry's line)."""
    try:
        if _C_ENCODE is not None:
            return "".join(_C_ENCODE(value, 0))
        return _PY_ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise EntryEncodeError(f"an entry cannot be written as JSON: {exc}") from None


#: A string as a JSON string (quotes included; UTF-8, no ``\\u`` escapes but for control characters).
encode_string = _C_STR if _C_STR is not None else json.encoder.py_encode_basestring


#: (the secrets, their JSON-encoded forms): encoded again only when the secrets change.
_FORMS: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())


def _encoded_forms(secrets: tuple[str, ...]) -> tuple[str, ...]:
    global _FORMS
    if _FORMS[0] is not secrets and _FORMS[0] != secrets:
        _FORMS = (secrets, tuple(_PY_ENCODER.encode(secret)[1:-1] for secret in secrets))
    return _FORMS[1]


def secret_forms() -> tuple[str, ...]:
    """The JSON-encoded forms of the secrets to redact now: a line holding none of them holds no
    secret (see the module doc)."""
    return _encoded_forms(secret_values())


def redact_lines(lines: list[str]) -> list[str]:
    """``lines`` (one entry each) with every secret value in their strings replaced by
    ``[REDACTED]`` (see the module doc); the same list when no line holds a secret."""
    forms = _encoded_forms(secret_values())
    if not forms:
        return lines
    out = lines
    for i, line in enumerate(lines):
        for form in forms:
            if form in line:
                if out is lines:
                    out = list(lines)
                out[i] = encode_entry(_redact(json.loads(line), _FORMS[0]))
                break
    return out


def lines_bytes(lines: list[str]) -> bytes:
    """The lines as a file holds them: each ended by a newline, UTF-8 (surrogates passed)."""
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


def redact_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``entries`` with every secret value in their strings (keys included) replaced by ``[REDACTED]``."""
    secrets = secret_values()
    if not secrets:
        return entries
    return [_redact(entry, secrets) for entry in entries]


def _redact_text(value: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:  # longest first, so a secret that holds another goes whole
        if secret in value:
            value = value.replace(secret, MASK)
    return value


def _redact(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return _redact_text(value, secrets)
    if isinstance(value, dict):
        return {
            (_redact_text(key, secrets) if isinstance(key, str) else key): _redact(item, secrets)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redact(item, secrets) for item in value]
    return value

"""Entries to JSON lines, cheaply, with secrets redacted - the recorder's per-step hot path.

The recorder writes two small batches per step, so what a batch costs to encode is a large part
of what persistence costs a session. Two things here keep it small:

* one C encoder, made once (``json.JSONEncoder.encode`` builds a new one at every call; that
  is half its cost for an entry of a few hundred bytes). It writes compact, UTF-8 (no ``\\u``
  escapes), strict JSON (no NaN) - the record format of docs/sessions.md;
* redaction on the encoded text. JSON encodes a string character by character, so a string that
  holds a secret encodes to text that holds the secret's own encoding: when none of the secrets'
  encodings occurs in an entry's line (nearly always), no string of the entry holds a secret and
  the line is written as it is. When one occurs, the entry is redacted value by value and encoded
  again: replacing inside the text could cut an escape in two (``\\n`` followed by a secret that
  starts with ``n``) or match across two strings, and the line must stay valid JSON.

:class:`EncodedBatch` carries the lines beside the (redacted) entries, so a store that writes
lines (:class:`~ra.agent.store.files.FileSessionStore`) does not encode them again; any other
store sees a list of dicts.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Sequence
from typing import Any

from ra.llm.redaction import MASK, secret_values

__all__ = ["EncodedBatch", "EntryEncodeError", "encode_entry", "encode_redacted", "redact_entries"]


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
    try:
        if _C_ENCODE is not None:
            return "".join(_C_ENCODE(entry, 0))
        return _PY_ENCODER.encode(entry)
    except (TypeError, ValueError, RecursionError) as exc:
        raise EntryEncodeError(f"an entry cannot be written as JSON: {exc}") from None


#: (the secrets, their JSON-encoded forms): encoded again only when the secrets change.
_FORMS: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())


def _encoded_forms(secrets: tuple[str, ...]) -> tuple[str, ...]:
    global _FORMS
    if _FORMS[0] is not secrets and _FORMS[0] != secrets:
        _FORMS = (secrets, tuple(_PY_ENCODER.encode(secret)[1:-1] for secret in secrets))
    return _FORMS[1]


class EncodedBatch(list):  # type: ignore[type-arg]
    """Redacted entries (a list of dicts) with ``data``: their lines, each ending in a newline,
    as UTF-8 bytes. Made by :func:`encode_redacted`; a store may write ``data`` as it is."""

    __slots__ = ("data",)

    def __init__(self, entries: Sequence[dict[str, Any]], data: bytes) -> None:
        super().__init__(entries)
        self.data = data


def encode_redacted(entries: Sequence[dict[str, Any]]) -> EncodedBatch:
    """``entries`` with every secret value in their strings replaced by ``[REDACTED]``, and
    their lines (see the module doc). Raises :class:`EntryEncodeError` for a bad entry."""
    forms = _encoded_forms(secret_values())
    secrets = _FORMS[0]
    out: list[dict[str, Any]] = []
    lines: list[str] = []
    for entry in entries:
        line = encode_entry(entry)
        if forms and any(form in line for form in forms):
            entry = _redact(entry, secrets)
            line = encode_entry(entry)
        out.append(entry)
        lines.append(line)
    lines.append("")
    return EncodedBatch(out, "\n".join(lines).encode("utf-8", "surrogatepass"))


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

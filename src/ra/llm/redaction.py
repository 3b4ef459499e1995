"""Keep secrets out of error text: the values of API keys and secret-looking variables.

A provider's 401 body often repeats the key it refused ("Incorrect API key provided: sk-..."),
and that body becomes an error message, an ERROR event, a ``--json`` record, a trajectory line
and a line on stderr. So error text is redacted where it is made:

* every :class:`~ra.llm.errors.SDKError` redacts its message (and a provider error its raw body)
  against the values of the process's secret-looking environment variables - the names the
  execution environment filters out of commands (:data:`SECRET_PATTERNS`: ``*_API_KEY``,
  ``*_TOKEN``, ``*_SECRET``, ...);
* an HTTP adapter remembers the key it was given in code (``api_key=...``), which need not be in
  the environment (:func:`remember_secret`), so that every error of the process redacts it too -
  an error a provider sends inside a 200 answer is built far from the adapter that holds it.

A value is redacted only when it is at least :data:`MIN_SECRET_LENGTH` characters long, so a
variable such as ``DEBUG_TOKEN=1`` does not blank out every "1" in a message. The replacement is
:data:`MASK`.
"""

from __future__ import annotations

import fnmatch
import functools
import os
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MASK",
    "MIN_SECRET_LENGTH",
    "SECRET_PATTERNS",
    "is_secret_name",
    "redact",
    "redact_value",
    "remember_secret",
    "secret_values",
]

#: Glob patterns (matched case-insensitively against the whole name, with a leading "_" added so
#: the bare forms count too) for variables that hold credentials. The first five are the
#: coding-agent spec's; the rest catch common spellings that escape them.
SECRET_PATTERNS: tuple[str, ...] = (
    "*_API_KEY",
    "*_SECRET",
    "*_TOKEN",
    "*_PASSWORD",
    "*_CREDENTIAL",
    "*_SECRET_ACCESS_KEY",
    "*_SECRET_KEY",
    "*_PRIVATE_KEY",
    "*_CREDENTIALS",
    "*_PASSWD",
)

MASK = "[REDACTED]"
MIN_SECRET_LENGTH = 8


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True if ``name`` looks like it holds a credential (cached: the session recorder asks for
    every variable at every step, and ten glob matches per name add up)."""
    candidate = "_" + name.upper()
    return any(fnmatch.fnmatchcase(candidate, pattern) for pattern in SECRET_PATTERNS)


#: Secrets handed to ra in code (an adapter's ``api_key``), redacted like the environment's.
_REMEMBERED: set[str] = set()


def remember_secret(value: str | None) -> None:
    """Redact ``value`` from every error of this process from now on (too short ones are not
    secrets; see :data:`MIN_SECRET_LENGTH`)."""
    if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH:
        _REMEMBERED.add(value)


#: (a copy of the process environment's raw mapping, how many secrets were remembered, values).
_CACHE: tuple[dict[bytes, bytes], int, tuple[str, ...]] | None = None


def secret_values(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of secret-looking variables (longest first), from ``os.environ`` by default,
    with the remembered secrets. Current at every call - a key set a moment ago is covered - but
    for ``os.environ`` computed again only when the environment or the remembered secrets
    changed (the session recorder asks at every step)."""
    global _CACHE
    if environ is None:
        raw = getattr(os.environ, "_data", None)  # CPython's undecoded mapping: cheap to compare
        cached = _CACHE
        if isinstance(raw, dict) and cached is not None and cached[1] == len(_REMEMBERED) and cached[0] == raw:
            return cached[2]
        values = _secret_values(os.environ, True)
        if isinstance(raw, dict):
            _CACHE = (dict(raw), len(_REMEMBERED), values)  # a copy: the mapping changes in place
        return values
    return _secret_values(environ, False)


def _secret_values(env: Mapping[str, str], remembered: bool) -> tuple[str, ...]:
    values = {v for k, v in env.items() if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH and is_secret_name(k)}
    if remembered:
        values |= _REMEMBERED
    return tuple(sorted(values, key=len, reverse=True))


def redact(text: str, extra: Iterable[str | None] = ()) -> str:
    """``text`` with every secret value (and each of ``extra``) replaced by :data:`MASK`."""
    if not text:
        return text
    secrets = [s for s in extra if s and len(s) >= MIN_SECRET_LENGTH]
    secrets.extend(secret_values())
    for secret in sorted(set(secrets), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_value(value: Any, extra: Iterable[str | None] = ()) -> Any:
    """``value`` (a provider's error body: dicts, lists, strings) with secrets redacted."""
    extra = tuple(extra)
    if isinstance(value, str):
        return redact(value, extra)
    if isinstance(value, Mapping):
        return {k: redact_value(v, extra) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_value(v, extra) for v in value)
    return value

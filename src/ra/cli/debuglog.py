"""``--debug`` log lines without secrets.

``--debug`` turns on DEBUG logging for everything, httpx and httpcore included, and httpcore logs
every response's headers. A server that echoes the key (a ``WWW-Authenticate`` challenge that
quotes it, a ``Set-Cookie`` session) would put it on stderr, where debug output is pasted into bug
reports. So every record passes :class:`RedactingFilter` on its way to the handler: the values of
credential-bearing headers are masked whatever they hold, and any known secret (the environment's
secret-looking variables, the keys adapters were given: :func:`ra.llm.redaction.redact`) is masked
wherever it appears.
"""

from __future__ import annotations

import logging
import re

from ra.llm.redaction import MASK, redact

__all__ = ["SECRET_HEADERS", "RedactingFilter", "redact_log_text"]

#: Headers whose values are credentials or carry them (lower case).
SECRET_HEADERS = (
    "authorization",
    "proxy-authorization",
    "www-authenticate",
    "proxy-authenticate",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "cookie",
    "set-cookie",
)

_NAMES = "|".join(re.escape(name) for name in SECRET_HEADERS)
#: httpcore's form: ``(b'www-authenticate', b'Bearer ...')`` (either quote, escapes inside).
_TUPLE = re.compile(rf"""(\(b(['"])(?:{_NAMES})\2,\s*b)(['"])((?:\\.|(?!\3).)*)\3""", re.I)
#: A header line: ``Authorization: Bearer ...`` up to the end of the line.
_LINE = re.compile(rf"""(?<![\w-])((?:{_NAMES})\s*[:=]\s*)[^\r\n]*""", re.I)


def redact_log_text(text: str) -> str:
    """``text`` with secret header values and known secrets masked."""
    text = _TUPLE.sub(lambda m: f"{m.group(1)}{m.group(3)}{MASK}{m.group(3)}", text)
    text = _LINE.sub(lambda m: f"{m.group(1)}{MASK}", text)
    return redact(text)


class RedactingFilter(logging.Filter):
    """Rewrites each record's message (arguments merged in) with :func:`redact_log_text`."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: let logging report it as it would
            return True
        record.msg = redact_log_text(message)
        record.args = None
        return True

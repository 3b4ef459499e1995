"""Malformed replies: turning a payload of the wrong shape into ra's own error, naming the field.

Servers and proxies send replies that break the API's shape - a ``tool_calls`` that is a string,
``choices`` as an object, a number where text belongs. The adapters' parsers are written for
well-formed replies and stay fast on them; each one is wrapped so that any ``TypeError``,
``KeyError``, ``AttributeError``, ``IndexError`` or ``ValueError`` it raises becomes
:class:`MalformedResponseError` (a whole reply) or :class:`MalformedStreamError` (a stream event).
Only then, on the error path, is the payload checked against the API's *shape* - a small JSON
Schema of the fields the parser reads - so the message names the field that broke it
(``choices[0].message.tool_calls: 'x' is not of type 'array', 'null'``).

Shapes are written with :func:`obj`, :func:`arr` and the type constants below; they list only
what the parsers rely on and allow anything else.
"""

from __future__ import annotations

from typing import Any

from .errors import ProviderError, StreamError

__all__ = [
    "ANY",
    "BOOL",
    "INT",
    "MALFORMED",
    "NUM",
    "OBJ",
    "STR",
    "MalformedResponseError",
    "MalformedStreamError",
    "arr",
    "malformed",
    "obj",
    "where_broken",
]

#: The exceptions a parser raises on a payload of the wrong shape.
MALFORMED = (TypeError, KeyError, AttributeError, IndexError, ValueError)

STR: dict[str, Any] = {"type": ["string", "null"]}
INT: dict[str, Any] = {"type": ["integer", "null"]}
NUM: dict[str, Any] = {"type": ["number", "null"]}
BOOL: dict[str, Any] = {"type": ["boolean", "null"]}
OBJ: dict[str, Any] = {"type": ["object", "null"]}
ANY: dict[str, Any] = {}


def obj(nullable: bool = True, **properties: dict[str, Any]) -> dict[str, Any]:
    """An object (or null) whose listed properties have these shapes."""
    return {"type": ["object", "null"] if nullable else "object", "properties": properties}


def arr(items: dict[str, Any] | None = None, nullable: bool = True) -> dict[str, Any]:
    """A list (or null) of items of this shape."""
    shape: dict[str, Any] = {"type": ["array", "null"] if nullable else "array"}
    if items is not None:
        shape["items"] = items
    return shape


class MalformedResponseError(ProviderError):
    """The provider answered, but not in its API's shape. Not retried: the answer was complete
    (and paid for); asking again is the host's call."""

    retryable = False


class MalformedStreamError(StreamError):
    """A stream event was not in its API's shape (retried like any broken stream)."""


def where_broken(payload: Any, shape: dict[str, Any] | None) -> str | None:
    """``field.path: problem`` for the first place ``payload`` breaks ``shape``, or None."""
    if shape is None:
        return None
    from .schema import compile_schema, field_path

    try:
        validator = compile_schema(shape, "the reply shape")
    except ValueError:
        return None
    errors = sorted(
        validator.iter_errors(payload), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path)))
    )
    if not errors:
        return None
    first = errors[0]
    return f"{field_path(first.absolute_path) or '(the reply)'}: {first.message}"


def malformed(
    provider: str, payload: Any, shape: dict[str, Any] | None, exc: BaseException, *, stream: bool
) -> ProviderError | StreamError:
    """The error for ``payload`` that made a parser raise ``exc``."""
    where = where_broken(payload, shape) or f"{type(exc).__name__}: {exc}"
    if stream:
        return MalformedStreamError(f"{provider}: malformed stream event: {where}", cause=exc)
    return MalformedResponseError(
        f"{provider}: malformed reply: {where}", provider=provider, status_code=200, raw=payload, cause=exc
    )

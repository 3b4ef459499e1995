"""Fields of decoded JSON, read with errors that name them.

What ra reads back from its own saved forms (:mod:`ra.llm.serialization`, :mod:`ra.sdk.reading`)
must fail on a bad value with the field's path (``message.content[2].text: expected str, got
int``), never with a ``KeyError`` or a wrong type passed on. ``where`` is the path of ``obj``;
``error`` is the exception class to raise (a ``ValueError`` subclass).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["json_field", "json_object"]


def json_object(value: Any, where: str, error: type[ValueError] = ValueError) -> Mapping[str, Any]:
    """``value`` if it is a JSON object."""
    if not isinstance(value, Mapping):
        raise error(f"{where}: expected an object, got {type(value).__name__}")
    return value


def json_field(
    obj: Mapping[str, Any],
    key: str,
    types: tuple[type, ...],
    where: str,
    *,
    required: bool = False,
    error: type[ValueError] = ValueError,
) -> Any:
    """``obj[key]`` if it is one of ``types`` (a bool is not an int unless ``bool`` is named);
    None when it is absent or null, which is an error if ``required``."""
    value = obj.get(key)
    if value is None:
        if required:
            raise error(f"{where}.{key}: missing")
        return None
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        names = " or ".join(t.__name__ for t in types)
        raise error(f"{where}.{key}: expected {names}, got {type(value).__name__}")
    return value

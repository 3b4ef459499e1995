"""Session events as JSON records: what ``--json`` prints and ``--output-trajectory`` writes.

One record per event, flat: ``{"type": <event kind>, "timestamp": ..., "session_id": ..., <data>}``.
Event data holds live objects (ToolCalls, Usage, exceptions, enums); :func:`jsonable` turns each
into plain JSON without losing what a reader of the log needs: tool outputs stay complete (the
TOOL_CALL_END event carries the untruncated output), exceptions keep their type, message and HTTP
status, bytes are summarised by size.
"""

from __future__ import annotations

import dataclasses
import json
from enum import Enum
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ra.agent.events import SessionEvent

__all__ = ["JsonlWriter", "dumps", "event_record", "jsonable"]

_MAX_DEPTH = 12


def jsonable(value: Any, _depth: int = 0) -> Any:
    """A JSON-serialisable copy of ``value``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if _depth > _MAX_DEPTH:
        return repr(value)
    if isinstance(value, Enum):
        return jsonable(value.value, _depth + 1)
    if isinstance(value, BaseException):
        out: dict[str, Any] = {"type": type(value).__name__, "message": str(value)}
        for attr in ("provider", "status_code", "error_code", "retryable"):
            attr_value = getattr(value, attr, None)
            if attr_value is not None:
                out[attr] = jsonable(attr_value, _depth + 1)
        return out
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes": len(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name), _depth + 1) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, _depth + 1) for v in value]
    return str(value)


def event_record(event: SessionEvent) -> dict[str, Any]:
    record: dict[str, Any] = {
        "type": str(event.kind.value),
        "timestamp": event.timestamp,
        "session_id": event.session_id,
    }
    for key, value in event.data.items():
        record[key if key not in record else f"data_{key}"] = jsonable(value)
    return record


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)


class JsonlWriter:
    """Writes one JSON record per line to a text stream, flushing each line (a crash or Ctrl-C
    keeps everything written so far)."""

    def __init__(self, stream: IO[str], *, close: bool = False) -> None:
        self.stream = stream
        self._close = close

    def write(self, record: dict[str, Any]) -> None:
        self.stream.write(dumps(record) + "\n")
        self.stream.flush()

    def event(self, event: SessionEvent) -> None:
        self.write(event_record(event))

    def close(self) -> None:
        if self._close:
            self.stream.close()

"""``QueryOptions.debug_file``: the session's events and ra's log records, appended to a file.

One JSON object per line - ``{"time", "kind", "data"}`` for an event, ``{"time", "log", "level",
"message"}`` for a log record of the ``ra`` loggers - so a run can be read back after the fact
without attaching a listener. Values that are not JSON (usage, tool calls, errors) are written as
their text, and every line passes through :func:`ra.llm.redaction.redact`: a key that reached an
error message does not reach the file.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ra.llm.redaction import redact

if TYPE_CHECKING:
    from ra.agent.events import SessionEvent
    from ra.agent.session import Session

__all__ = ["DebugLog"]


class DebugLog(logging.Handler):
    """Appends events (as a session listener) and log records (as a handler of ``ra``) to ``path``."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(logging.DEBUG)
        target = Path(path).expanduser()
        if target.is_dir():
            raise ValueError(f"debug_file {path} is a directory")
        try:
            self._file: TextIO | None = open(target, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise ValueError(f"debug_file {path} cannot be opened: {exc}") from exc
        self._write_lock = threading.Lock()
        self._detach: Any = None

    def attach(self, session: Session) -> None:
        self._detach = session.add_listener(self.event, replay=False)
        logging.getLogger("ra").addHandler(self)

    def event(self, event: SessionEvent) -> None:
        self._line({"time": _now(), "kind": event.kind.value, "session_id": event.session_id, "data": event.data})

    def emit(self, record: logging.LogRecord) -> None:
        self._line({"time": _now(), "log": record.name, "level": record.levelname, "message": record.getMessage()})

    def _line(self, obj: dict[str, Any]) -> None:
        text = redact(json.dumps(obj, default=str, ensure_ascii=False))
        with self._write_lock:
            if self._file is not None:
                self._file.write(text + "\n")
                self._file.flush()

    def close(self) -> None:
        logging.getLogger("ra").removeHandler(self)
        if self._detach is not None:
            self._detach()
            self._detach = None
        with self._write_lock:
            if self._file is not None:
                self._file.close()
                self._file = None
        super().close()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"

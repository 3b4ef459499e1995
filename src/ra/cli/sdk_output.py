"""``--output-format json|stream-json``: the SDK's typed messages on stdout, one JSON object per line.

The messages are :mod:`ra.sdk.messages`' projection of the session's events - the same ones
``ra.query()`` yields - written with their ``to_json()``, whose field names follow ``claude -p
--output-format stream-json`` where they mean the same thing (``docs/sdk.md`` maps them).
``stream-json`` writes every message (``system``/``init``, ``assistant``, ``tool_progress``,
``user`` with tool results, ``result``; with ``--include-partial-messages`` also a
``stream_event`` per event of a streamed response); ``json`` only the final ``result``.
Progress and errors go to stderr as one-line notices; stdout carries nothing but JSON.
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Any

from .records import JsonlWriter
from .render import Renderer

if TYPE_CHECKING:
    from ra.agent.events import SessionEvent
    from ra.agent.session import Session

__all__ = ["MessageOutput"]


class MessageOutput(Renderer):
    """A renderer that writes SDK messages: attach it to the session before the input runs."""

    def __init__(
        self,
        output_format: str,
        stdout: IO[str] | None = None,
        stderr: IO[str] | None = None,
        *,
        include_partial: bool = False,
    ) -> None:
        super().__init__(stdout, stderr)
        self.only_result = output_format == "json"
        self.include_partial = include_partial
        self.writer = JsonlWriter(self.stdout)
        self.stream: Any = None
        self._result_type: type = type(None)

    def attach(self, session: Session) -> None:
        """Follow ``session`` from here on and write the ``init`` message."""
        from ra.sdk.messages import MessageStream, ResultMessage

        self._result_type = ResultMessage
        self.stream = MessageStream(session, self._write, include_partial=self.include_partial)
        self.stream.start()

    def _write(self, message: Any) -> None:
        if self.only_result and not isinstance(message, self._result_type):
            return
        self.writer.write(message.to_json())

    def __call__(self, event: SessionEvent) -> None:
        if self.stream is not None:
            self.stream(event)

    def answer(self, text: str) -> None:
        pass  # the result message carries it

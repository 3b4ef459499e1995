"""The provider adapter contract (unified-llm-spec 2.4 and 7.1)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from .types import Request, Response, StreamEvent

__all__ = ["ProviderAdapter"]


@runtime_checkable
class ProviderAdapter(Protocol):
    """What the Client needs from a provider. ``close``, ``initialize`` and
    ``supports_tool_choice`` are optional; the Client calls them when present."""

    name: str

    async def complete(self, request: Request) -> Response:
        """Send ``request`` and return the whole answer. Never retries."""
        ...

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Send ``request`` and yield events as they arrive, ending with FINISH. Never retries.

        Implementations are async generators: the request is sent on first iteration, and
        closing the generator (``aclose()``) closes the connection.
        """
        ...

"""Adapters the tests make are closed on the test's own event loop.

Most adapter tests build an adapter, use it and drop it. Its pooled keep-alive connections to the
replay server would then be left for the garbage collector after the loop that opened them is
closed (a ResourceWarning each, and a socket held until then). This fixture closes every adapter
client a test opened, on that test's loop, the way a host is told to (``await adapter.close()``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from ra.llm.http import HTTPAdapter


@pytest.fixture(autouse=True)
async def _close_opened_adapters(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    opened: dict[int, HTTPAdapter] = {}
    on_loop = HTTPAdapter._on_loop  # every request and every client of an adapter goes through it

    def tracked(self: HTTPAdapter) -> Any:
        opened[id(self)] = self
        return on_loop(self)

    monkeypatch.setattr(HTTPAdapter, "_on_loop", tracked)
    yield
    for adapter in opened.values():
        await adapter.close()  # closes the clients of this loop; those of loops already gone are dropped

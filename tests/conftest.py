from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.replay import ReplayServer


@pytest.fixture
def replay_server() -> Iterator[ReplayServer]:
    """A real HTTP server on 127.0.0.1 that answers from a queue of recorded/scripted responses."""
    server = ReplayServer().start()
    try:
        yield server
    finally:
        server.close()

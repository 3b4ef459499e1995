from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.replay import ReplayServer


@pytest.fixture(autouse=True, scope="session")
def _sessions_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``ra.sdk`` and the ``ra`` command record every session to ``default_store()`` by default:
    point it (``RA_SESSIONS_DIR``, inherited by the ``ra`` processes tests start) at a temporary
    directory, so no test writes to the real state directory."""
    before = os.environ.get("RA_SESSIONS_DIR")
    os.environ["RA_SESSIONS_DIR"] = str(tmp_path_factory.mktemp("ra-sessions"))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RA_SESSIONS_DIR", None)
        else:
            os.environ["RA_SESSIONS_DIR"] = before


@pytest.fixture
def replay_server() -> Iterator[ReplayServer]:
    """A real HTTP server on 127.0.0.1 that answers from a queue of recorded/scripted responses."""
    server = ReplayServer().start()
    try:
        yield server
    finally:
        server.close()

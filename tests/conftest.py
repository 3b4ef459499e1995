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


@pytest.fixture(autouse=True, scope="session")
def _price_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Models genai-prices does not know are remembered on disk (``ra.llm.price_misses``): keep
    that file (``RA_PRICE_CACHE``) out of the user's cache directory too."""
    before = os.environ.get("RA_PRICE_CACHE")
    os.environ["RA_PRICE_CACHE"] = str(tmp_path_factory.mktemp("ra-cache") / "genai-prices-misses.json")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RA_PRICE_CACHE", None)
        else:
            os.environ["RA_PRICE_CACHE"] = before


@pytest.fixture
def replay_server() -> Iterator[ReplayServer]:
    """A real HTTP server on 127.0.0.1 that answers from a queue of recorded/scripted responses."""
    server = ReplayServer().start()
    try:
        yield server
    finally:
        server.close()

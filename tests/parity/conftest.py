"""Fixtures of the parity and smoke suites.

``wire`` is parametrised over the three providers, so every test using ``harness`` runs once per
profile: one cell of the coding-agent-loop-spec 9.12 matrix each.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.parity.support import Harness
from tests.support.replay import ReplayServer
from tests.support.wire import WIRES, Wire


@pytest.fixture(params=list(WIRES), ids=list(WIRES))
def wire(request: pytest.FixtureRequest) -> Wire:
    return WIRES[request.param]()


@pytest.fixture
async def harness(replay_server: ReplayServer, wire: Wire, tmp_path: Path) -> AsyncIterator[Harness]:
    root = tmp_path / "work"
    root.mkdir()
    h = Harness(replay_server, wire, root)
    try:
        yield h
    finally:
        await h.close()
    h.model.verify()

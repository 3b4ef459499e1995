"""Every MCP test must leave no server process behind: checked after each test, by cookie."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from ra.env import proctree


@pytest.fixture(autouse=True)
def _no_server_left(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Record the cookie of every stdio server a test starts; after the test, none may be alive."""
    try:
        import ra.mcp._stdio as stdio
    except ImportError:  # the mcp extra is not installed: nothing starts servers
        yield
        return
    cookies: list[str] = []
    original = stdio.open_stdio

    def recording(command: str, args: Any, env: Any, cwd: Any, info: Any, on_end: Any) -> Any:
        cookies.append(info.cookie)
        return original(command, args, env, cwd, info, on_end)

    monkeypatch.setattr(stdio, "open_stdio", recording)
    yield
    deadline = time.monotonic() + 3.0
    left: set[int] = set()
    while time.monotonic() < deadline:
        left = {pid for cookie in cookies for pid in proctree.find_by_cookie(cookie)}
        if not left:
            break
        time.sleep(0.05)
    assert not left, f"MCP server processes left behind: {sorted(left)}"

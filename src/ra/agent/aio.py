"""One way to call a host's function that may be sync or async (callbacks, hooks, profile methods)."""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["maybe_await"]


async def maybe_await(value: Any) -> Any:
    """``value``, awaited first when it is awaitable (what a sync or an async function returned)."""
    if inspect.isawaitable(value):
        return await value
    return value

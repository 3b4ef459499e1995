"""A command's timeout as every environment reads it: one rule, so that local, SSH and any
wrapper agree on what ``timeout_ms`` may be (a positive number of milliseconds, never above the
environment's maximum; unset means the environment's default)."""

from __future__ import annotations

__all__ = ["effective_timeout_ms"]


def effective_timeout_ms(timeout_ms: int | None, default_ms: int, max_ms: int) -> int:
    """The timeout a call gets: ``default_ms`` when unset, never above ``max_ms``. A bool or a
    non-number is a TypeError, zero or less a ValueError (the tools turn both into messages)."""
    if timeout_ms is None:
        return default_ms
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int | float):
        raise TypeError(f"timeout_ms must be a number of milliseconds, got {timeout_ms!r}")
    if timeout_ms <= 0:
        raise ValueError(f"timeout_ms must be positive, got {timeout_ms}")
    return min(max(1, int(timeout_ms)), max_ms)

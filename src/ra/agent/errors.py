"""Errors the Session API raises (model and tool errors are reported as events and results)."""

from __future__ import annotations

__all__ = ["ContextOverflowError", "SessionBusyError", "SessionClosedError", "SessionError"]


class SessionError(Exception):
    """Base of the agent layer's own errors."""


class SessionBusyError(SessionError):
    """``submit()`` while an input is being processed (the busy guard)."""


class SessionClosedError(SessionError):
    """The session is closed (explicitly, by abort, or by an unrecoverable error)."""


class ContextOverflowError(SessionError):
    """The provider refused the context and pruning could not make it fit."""

"""Exit codes and the one-line messages ``ra`` prints for errors.

Every failure ends as one line on stderr, ``ra: error: <what happened and what to do>``, and a
documented exit code; the traceback is shown only with ``--debug``. The wording is chosen here,
from the error's type and the run's settings, because the raw messages of HTTP clients name
sockets and status codes, not the flag or variable the user has to change.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import Settings

__all__ = ["ExitCode", "RunError", "UsageError", "describe_error", "exit_code_for"]


class ExitCode(IntEnum):
    DONE = 0  # the task completed (or the answer was submitted)
    FAILED = 1  # the run failed or hit a limit (steps, time, context)
    USAGE = 2  # bad flag, bad config value
    PROVIDER = 3  # provider or authentication error: missing key, unreachable server, unknown model
    HANGUP = 129  # SIGHUP: the terminal went away (128 + SIGHUP)
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
    TERMINATED = 143  # SIGTERM (128 + SIGTERM)


class UsageError(Exception):
    """A usage error found while parsing the command line (exit 2)."""


class RunError(Exception):
    """A failure with a ready-made message and exit code."""

    def __init__(self, message: str, code: ExitCode) -> None:
        super().__init__(message)
        self.code = code


def exit_code_for(error: BaseException) -> ExitCode:
    """Provider and authentication problems (any ``ra.llm`` error except an overflowing context)
    exit with 3; everything else that stops a run exits with 1."""
    from ra.llm.errors import ContextLengthError, SDKError

    from .config import ConfigError, ProviderSetupError

    if isinstance(error, RunError):
        return error.code
    if isinstance(error, (ConfigError, UsageError)):
        return ExitCode.USAGE
    if isinstance(error, ProviderSetupError):
        return ExitCode.PROVIDER
    if isinstance(error, SDKError) and not isinstance(error, ContextLengthError):
        return ExitCode.PROVIDER
    return ExitCode.FAILED


def _where(settings: Settings | None) -> str:
    if settings is None:
        return "the provider"
    if settings.base_url:
        return f"{settings.provider} at {settings.base_url}"
    return settings.provider


def describe_error(error: BaseException, settings: Settings | None) -> str:
    """One line (no newlines) that says what failed and, where it helps, what to do."""
    from ra.agent.errors import ContextOverflowError
    from ra.llm import errors as e

    model = settings.model if settings else None
    where = _where(settings)
    if isinstance(error, e.AuthenticationError):
        key = settings.key_source if settings else "the API key"
        text = f"authentication failed at {where}: {error.message} (check {key})"
    elif isinstance(error, e.AccessDeniedError):
        text = f"access denied by {where}: {error.message}"
    elif isinstance(error, e.NotFoundError):
        text = f"model {model!r} was not found at {where}: {error.message} (choose another with --model)"
    elif isinstance(error, e.QuotaExceededError):
        text = f"quota exceeded at {where}: {error.message}"
    elif isinstance(error, e.RateLimitError):
        text = f"rate limited by {where}: {error.message}"
    elif isinstance(error, e.ContextLengthError):
        text = f"the context is too long for {model or 'the model'}: {error.message}"
    elif isinstance(error, ContextOverflowError):
        text = f"context overflow: {error}"
    elif isinstance(error, e.RequestTimeoutError):
        text = f"{where} did not answer in time: {error.message}"
    elif isinstance(error, e.NetworkError):
        cause = error.cause or error.__cause__
        reason = str(cause) if cause is not None and str(cause) else error.message
        text = f"cannot reach {where}: {reason}"
    elif isinstance(error, e.ProviderError):
        text = f"{where} refused the request: {error.message}" + (
            f" (HTTP {error.status_code})" if error.status_code else ""
        )
    elif isinstance(error, e.SDKError):
        text = f"{where}: {error.message}"
    else:
        text = str(error) or type(error).__name__
    return " ".join(text.split())

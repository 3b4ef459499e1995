"""Fallback models (agentic-loop-go-port-spec 3.1 ``FallbackModel``): one call, other models.

When a model call still fails after its retries with an error that another model may not have -
the provider is overloaded or erring (``ServerError``), or the model is not served
(``NotFoundError``) - the same request is sent to the next model of
``SessionConfig.fallback_models``, with a WARNING (``code="fallback_model"``). Errors that another
model would hit just the same never move on: bad credentials, a rate limit, an invalid request,
a context that is too long. :func:`with_fallback` returns the model that answered with its
response: the USAGE event of the call names it, and the call is priced as it.

A fallback sticks: a model that failed that way is skipped by the session's later calls for
:data:`FALLBACK_COOLDOWN_S` seconds (they start at the first model not cooling down), and tried
again after that. Without it, with the primary down, every step paid the primary's retries (and
their back-off) before reaching the model that was answering. When every model is cooling down,
all are tried in order again.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from ra.llm.errors import NotFoundError, ServerError

from .events import WarningEvent

if TYPE_CHECKING:
    from ra.llm.types import Request, Response

    from .state import RunState

__all__ = ["FALLBACK_COOLDOWN_S", "FALLBACK_ERRORS", "Answer", "with_fallback"]

#: The errors that move a call on to the next model.
FALLBACK_ERRORS: tuple[type[BaseException], ...] = (ServerError, NotFoundError)

#: How long a model that failed over is skipped by later calls of the session.
FALLBACK_COOLDOWN_S = 300.0


class Answer(NamedTuple):
    """A model call's response and the model it was made to (the primary, or the fallback that
    answered). A server's own name for it (``Response.model``) may be a snapshot or a proxy's
    alias; the host's name is the one its prices are keyed by."""

    response: Response
    model: str


async def with_fallback(run: RunState, request: Request, call: Callable[[Request], Awaitable[Response]]) -> Answer:
    """``call(request)``, then ``call`` on each fallback model while the failure is one of
    :data:`FALLBACK_ERRORS`; the last failure is raised."""
    fallbacks = run.config.fallback_models
    if not fallbacks:
        return Answer(await call(request), request.model)
    candidates = [request, *(_for_model(request, entry) for entry in fallbacks)]
    cooling = run.fallback_cooldowns
    if cooling:
        now = time.monotonic()
        for key in [k for k, until in cooling.items() if until <= now]:
            del cooling[key]  # cooled down: tried again
        ready = [c for c in candidates if _key(c) not in cooling]
        if ready:
            candidates = ready
    for index, candidate in enumerate(candidates):
        try:
            response = await call(candidate)
            cooling.pop(_key(candidate), None)
            return Answer(response, candidate.model)
        except FALLBACK_ERRORS as exc:
            cooling[_key(candidate)] = time.monotonic() + FALLBACK_COOLDOWN_S
            if index + 1 == len(candidates):
                raise
            following = candidates[index + 1]
            run.emit(
                WarningEvent(
                    "fallback_model",
                    f"{candidate.model} failed ({type(exc).__name__}: {exc}); trying {following.model}",
                    {
                        "failed_model": candidate.model,
                        "fallback_model": following.model,
                        "fallback_provider": following.provider,
                        "error": exc,
                    },
                )
            )
    raise AssertionError("unreachable")  # pragma: no cover


def _key(request: Request) -> str:
    return f"{request.provider or ''}/{request.model}"


def _for_model(request: Request, entry: str | tuple[str, str]) -> Request:
    if isinstance(entry, tuple):
        provider, model = entry
        return replace(request, provider=provider, model=model)
    return replace(request, model=entry)

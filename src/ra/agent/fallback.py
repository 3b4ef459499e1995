"""Fallback models (agentic-loop-go-port-spec 3.1 ``FallbackModel``): one call, other models.

When a model call still fails after its retries with an error that another model may not have -
the provider is overloaded or erring (``ServerError``), or the model is not served
(``NotFoundError``) - the same request is sent to the next model of
``SessionConfig.fallback_models``, with a WARNING (``code="fallback_model"``). Errors that another
model would hit just the same never move on: bad credentials, a rate limit, an invalid request,
a context that is too long. Only the failed call moves: the next call starts again from the
primary model (as Claude Code does), and the USAGE event of the call names the model that answered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ra.llm.errors import NotFoundError, ServerError

from .events import WarningEvent

if TYPE_CHECKING:
    from ra.llm.types import Request, Response

    from .state import RunState

__all__ = ["FALLBACK_ERRORS", "with_fallback"]

#: The errors that move a call on to the next model.
FALLBACK_ERRORS: tuple[type[BaseException], ...] = (ServerError, NotFoundError)


async def with_fallback(run: RunState, request: Request, call: Callable[[Request], Awaitable[Response]]) -> Response:
    """``call(request)``, then ``call`` on each fallback model while the failure is one of
    :data:`FALLBACK_ERRORS`; the last failure is raised."""
    fallbacks = run.config.fallback_models
    run.answered_by = request.model
    if not fallbacks:
        return await call(request)
    candidates = [request, *(_for_model(request, entry) for entry in fallbacks)]
    for index, candidate in enumerate(candidates):
        try:
            response = await call(candidate)
            run.answered_by = candidate.model
            return response
        except FALLBACK_ERRORS as exc:
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


def _for_model(request: Request, entry: str | tuple[str, str]) -> Request:
    if isinstance(entry, tuple):
        provider, model = entry
        return replace(request, provider=provider, model=model)
    return replace(request, model=entry)

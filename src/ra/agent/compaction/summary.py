"""Writing the summary: the summariser's request, the transcript it reads, pieces, the call.

The summariser is the session's own model (or ``CompactionConfig.summary_model``, same provider).
Its request keeps the session's real system prompt - project instructions and all - and offers
no tools; the conversation to summarise goes in as one user message, as a plain transcript, with
the previous summary when there is one: a later compaction *updates* the summary instead of
starting over, so what an early summary kept is not lost to a later one.

No request known to be too long is sent: when the transcript does not fit the window (next to
the system prompt, the instructions, the previous summary and the room for the answer), it is
summarised in pieces, oldest first, each piece updating the summary of the ones before. If the
provider still refuses a piece, the pieces are made smaller and the piece is tried again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ra.llm.errors import ContextLengthError
from ra.llm.types import Message, Request

from ..errors import ContextOverflowError
from ..history import (
    AssistantTurn,
    CompactionTurn,
    ContextTurn,
    SteeringTurn,
    SystemTurn,
    ToolResultsTurn,
    Turn,
    UserTurn,
)
from .context import clip_middle

if TYPE_CHECKING:
    from ..state import RunState

__all__ = ["SUMMARY_INSTRUCTIONS", "BudgetSpent", "budget_refusal", "render_turn", "summarise", "summary_prompt"]

SUMMARY_INSTRUCTIONS = """\
You are writing a hand-over note, not continuing the work. The transcript below is the older part \
of a coding session that no longer fits the context window; the session will continue from your \
note, the user's own messages (repeated word for word after it) and the most recent turns.

Write the note in these sections, in this order, with these headings. Be specific: file paths, \
function names, commands, error messages, numbers. Leave out pleasantries and anything already done \
and no longer relevant. Do not invent anything the transcript does not show.

## Goal
What the user asked for, in their terms. If the request changed along the way, say how.
## Constraints
Rules and preferences the user or the project set (style, tools to use or avoid, things not to touch).
## Progress
- Done: what is finished and verified.
- In progress: what was being worked on when the transcript ends.
- Blocked: what failed and why, if anything.
## Decisions
Choices made and the reason for each, so they are not reopened.
## Open work
The next steps, in order, as concrete actions.
## Notes
Anything else the next steps need: facts learned about the code, commands that work, pitfalls."""

_UPDATE = """\
An earlier note already covers the part of the session before this transcript; it is given in \
<previous-note>. Write the note anew so that it covers both: keep everything from the earlier note \
that still holds (the goal, constraints and decisions above all), update what the transcript changes \
(move finished items to Done, drop open work that is done), and add what is new. Keep the same sections."""


def summary_prompt(transcript: str, previous: str | None, instructions: str | None) -> str:
    """The summariser's one user message."""
    parts = [SUMMARY_INSTRUCTIONS]
    if previous:
        parts.append(_UPDATE)
        parts.append(f"<previous-note>\n{previous.strip()}\n</previous-note>")
    if instructions:
        parts.append(f"The user asked for this note to take particular care of the following:\n{instructions.strip()}")
    parts.append(f"<transcript>\n{transcript}\n</transcript>")
    parts.append("Write the note now, and nothing else.")
    return "\n\n".join(parts)


def render_turn(turn: Turn, result_chars: int) -> str:
    """One turn as transcript text (tool results cut in the middle to ``result_chars``)."""
    if isinstance(turn, UserTurn):
        extra = f" [{len(turn.images)} image(s) attached]" if turn.images else ""
        return f"[User]{extra}: {turn.content}"
    if isinstance(turn, SteeringTurn):
        return f"[User, during the work]: {turn.content}"
    if isinstance(turn, ContextTurn):
        return f"[Context added by {turn.source or 'ra'}]: {turn.content}"
    if isinstance(turn, SystemTurn):
        return f"[System]: {turn.content}"
    if isinstance(turn, AssistantTurn):
        lines = [f"[Assistant]: {turn.content}"] if turn.content else []
        for call in turn.tool_calls:
            args = call.arguments if call.raw_arguments is None else call.raw_arguments
            shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str)
            lines.append(f"[Assistant called {call.name}]: {clip_middle(shown, result_chars)}")
        return "\n".join(lines)
    if isinstance(turn, ToolResultsTurn):
        lines = []
        for i, result in enumerate(turn.results):
            name = turn.names[i] if i < len(turn.names) else "tool"
            content = result.content if isinstance(result.content, str) else json.dumps(result.content, default=str)
            status = " (error)" if result.is_error else ""
            lines.append(f"[{name} result{status}]: {clip_middle(content, result_chars)}")
        return "\n".join(lines)
    if isinstance(turn, CompactionTurn):
        return ""
    raise TypeError(f"not a turn: {type(turn).__name__}")


#: Characters a piece keeps free besides its estimate (tokenisers differ from chars / 4).
_SLACK = 0.9
#: Times the pieces are made smaller after the provider refused one as too long.
_SHRINKS = 3
#: The smallest piece worth a request, in characters.
_MIN_PIECE = 400


async def summarise(
    run: RunState,
    turns: Sequence[Turn],
    previous: str | None,
    instructions: str | None,
    *,
    model: str,
    max_tokens: int,
    result_chars: int,
) -> str:
    """The summary of ``turns`` (updating ``previous``), written by ``model``."""
    texts = [t for t in (render_turn(turn, result_chars) for turn in turns) if t]
    window = run.profile.context_window_size
    system = run.system_message
    fixed = len(summary_prompt("", previous, instructions)) + (run.system_chars if system is not None else 0)
    if window and window > 0:
        room = int((window - max_tokens) * 4 * _SLACK) - fixed - len(_longest_summary(max_tokens))
        if room < _MIN_PIECE:
            raise ContextOverflowError(
                "cannot write a summary: the system prompt, the instructions and the previous summary leave "
                f"no room for the conversation in the model's window ({window} tokens, {max_tokens} kept for "
                "the summary). Shorten the system prompt or use a model with a larger window."
            )
    else:
        room = None
    summary = previous
    position = 0
    shrinks = 0
    while position < len(texts):
        piece, used = _piece(texts, position, room)
        try:
            summary = await _call(run, summary_prompt(piece, summary, instructions), model, max_tokens)
        except ContextLengthError as exc:
            shrinks += 1
            if shrinks > _SHRINKS:
                raise ContextOverflowError(
                    "cannot write a summary: the model refused even small pieces of the conversation as too long "
                    f"({exc})"
                ) from exc
            room = max(_MIN_PIECE, (room if room is not None else len(piece)) // 2)
            continue
        position += used
    if not summary or not summary.strip():
        raise ContextOverflowError("cannot compact: the model wrote an empty summary")
    return summary


def _longest_summary(max_tokens: int) -> str:
    # The previous summary in a later piece is at most what the model may write.
    return " " * (max_tokens * 4)


def _piece(texts: list[str], position: int, room: int | None) -> tuple[str, int]:
    """The transcript text of the next piece from ``position``, and how many turns it covers."""
    if room is None:
        return "\n\n".join(texts[position:]), len(texts) - position
    chosen: list[str] = []
    size = 0
    for text in texts[position:]:
        cost = len(text) + 2
        if chosen and size + cost > room:
            break
        if not chosen and cost > room:
            chosen.append(clip_middle(text, room))  # one turn larger than a piece: its middle goes
            size = room
            break
        chosen.append(text)
        size += cost
    return "\n\n".join(chosen), len(chosen)


def budget_refusal(run: RunState, model: str) -> BaseException | None:
    """Why a summariser call to ``model`` may not be made under the session's budget (or the
    budget of a session above it), or None: the spend already reached a budget, or the model has
    no price while ``unknown_price="error"``. The summary call is paid like any call, so it keeps
    the same rules (it is not held in advance, though: see docs/agent.md)."""
    from ..controls.budget import budgeted_meters, price_refusal

    provider = run.profile.provider or run.profile.id
    refused = price_refusal(run.meter, "summary model", model, provider)
    if refused is not None:
        return refused
    for meter in budgeted_meters(run.meter):
        limit = meter.config.max_budget_usd
        if limit is not None and meter.total_cost_usd >= limit:
            return BudgetSpent(
                f"the budget of ${limit:g} is spent (${meter.total_cost_usd:.4f}); no summary is written"
            )
    return None


class BudgetSpent(Exception):
    """The budget was reached: the summary is not written."""


async def _call(run: RunState, prompt: str, model: str, max_tokens: int) -> str:
    """One summariser call: retried like any model call, counted in the session's usage and spend."""
    from ra.llm.retrying import retry

    if (refused := budget_refusal(run, model)) is not None:
        raise refused
    profile = run.profile
    system = run.system_message
    messages = [system, Message.user(prompt)] if system is not None else [Message.user(prompt)]
    request = Request(
        model=model,
        messages=messages,
        provider=profile.provider or profile.id,
        max_tokens=max_tokens,
        provider_options=profile.provider_options(),
    )
    client = run.client()
    started = time.monotonic()
    try:
        response = await retry(lambda: client.complete(request), run.retry_policy())
    finally:
        run.api_seconds += time.monotonic() - started
    usage = response.usage
    run.usage = run.usage + usage
    run.tally.usage = run.tally.usage + usage
    answered = response.model or model
    run.charge(usage, answered, response.provider or profile.provider or None)
    return response.text

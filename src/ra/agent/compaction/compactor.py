"""The compactor: when to compact, and the steps of one compaction.

The loop calls it at one place, before each model call (:func:`compact_if_due`) and when the
provider refused the context (:func:`compact_after_overflow`); ``Session.compact()`` calls
:func:`compact_now`. One compaction:

1. **Cheap pass** (not for ``compact()``): clear old tool outputs from what is sent
   (:mod:`.cheap`); stop there when that is enough.
2. **Cut** at a turn boundary, keeping about ``keep_recent`` tokens of the newest turns (:mod:`.cut`).
3. **Ask the controls** (``before_compact``): one may cancel, or supply the summary.
4. **Summarise** the turns before the cut, updating the last summary (:mod:`.summary`).
5. **Record** a :class:`~ra.agent.history.CompactionTurn` (summary, cut, the user's messages to
   repeat, the files touched) and rebuild ``History.messages`` from the turns with
   :func:`~.context.context_from_turns` - exactly what a resumed session will rebuild.

It never loops: three compactions in a row that make no room (they free less than 5% of the
context, or leave it above the point where compaction starts), or a fourth overflow on the same
call, end the input with a :class:`~ra.agent.errors.ContextOverflowError`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from enum import Enum
from typing import TYPE_CHECKING

from ..controls.decisions import CancelCompaction, UseSummary
from ..errors import ContextOverflowError
from ..events import CompactionEnd, CompactionStart
from ..history import CompactionTurn, UserTurn
from .cheap import clear_tool_outputs
from .config import Budgets
from .context import context_from_turns, last_compaction, select_user_messages
from .cut import find_cut
from .files import touched_files
from .plan import CompactionPlan, Trigger
from .summary import BudgetSpent, summarise

if TYPE_CHECKING:
    from ..controls.chain import Controls
    from ..state import RunState

__all__ = ["MAX_OVERFLOW_RECOVERIES", "MAX_STALLS", "compact_after_overflow", "compact_if_due", "compact_now"]

#: Compactions in a row that free less than :data:`STALL_FRACTION` before giving up.
MAX_STALLS = 3
STALL_FRACTION = 0.05
#: Compact-and-retry attempts for one model call after the provider refused the context.
MAX_OVERFLOW_RECOVERIES = 3


class _Outcome(Enum):
    NOTHING = "nothing"  # nothing could be cleared or summarised
    CLEARED = "cleared"  # the cheap pass was enough
    SUMMARISED = "summarised"
    CANCELLED = "cancelled"


async def compact_if_due(run: RunState, controls: Controls) -> None:
    """Before a model call: compact when the context estimate plus the reserve for the answer
    exceeds the window (``context_overflow="compact"`` with ``compaction.auto``)."""
    config = run.config.compaction
    window = run.profile.context_window_size
    if not config.auto or not window or window <= 0:
        return
    budgets = config.budgets(window)
    before = run.context.estimate(run.context_chars)
    if before + budgets.reserve <= window:
        return
    await _compact(run, controls, "auto", None, budgets, before, cheap_first=True)


async def compact_after_overflow(run: RunState, controls: Controls, error: BaseException, attempt: int) -> None:
    """The provider refused the context: compact so that the call can be retried, or raise
    ContextOverflowError when nothing more can be done."""
    if attempt > MAX_OVERFLOW_RECOVERIES:
        raise ContextOverflowError(
            f"the provider still refuses the context after {MAX_OVERFLOW_RECOVERIES} compactions for this call "
            f"({error}); start a new session or shorten the task"
        ) from error
    config = run.config.compaction
    before = run.context.estimate(run.context_chars)
    # The provider's count disagrees with ours (or its window is not the profile's): the retry
    # must be much smaller whatever the numbers.
    budgets = _keep_at_most_half(config.budgets(run.profile.context_window_size), run.history.chars // 4)
    outcome, reason = await _compact(run, controls, "overflow", None, budgets, before, cheap_first=True)
    if outcome is _Outcome.CANCELLED:
        raise ContextOverflowError(
            f"the provider refused the context ({error}) and the compaction was cancelled"
            f"{f': {reason}' if reason else ''}"
        ) from error
    if outcome is _Outcome.NOTHING:
        raise ContextOverflowError(
            f"the provider refused the context ({error}) and nothing is left to compact: only the newest "
            f"exchange, the summary and the user's messages remain (about {before} tokens). Start a new session "
            "or shorten the task."
        ) from error


async def compact_now(run: RunState, controls: Controls, instructions: str | None) -> CompactionTurn | None:
    """``Session.compact()``: summarise now (no cheap pass). None when there is nothing to
    summarise yet or a control cancelled it."""
    config = run.config.compaction
    before = run.context.estimate(run.context_chars)
    budgets = _keep_at_most_half(config.budgets(run.profile.context_window_size), run.history.chars // 4)
    outcome, _ = await _compact(run, controls, "manual", instructions, budgets, before, cheap_first=False)
    if outcome is not _Outcome.SUMMARISED:
        return None
    last = run.history.turns[-1]
    return last if isinstance(last, CompactionTurn) else None


async def _compact(
    run: RunState,
    controls: Controls,
    trigger: Trigger,
    instructions: str | None,
    budgets: Budgets,
    before: int,
    *,
    cheap_first: bool,
) -> tuple[_Outcome, str]:
    history = run.history
    turns = history.turns
    cleared = (
        clear_tool_outputs(history.messages, budgets.protect_tool_output, budgets.minimum_tool_output)
        if cheap_first and run.config.compaction.clear_tool_outputs
        else None
    )
    found = last_compaction(turns)
    previous = found[1] if found is not None else None
    start = previous.first_kept if previous is not None else 0
    cut = find_cut(turns, start, budgets.keep_recent)
    if cleared is None and cut is None:
        return _Outcome.NOTHING, ""

    run.emit(CompactionStart(trigger, before))
    try:
        if cleared is not None:
            history.replace_messages(cleared.messages)
            run.context.reset()
            after = _size(run)
            if cut is None or _enough(run, budgets, after):
                run.emit(CompactionEnd(trigger, "tool_outputs", before, after, cleared_tool_outputs=cleared.outputs))
                _count(run, trigger, budgets, before, after)
                return _Outcome.CLEARED, ""

        assert cut is not None
        summarised = turns[start:cut]
        plan = CompactionPlan(trigger, instructions, before, summarised, cut, previous.summary if previous else None)
        decision = await controls.before_compact(run, plan)  # CONTROL: before_compact
        if isinstance(decision, CancelCompaction):
            run.emit(CompactionEnd(trigger, "none", before, _size(run), cancelled=True, reason=decision.reason or None))
            return _Outcome.CANCELLED, decision.reason

        content = [t for t in summarised if not isinstance(t, CompactionTurn)]
        config = run.config.compaction
        if isinstance(decision, UseSummary):
            summary = decision.summary
        else:
            try:
                summary = await summarise(
                    run,
                    content,
                    plan.previous_summary,
                    instructions,
                    model=config.summary_model or run.model,
                    max_tokens=budgets.summary_max,
                    result_chars=config.summary_tool_result_chars,
                )
            except BudgetSpent as spent:
                # Like a cancel: the budget control ends the input at its next check.
                run.emit(CompactionEnd(trigger, "none", before, _size(run), cancelled=True, reason=str(spent)))
                return _Outcome.CANCELLED, str(spent)
        candidates = list(previous.user_messages) if previous is not None else []
        candidates.extend(t.content for t in content if isinstance(t, UserTurn))
        users, omitted = select_user_messages(candidates, budgets.user_messages)
        details = touched_files(content, previous.details if previous is not None else None)
        earlier = previous.details.get("omitted_user_messages", 0) if previous is not None else 0
        details["omitted_user_messages"] = omitted + (earlier if isinstance(earlier, int) else 0)  # type: ignore[assignment]
        turn = CompactionTurn(summary, cut, before, 0, trigger, users, details)
        history.append(turn)
        history.replace_messages(context_from_turns(history.turns))
        run.context.reset()
        turn.tokens_after = after = _size(run)
        run.emit(
            CompactionEnd(
                trigger,
                "summary",
                before,
                after,
                summarized_turns=len(content),
                kept_turns=len(turns) - 1 - cut,
                user_messages=len(users),
            )
        )
    except ContextOverflowError as exc:
        run.emit(CompactionEnd(trigger, "none", before, _size(run), reason=str(exc)))
        raise
    except Exception as exc:
        run.emit(CompactionEnd(trigger, "none", before, _size(run), reason=f"{type(exc).__name__}: {exc}"))
        raise
    _count(run, trigger, budgets, before, after)
    return _Outcome.SUMMARISED, ""


def _keep_at_most_half(budgets: Budgets, tokens: int) -> Budgets:
    """Keep at most half of a conversation of ``tokens`` verbatim (after an overflow, and on demand:
    a compaction someone asked for always summarises something when there is anything)."""
    return replace(budgets, keep_recent=min(budgets.keep_recent, max(1, tokens // 2)))


def _size(run: RunState) -> int:
    """The context's estimated size once it changed (no provider count to anchor on): the system
    prompt, the messages and the tool definitions (which the provider's count includes too)."""
    tools = sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in run.tool_definitions())
    return (run.context_chars + tools) // 4


def _enough(run: RunState, budgets: Budgets, after: int) -> bool:
    window = run.profile.context_window_size
    return not window or window <= 0 or after + budgets.reserve <= window


def _count(run: RunState, trigger: Trigger, budgets: Budgets, before: int, after: int) -> None:
    """Count compactions in a row that made no room; the third ends the input.

    A compaction makes no room when it frees less than 5% of the context, or - the window being
    known - leaves the context above the point where compaction starts (window minus reserve):
    then the next call would compact again, and the one after, without the session moving on.
    """
    if trigger == "manual":
        return
    window = run.profile.context_window_size
    freed_little = before <= 0 or (before - after) < STALL_FRACTION * before
    still_full = bool(window and window > 0 and after + budgets.reserve > window)
    if not freed_little and not still_full:
        run.compaction_stalls = 0
        return
    run.compaction_stalls += 1
    if run.compaction_stalls >= MAX_STALLS:
        run.compaction_stalls = 0
        raise ContextOverflowError(
            f"compaction is not making room: {MAX_STALLS} compactions in a row freed less than "
            f"{round(STALL_FRACTION * 100)}% of the context or left it too full for the next call (now about "
            f"{after} tokens; window {window}, {budgets.reserve} kept for the answer). The newest turns, the "
            "summary and the user's messages alone nearly fill the window: lower compaction.keep_recent_tokens "
            "or user_message_tokens, use a model with a larger window, or start a new session."
        )

"""The session's limits, as the first control on the seam (:mod:`ra.agent.controls`).

* ``max_tool_rounds_per_input`` - tool rounds in one input (stop reason ``round_limit``);
* ``max_turns`` - model calls over the session's life (``turn_limit``, scope ``session``);
* ``max_turns_per_input`` - model calls in one input (``turn_limit``, scope ``turns_per_input``):
  what the ``ra`` command's ``--max-steps`` sets;
* ``time_limit_s`` - wall-clock seconds for one input (``time_limit``): a timer stops the input
  the way ``Session.interrupt()`` does, so a model call in flight is cancelled and running
  commands are stopped, and the conversation stays valid and usable.

The config is read at every check, so a host may change a limit between inputs or mid-input.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..config import StopReason
from ..events import TurnLimit
from .chain import Control
from .decisions import Stop

if TYPE_CHECKING:
    from ..state import RunState

__all__ = ["Limits"]


class Limits(Control):
    """Round, turn and time limits from ``run.config``. One per session (it holds the timer)."""

    __slots__ = ("_timer",)

    def __init__(self) -> None:
        self._timer: asyncio.TimerHandle | None = None

    async def input_start(self, run: RunState, text: str) -> Stop | None:
        seconds = run.config.time_limit_s
        if seconds is not None:
            self._timer = asyncio.get_running_loop().call_later(seconds, self._time_up, run, seconds)
        return None

    def _time_up(self, run: RunState, seconds: float) -> None:
        self._timer = None
        if run.request_stop(StopReason.TIME_LIMIT):
            run.emit(TurnLimit(seconds, "time", total_turns=run.input_steps))

    async def before_step(self, run: RunState) -> Stop | None:
        config = run.config
        limit = config.max_tool_rounds_per_input
        if limit > 0 and run.input_rounds >= limit:
            run.emit(TurnLimit(limit, "input", round=run.input_rounds))
            return Stop(StopReason.ROUND_LIMIT, f"{limit} tool rounds in this input")
        limit = config.max_turns
        if limit > 0 and run.turn_count >= limit:
            run.emit(TurnLimit(limit, "session", total_turns=run.turn_count))
            return Stop(StopReason.TURN_LIMIT, f"{limit} model calls in this session")
        limit = config.max_turns_per_input
        if limit > 0 and run.input_steps >= limit:
            run.emit(TurnLimit(limit, "turns_per_input", total_turns=run.input_steps))
            return Stop(StopReason.TURN_LIMIT, f"{limit} model calls in this input")
        return None

    async def input_end(self, run: RunState, reason: StopReason) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

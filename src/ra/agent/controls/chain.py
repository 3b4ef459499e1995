"""The decision seam: controls that the loop asks at fixed points, and that answer with decisions.

Events only observe. A *control* decides: the loop calls it at each of these points and acts on
what it returns (``None`` always means "no opinion, carry on"):

=================  ==============================  =============================================
point              when                            a control may return
=================  ==============================  =============================================
``session_start``  the first ``submit()``          -
``input_start``    an input begins                 :class:`Stop` (refuse the input) or :class:`Admit`
                                                   (let it in with added context)
``before_step``    before each model call          :class:`Stop` (limits, budget, time)
``after_model``    a response arrived, before its  :class:`Stop` (the calls are answered as not
                   tools run                       run; budget)
``before_tool``    before each tool call runs      :class:`Allow` (maybe with new arguments) or
                                                   :class:`Deny` (the model reads the reason)
``after_tool``     a tool call ran or failed       a replacement ``ToolCallOutcome``
``after_step``     the step is recorded            - (accounting, persistence, telemetry)
``on_stop``        the model wants to end the      :class:`Continue` (the message is added as a
                   input (a text-only answer)      user message and the loop goes on)
``before_prune``   old context is about to be      - (observe what is dropped; prune mode)
                   dropped
``before_compact`` older turns are about to be     :class:`CancelCompaction` (keep the context as
                   summarised (compact mode,       it is) or :class:`UseSummary` (this summary
                   ``Session.compact()``)          instead of the model's)
``subagent_start`` a subagent was spawned          - (observe)
``input_end``      the input ended                 -
``session_end``    the session closes              -
=================  ==============================  =============================================

Controls run in the order they were added, one after another (never concurrently: their order is
part of the policy). The first :class:`Stop`, :class:`Deny`, :class:`Continue` or compaction decision wins and the rest
are not asked; ``Allow`` with rewritten arguments passes the new arguments on to the next control.
A control that raises in ``before_tool`` denies the call (fail closed); one that raises anywhere
else is reported as a WARNING (``code="control_failed"``) and treated as having no opinion.

A control is a :class:`Control` that overrides the points it needs (the chain also takes, at run
time, any object with some of these async methods). The chain looks each method up once, so points
nobody implements cost nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from ra.tools.pipeline import Allow, Deny, ToolCallOutcome

from ..config import StopReason
from ..events import WarningEvent
from .decisions import Admit, CancelCompaction, Continue, Stop, UseSummary

if TYPE_CHECKING:
    from ra.llm.types import Message, Response, ToolCall
    from ra.tools.registry import RegisteredTool

    from ..compaction.plan import CompactionPlan
    from ..state import RunState

__all__ = ["Control", "Controls", "ToolGateForRun"]


class Control:
    """Base class with every point as a no-op; override the ones you need (all async)."""

    async def session_start(self, run: RunState) -> None:
        return None

    async def input_start(self, run: RunState, text: str) -> Stop | Admit | None:
        return None

    async def before_step(self, run: RunState) -> Stop | None:
        return None

    async def after_model(self, run: RunState, response: Response) -> Stop | None:
        return None

    async def before_tool(self, run: RunState, call: ToolCall, tool: RegisteredTool) -> Allow | Deny | None:
        return None

    async def after_tool(
        self, run: RunState, outcome: ToolCallOutcome, tool: RegisteredTool | None
    ) -> ToolCallOutcome | None:
        return None

    async def after_step(self, run: RunState, response: Response, outcomes: list[ToolCallOutcome]) -> None:
        return None

    async def on_stop(self, run: RunState, answer: str) -> Continue | None:
        return None

    async def before_prune(self, run: RunState, messages: list[Message]) -> None:
        return None

    async def before_compact(self, run: RunState, plan: CompactionPlan) -> CancelCompaction | UseSummary | None:
        return None

    async def input_end(self, run: RunState, reason: StopReason) -> None:
        return None

    async def subagent_start(self, run: RunState, agent_id: str, agent_type: str | None, task: str) -> None:
        return None

    async def session_end(self, run: RunState, reason: str) -> None:
        return None


#: The points, in the order the table above lists them: every public method of :class:`Control`.
_POINTS = tuple(name for name in vars(Control) if not name.startswith("_"))

_C = TypeVar("_C", bound=Control)


class Controls:
    """The session's controls in order, asked at each point; :meth:`gate` binds the tool points to a run."""

    __slots__ = ("_by_point", "_items")

    def __init__(self, items: Iterable[Control] = ()) -> None:
        self._items: list[Control] = []
        self._by_point: dict[str, list[Control]] = {}
        for item in items:
            self.add(item)

    # -- membership --------------------------------------------------------------------------------
    def add(self, control: _C, *, first: bool = False) -> _C:
        """Append ``control`` (asked after the ones already there), or with ``first=True`` put it
        before them (an observer that must see every input, even one a later control refuses,
        such as the tracing control); returns it."""
        if not any(callable(getattr(control, point, None)) for point in _POINTS):
            raise TypeError(f"{type(control).__name__} implements none of the control points: {', '.join(_POINTS)}")
        if first:
            self._items.insert(0, control)
        else:
            self._items.append(control)
        self._index()
        return control

    def remove(self, control: Control) -> bool:
        if control not in self._items:
            return False
        self._items.remove(control)
        self._index()
        return True

    def __iter__(self) -> Iterator[Control]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def _index(self) -> None:
        by_point: dict[str, list[Control]] = {}
        for point in _POINTS:
            base = getattr(Control, point)
            implementers = []
            for item in self._items:
                method = getattr(type(item), point, None)
                if method is None or method is base:
                    continue  # inherited no-op: skip it at run time
                implementers.append(item)
            by_point[point] = implementers
        self._by_point = by_point

    # -- the points -------------------------------------------------------------------------------------
    async def session_start(self, run: RunState) -> None:
        await self._observe_all(run, "session_start", (run,))

    async def input_start(self, run: RunState, text: str) -> Stop | list[Admit]:
        """The first :class:`Stop` refuses the input; else every control's :class:`Admit`, in order."""
        admitted: list[Admit] = []
        for control in self._by_point["input_start"]:
            try:
                decision = await control.input_start(run, text)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                _warn(run, control, "input_start", exc)
                continue
            if isinstance(decision, Stop):
                return decision
            if isinstance(decision, Admit):
                admitted.append(decision)
        return admitted

    async def before_step(self, run: RunState) -> Stop | None:
        return await self._first(run, "before_step", (run,))

    async def after_model(self, run: RunState, response: Response) -> Stop | None:
        return await self._first(run, "after_model", (run, response))

    async def after_step(self, run: RunState, response: Response, outcomes: list[ToolCallOutcome]) -> None:
        await self._observe_all(run, "after_step", (run, response, outcomes))

    async def on_stop(self, run: RunState, answer: str) -> Continue | None:
        return await self._first(run, "on_stop", (run, answer))

    async def before_prune(self, run: RunState, messages: list[Message]) -> None:
        await self._observe_all(run, "before_prune", (run, messages))

    async def before_compact(self, run: RunState, plan: CompactionPlan) -> CancelCompaction | UseSummary | None:
        """The first control that cancels the compaction or supplies its summary decides."""
        for control in self._by_point["before_compact"]:
            try:
                decision = await control.before_compact(run, plan)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                _warn(run, control, "before_compact", exc)
                continue
            if isinstance(decision, CancelCompaction | UseSummary):
                return decision
            if decision is not None:
                wrong = TypeError(f"answered {type(decision).__name__}, not CancelCompaction, UseSummary or None")
                _warn(run, control, "before_compact", wrong)
        return None

    async def input_end(self, run: RunState, reason: StopReason) -> None:
        await self._observe_all(run, "input_end", (run, reason))

    async def subagent_start(self, run: RunState, agent_id: str, agent_type: str | None, task: str) -> None:
        await self._observe_all(run, "subagent_start", (run, agent_id, agent_type, task))

    async def session_end(self, run: RunState, reason: str) -> None:
        await self._observe_all(run, "session_end", (run, reason))

    # -- tools ---------------------------------------------------------------------------------------------
    def gate(self, run: RunState) -> ToolGateForRun:
        """The pipeline's ``ToolGate`` for ``run``: ``before_tool`` and ``after_tool`` asked with it."""
        return ToolGateForRun(self, run)

    # -- helpers ---------------------------------------------------------------------------------------------
    async def _first(self, run: RunState, point: str, args: tuple[Any, ...]) -> Any:
        for control in self._by_point[point]:
            try:
                decision = await getattr(control, point)(*args)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                _warn(run, control, point, exc)
                continue
            if decision is not None:
                return decision
        return None

    async def _observe_all(self, run: RunState, point: str, args: tuple[Any, ...]) -> None:
        for control in self._by_point[point]:
            try:
                await getattr(control, point)(*args)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                _warn(run, control, point, exc)


class ToolGateForRun:
    """The pipeline's ``ToolGate``: the controls' ``before_tool`` and ``after_tool``, asked with one run.

    The controls hold no run of their own (the run is data, they are policy); the session binds the
    two once, when it builds the run, and gives the pipeline this object.
    """

    __slots__ = ("_controls", "_run")

    def __init__(self, controls: Controls, run: RunState) -> None:
        self._controls = controls
        self._run = run

    async def before_tool(self, call: ToolCall, tool: RegisteredTool) -> Allow | Deny | None:
        run = self._run
        rewritten: dict[str, Any] | None = None
        for control in self._controls._by_point["before_tool"]:
            # An exception propagates: the pipeline turns it into a denial (fail closed).
            decision = await control.before_tool(run, call, tool)
            if isinstance(decision, Deny):
                return decision
            if isinstance(decision, Allow) and decision.arguments is not None:
                rewritten = dict(decision.arguments)
                call = call.with_arguments(rewritten)
        return Allow(rewritten) if rewritten is not None else None

    async def after_tool(self, outcome: ToolCallOutcome, tool: RegisteredTool | None) -> ToolCallOutcome:
        run = self._run
        for control in self._controls._by_point["after_tool"]:
            try:
                replacement = await control.after_tool(run, outcome, tool)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                _warn(run, control, "after_tool", exc)
                continue
            if replacement is not None:
                outcome = replacement
        return outcome


def _warn(run: RunState, control: Any, point: str, exc: BaseException) -> None:
    name = type(control).__name__
    run.emit(
        WarningEvent(
            "control_failed",
            f"control {name} failed in {point}: {type(exc).__name__}: {exc}",
            {"control": name, "point": point, "error": exc},
        )
    )

"""Re-run a recorded session against today's code and tree: :func:`replay`.

The record's model replies are fed back through a real :class:`~ra.agent.session.Session`, so
that everything else is today's: the system prompt, the tools and their truncation, permissions,
hooks and the host's controls. Two pieces do it (each in a module of its own):

* :class:`RecordedModel`, a provider adapter on an ``ra.llm`` Client: each model call of the
  session is answered with the next recorded reply of the current input (its provider message
  when the record has one, usage from the record); a call the record does not have ends the input
  with an error, reported as a difference;
* :class:`ReplayCheck`, a control added last: after each step it compares every tool result with
  the recorded one and queues the steering that followed the step in the record; before each step
  it stops the replay when asked to (first difference, end of a step range).

A subagent the session spawns is replayed from its own record (:mod:`.subagents`): given the
store and the recorded session's id, each spawn gets its recorded agent id, a RecordedModel on its
own record and a check of its own; its tools run for real. A spawn no record answers is refused.

The tree is not reset: tools write to it as they did when the session was recorded, so a replay
starts from the tree the session started from (a clean checkout of the same commit, say).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ra.llm.client import Client

from ..config import SessionConfig
from ..errors import SessionError
from ..loop import _SKIPPED_FOR_STEERING
from .check import ReplayCheck
from .model import RecordedModel, ReplayDiverged
from .plan import InputPlan, StepPlan, plan_replay
from .report import DEFAULT_IGNORES, Difference, DifferenceKind, ReplayReport, compile_ignores
from .subagents import RecordedAgents, ReplayTree

if TYPE_CHECKING:
    from ra.env.base import ExecutionEnvironment

    from ..controls.chain import Control
    from ..history import Turn
    from ..hooks.registry import Hooks
    from ..permissions.check import CanUseTool
    from ..profile import ProviderProfile
    from ..session import Session
    from ..store.base import SessionStore

__all__ = ["replay", "replay_config"]


async def replay(
    turns: Sequence[Turn],
    *,
    profile: ProviderProfile,
    execution_env: ExecutionEnvironment,
    config: SessionConfig | None = None,
    controls: Iterable[Control] = (),
    hooks: Hooks | None = None,
    can_use_tool: CanUseTool | None = None,
    ignore: Iterable[str | re.Pattern[str]] = (),
    default_ignores: bool = True,
    stop_at_first: bool = False,
    steps: tuple[int | None, int | None] | None = None,
    store: SessionStore | None = None,
    session_id: str | None = None,
) -> ReplayReport:
    """Re-run the tool calls of ``turns`` (a recorded session's path, oldest first) and report
    every step whose tool result differs from the recorded one.

    ``profile``, ``execution_env``, ``config``, ``controls``, ``hooks`` and ``can_use_tool`` are
    the Session's (today's prompt, tools, permissions and hooks). The config is copied and changed
    where a replay needs it: no model is called, so ``context_overflow="warn"``, no retries and no
    fallback models; the model costs nothing; loop detection is off (the warnings it injected are in
    the record as steering and are replayed from there).

    ``ignore``: regular expressions whose matches are masked in both texts before they are compared
    (timings, temporary paths); ``default_ignores`` adds :data:`DEFAULT_IGNORES` (the shell tools'
    duration line), False compares those too. ``stop_at_first``: stop after the first difference. ``steps``:
    ``(first, last)``, 1-based and inclusive (either may be None): compare only those steps; the
    steps before ``first`` still run (they build the state), and the replay stops after ``last``.

    ``store`` and ``session_id`` (the recorded session's id, its header's ``id``): where its
    subagents' records are. Each subagent the replay spawns answers its model calls from its own
    record and has its tool results compared (differences name it: :attr:`Difference.subagent`);
    without them, or without a record for a spawn, the spawn is refused and reported
    (``no_subagent_record``), and no model is called.

    Raises :class:`ReplayError` for turns that cannot be replayed, ValueError for a bad option.
    """
    if (store is None) != (session_id is None):
        raise ValueError("store and session_id go together: the store holds the records of session_id's subagents")
    patterns = compile_ignores([*(DEFAULT_IGNORES if default_ignores else ()), *ignore])
    first, last = _step_range(steps)
    plan = plan_replay(turns, _SKIPPED_FOR_STEERING)
    if first > plan.steps:
        raise ValueError(f"the record has {plan.steps} step(s): a range from step {first} compares nothing")
    agents = None
    if store is not None and session_id is not None:
        # Listed only when the record spawns: a record without subagents needs none of the store.
        spawns = _spawns(plan.inputs, profile)
        agents = await RecordedAgents.load(store, session_id) if spawns else RecordedAgents(f"store {store!r}")
    report = ReplayReport(recorded_steps=plan.steps)
    model = RecordedModel(profile.provider or profile.id)
    check = ReplayCheck(model, report, patterns, stop_at_first=stop_at_first, first=first, last=last)
    client = Client(providers={model.name: model})
    session_config = replay_config(config if config is not None else SessionConfig(**profile.session_defaults), profile)
    from ..session import Session

    session = Session(
        profile,
        execution_env,
        client,
        session_config,
        controls=[*controls, check],
        hooks=hooks,
        can_use_tool=can_use_tool,
    )
    model.session = session
    tree = ReplayTree(agents, model.name)
    tree.bind(session.id, check, session_id)
    session.spawn_hook = tree.spawn
    try:
        for number, planned in enumerate(plan.inputs, start=1):
            if check.done is not None:
                break
            if session.closing:
                check.add(
                    Difference(
                        DifferenceKind.INPUT_ERROR,
                        model.last_step,
                        f"the session closed before input {number}: the record's inputs from there were not replayed",
                    )
                )
                break
            await _replay_input(session, model, check, planned, number)
    finally:
        tree.closing = True
        try:
            await session.close()
        finally:
            await tree.close()
            await client.close()
    tree.finish(check, [s for i in plan.inputs for s in i.steps])
    report.stopped = report.stopped or check.done
    return report


async def _replay_input(
    session: Session, model: RecordedModel, check: ReplayCheck, planned: InputPlan, number: int
) -> None:
    for text in planned.steering:
        session.steer(text)
    model.begin(planned)
    try:
        result = await session.submit(planned.text, images=planned.images)
    except SessionError as exc:  # the session can take no more input (a control or hook closed it)
        check.add(
            Difference(
                DifferenceKind.INPUT_ERROR,
                model.last_step,
                f"input {number} could not be submitted ({exc}): the record's inputs from there were not replayed",
            )
        )
        check.done = check.done or "the session took no more input"
        return
    check.report.inputs = number
    if check.done is not None:
        return
    error = result.error
    if error is not None and not isinstance(error, ReplayDiverged):
        check.add(
            Difference(
                DifferenceKind.INPUT_ERROR,
                model.last_step,
                f"input {number} ended with an error: {type(error).__name__}: {error}",
            )
        )
    if isinstance(error, ReplayDiverged):
        return
    unused = planned.steps[model.used :]
    if unused and check.in_range(unused[0].number):
        check.add(
            Difference(
                DifferenceKind.UNUSED_REPLIES,
                model.last_step,
                f"input {number} ended ({result.stop_reason.value}) before the record's step(s) "
                f"{_numbers(unused)}: the recorded session went on",
            )
        )


def _spawns(inputs: list[InputPlan], profile: ProviderProfile) -> bool:
    """Whether the record calls a subagent tool (only then are the store's records listed)."""
    from ..subagents.manager import is_subagent_tool

    registry = profile.tool_registry
    for planned in inputs:
        for step in planned.steps:
            for call in step.reply.tool_calls:
                tool = registry.get(call.name)
                if tool is not None and is_subagent_tool(tool):
                    return True
    return False


def _numbers(steps: list[StepPlan]) -> str:
    if len(steps) == 1:
        return str(steps[0].number)
    return f"{steps[0].number}-{steps[-1].number}"


def _step_range(steps: tuple[int | None, int | None] | None) -> tuple[int, int | None]:
    if steps is None:
        return 1, None
    try:
        first, last = steps
    except (TypeError, ValueError):
        raise ValueError(f"steps is a (first, last) pair, got {steps!r}") from None
    for value in (first, last):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"step numbers start at 1, got {value!r}")
    if first is not None and last is not None and first > last:
        raise ValueError(f"the step range {first}-{last} is empty")
    return first or 1, last


def replay_config(config: SessionConfig, profile: ProviderProfile) -> SessionConfig:
    """A copy of ``config`` for a replay (see :func:`replay` for what changes and why)."""
    from ra.llm.pricing import ModelPrice
    from ra.llm.retrying import RetryPolicy

    return dataclasses.replace(
        config,
        context_overflow="warn",
        retry_policy=RetryPolicy(max_retries=0),
        fallback_models=(),
        enable_loop_detection=False,
        prices={**config.prices, profile.model: ModelPrice.free()},
    )

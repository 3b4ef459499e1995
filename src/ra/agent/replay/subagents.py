"""Subagents in a replay: each one answered from its own record and checked like the session.

A recorded session's subagents are recorded in records of their own, in the same store; each
header names the session that spawned it (``spawned_by``), its ``agent_id`` and the parent's call
that spawned it (``spawn_call_id``; records from before that field are matched by the agent id the
recorded ``spawn_agent`` result holds). :meth:`RecordedAgents.load` reads the whole tree of them
before the replay starts, so that the spawn - which is synchronous - only looks up.

The replayed session's ``spawn_hook`` (:class:`ra.agent.subagents.SpawnSetup`) is
:meth:`ReplayTree.spawn`: for each spawn it finds the recorded subagent and gives the new one its
recorded id (so that the ``spawn_agent`` result and the parent's later ``wait`` calls are the
recorded ones), a :class:`RecordedModel` of its own on its own record, and a
:class:`SubagentCheck` that compares its tool results. Its tools run for real. A spawn no record
answers is refused (the model reads why) and reported: no model is called for it. Nested
subagents work the same way (the hook is inherited), down to the config's ``max_subagent_depth``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ra.llm.client import Client

from ..config import StopReason
from ..controls.decisions import Admit, Stop
from ..subagents.manager import SpawnSetup, SubAgentError
from .check import ReplayCheck
from .model import RecordedModel
from .plan import InputPlan, ReplayError, StepPlan, plan_replay
from .report import AgentStep, Difference, DifferenceKind

if TYPE_CHECKING:
    from ra.llm.types import Response
    from ra.tools.pipeline import ToolCallOutcome

    from ..history import Turn
    from ..session import Session
    from ..state import RunState
    from ..store.base import SessionStore

__all__ = ["AgentRecord", "RecordedAgents", "ReplayTree", "SubagentCheck"]


@dataclass(slots=True)
class AgentRecord:
    """One subagent's record: its header and its turns (the path to its last entry)."""

    session_id: str
    header: dict[str, Any]
    turns: list[Turn]
    used: bool = False

    @property
    def agent_id(self) -> str | None:
        value = self.header.get("agent_id")
        return value if isinstance(value, str) and value else None

    @property
    def spawn_call_id(self) -> str | None:
        value = self.header.get("spawn_call_id")
        return value if isinstance(value, str) and value else None


@dataclass(slots=True)
class RecordedAgents:
    """The subagent records of a recorded session and of its subagents, by the spawning session's id."""

    #: Where they were looked up, for messages.
    where: str
    by_parent: dict[str, list[AgentRecord]] = field(default_factory=dict)
    #: Records of subagents that could not be read (a message each).
    problems: list[str] = field(default_factory=list)

    @classmethod
    async def load(cls, store: SessionStore, session_id: str) -> RecordedAgents:
        """Every record in ``store`` whose header's ``spawned_by`` leads back to ``session_id``."""
        from ..store.record import SessionRecord

        out = cls(f"store {store!r}")
        infos = [info for info in await store.list() if info.agent_id is not None]
        by_parent: dict[str, list[str]] = {}
        records: dict[str, SessionRecord] = {}
        for info in infos:
            parent = info.spawned_by
            if parent is None:  # a host store whose listing leaves it out: read the header
                record = await _read(store, info.id, out.problems)
                if record is None:
                    continue
                records[info.id] = record
                spawner = record.header.get("spawned_by")
                parent = spawner if isinstance(spawner, str) else None
            if parent is not None:
                by_parent.setdefault(parent, []).append(info.id)
        level = [session_id]
        seen = {session_id}
        while level:
            following: list[str] = []
            for parent in level:
                for child in by_parent.get(parent, ()):
                    if child in seen:
                        continue
                    seen.add(child)
                    record = records.get(child) or await _read(store, child, out.problems)
                    if record is None:
                        continue
                    out.by_parent.setdefault(parent, []).append(AgentRecord(child, record.header, list(record.turns)))
                    following.append(child)
            level = following
        for agents in out.by_parent.values():
            agents.sort(key=lambda a: str(a.header.get("timestamp", "")))
        return out

    def find(self, parent: str | None, call_id: str | None, recorded_result: Any) -> AgentRecord | None:
        """The unused record of the subagent that session ``parent`` spawned with call ``call_id``:
        the first whose header names the call, else (a record from before ``spawn_call_id``) the
        one whose agent id the recorded result of the call holds."""
        if parent is None or call_id is None:
            return None
        candidates = [a for a in self.by_parent.get(parent, ()) if not a.used]
        for agent in candidates:
            if agent.spawn_call_id == call_id:
                return agent
        agent_id = _agent_id_of(recorded_result)
        for agent in candidates:
            if agent.spawn_call_id is None and agent_id is not None and agent.agent_id == agent_id:
                return agent
        return None


async def _read(store: SessionStore, session_id: str, problems: list[str]) -> Any:
    from ..errors import SessionError
    from ..store.record import load_record

    try:
        return await load_record(store, session_id)
    except (SessionError, ValueError, OSError) as exc:  # corrupt or gone: reported where a spawn needs it
        problems.append(f"{session_id}: {type(exc).__name__}: {exc}")
        return None


def _agent_id_of(content: Any) -> str | None:
    if not isinstance(content, str):
        return None
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):
        return None
    value = data.get("agent_id") if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else None


class SubagentCheck(ReplayCheck):
    """A replayed subagent's check: compares its tool results with its record and hands the
    differences up, marked with where it is (its id and step, under the step that spawned it).

    Its inputs are not submitted by the replay but by the subagent's handle (its task, then what
    ``send_input`` sends), so each input that starts takes the record's next input; the steering
    in its record is not queued again (today's parent sends it, when it does)."""

    def __init__(
        self,
        model: RecordedModel,
        parent: ReplayCheck,
        tree: ReplayTree,
        record: AgentRecord,
        inputs: list[InputPlan],
        spawn_step: int | None,
    ) -> None:
        super().__init__(model, parent.report, parent.patterns)
        self.parent = parent
        self.tree = tree
        self.record = record
        self.agent_id = record.agent_id or record.session_id
        self.inputs = inputs
        self.spawn_step = spawn_step
        #: Inputs begun so far, and ended (their unused replies checked) so far.
        self.begun = 0
        self.ended = 0

    @property
    def root(self) -> ReplayCheck:
        check: ReplayCheck = self
        while isinstance(check, SubagentCheck):
            check = check.parent
        return check

    def in_range(self, number: int | None) -> bool:
        return self.parent.in_range(self.spawn_step)

    def add(self, difference: Difference) -> None:
        difference.subagent = (AgentStep(self.agent_id, self.record.session_id, difference.step), *difference.subagent)
        difference.step = self.spawn_step
        self.parent.add(difference)

    def _count_step(self) -> None:
        self.report.subagent_steps += 1

    def _label(self, step: StepPlan) -> str:
        return f"{self.agent_id} step {step.number}"

    def _steer(self, run: RunState, step: StepPlan) -> None:
        return None

    async def input_start(self, run: RunState, text: str) -> Stop | Admit | None:
        self.tree.bind(run.session_id, self)
        self.model.history = run.history
        number = self.begun + 1
        if self.begun < len(self.inputs):
            planned = self.inputs[self.begun]
        else:
            planned = InputPlan(text, ended="input")
            self.add(
                Difference(
                    DifferenceKind.EXTRA_CALL,
                    self.model.last_step,
                    f"the subagent got input {number}; its record has {len(self.inputs)}",
                )
            )
        self.begun = number
        self.model.begin(planned)
        return None

    async def before_step(self, run: RunState) -> Stop | None:
        root = self.root
        if root.done is not None or self.tree.closing:
            return Stop(StopReason.INTERRUPTED, f"replay stopped: {root.done or 'the replayed session ended'}")
        return None

    async def after_step(self, run: RunState, response: Response, outcomes: list[ToolCallOutcome]) -> None:
        if self.tree.closing:
            return
        await super().after_step(run, response, outcomes)

    async def input_end(self, run: RunState, reason: StopReason) -> None:
        if self.root.done is not None or self.tree.closing or self.begun > len(self.inputs):
            return
        self.ended = self.begun
        planned = self.inputs[self.begun - 1]
        unused = planned.steps[self.model.used :]
        if unused:
            self.add(
                Difference(
                    DifferenceKind.UNUSED_REPLIES,
                    self.model.last_step,
                    f"the subagent's input {self.begun} ended ({reason.value}) before its record's step(s) "
                    f"{_numbers(unused)}: the recorded subagent went on",
                )
            )

    def _extra_call(self, planned: InputPlan | None, previous: StepPlan | None) -> None:
        if self.tree.closing or self.begun > len(self.inputs):
            return  # cut off by the replayed session's end, or an input already reported
        super()._extra_call(planned, previous)

    def finish(self) -> None:
        """At the replay's end: the recorded steps this subagent did not get to (the replayed
        session ended, and closed it, first; or the record has inputs it was not sent now)."""
        if self.root.done is not None or self.begun > len(self.inputs):
            return
        current = self.inputs[self.begun - 1].steps[self.model.used :] if self.begun > self.ended else []
        later = [s for i in self.inputs[self.begun :] for s in i.steps]
        left = [*current, *later]
        inputs = len(self.inputs) - self.begun
        if not left and not inputs:
            return
        parts = [f"step(s) {_numbers(left)}"] if left else []
        if inputs:
            parts.append(f"{inputs} input(s) it was not sent now")
        self.add(
            Difference(
                DifferenceKind.UNUSED_REPLIES,
                self.model.last_step,
                f"the replay ended before the subagent's recorded {' and '.join(parts)}",
            )
        )


def _numbers(steps: Sequence[StepPlan]) -> str:
    if len(steps) == 1:
        return str(steps[0].number)
    return f"{steps[0].number}-{steps[-1].number}"


class ReplayTree:
    """The replayed session and the subagents it spawns: the ``spawn_hook`` that matches each spawn
    to its record, and the clients to close at the end."""

    def __init__(self, agents: RecordedAgents | None, provider: str) -> None:
        self.agents = agents
        self.provider = provider
        #: The check of each replayed session, by today's session id; the recorded session's id of each.
        self._checks: dict[str, ReplayCheck] = {}
        self._recorded: dict[int, str | None] = {}
        self.subagents: list[SubagentCheck] = []
        self._clients: list[Client] = []
        #: Set when the replayed session ends: its subagents' later steps are not compared.
        self.closing = False

    def bind(self, session_id: str, check: ReplayCheck, recorded_id: str | None = None) -> None:
        self._checks.setdefault(session_id, check)
        if recorded_id is not None or id(check) not in self._recorded:
            self._recorded[id(check)] = recorded_id

    def spawn(self, parent: Session, call_id: str | None, task: str) -> SpawnSetup:
        """The replayed session's (and its subagents') ``spawn_hook``."""
        check = self._checks.get(parent.id)
        if check is None:
            raise SubAgentError("replay: this session is not one the replay holds; it cannot spawn agents")
        step = check.model.current
        calls = {c.id: c.name for c in step.reply.tool_calls} if step is not None else {}
        recorded = (step.results or {}).get(call_id) if step is not None and call_id is not None else None
        found = None
        if self.agents is not None:
            found = self.agents.find(self._recorded.get(id(check)), call_id, recorded.content if recorded else None)
        if found is None:
            reason = self._missing(call_id)
            check.add(
                Difference(
                    DifferenceKind.NO_SUBAGENT_RECORD,
                    check.model.last_step,
                    f"{reason}: the spawn was refused and no model was called",
                    call_id,
                    calls.get(call_id or "", "spawn_agent") if call_id is not None else None,
                )
            )
            raise SubAgentError(f"replay: {reason}")
        if found.agent_id is not None and found.agent_id in parent.subagents:
            raise SubAgentError(f"replay: the recorded subagent's id {found.agent_id!r} is taken in this session")
        try:
            plan = plan_replay(found.turns, _skipped_text())
        except ReplayError as exc:
            check.add(
                Difference(
                    DifferenceKind.NO_SUBAGENT_RECORD,
                    check.model.last_step,
                    f"the record of the subagent (session {found.session_id}) cannot be replayed: {exc}",
                    call_id,
                    calls.get(call_id or ""),
                )
            )
            raise SubAgentError(f"replay: the subagent's record cannot be replayed: {exc}") from None
        found.used = True
        model = RecordedModel(self.provider)
        child = SubagentCheck(model, check, self, found, plan.inputs, check.model.last_step)
        self._recorded[id(child)] = found.session_id
        client = Client(providers={model.name: model})
        self._clients.append(client)
        self.subagents.append(child)
        check.report.subagents += 1
        return SpawnSetup(agent_id=found.agent_id, llm_client=client, controls=(child,))

    def _missing(self, call_id: str | None) -> str:
        if call_id is None:
            return "a subagent was spawned outside a tool call: no record can be matched to it"
        if self.agents is None:
            return (
                f"no record to answer the subagent spawned by call {call_id} from "
                "(the replay was given no store and session_id to look subagents up)"
            )
        problems = f"; {len(self.agents.problems)} record(s) could not be read: " if self.agents.problems else ""
        return (
            f"no record of a subagent spawned by call {call_id} in {self.agents.where} (its record is missing, "
            f"or the recorded session did not spawn one there){problems}{'; '.join(self.agents.problems[:3])}"
        )

    def finish(self, root: ReplayCheck, plan_steps: Sequence[StepPlan]) -> None:
        """After the replay: what the subagents' records hold that was not replayed."""
        for child in self.subagents:
            child.finish()
        if self.agents is None or root.done is not None:
            return
        sessions: list[tuple[ReplayCheck, Sequence[StepPlan]]] = [(root, plan_steps)]
        sessions += [(child, [s for i in child.inputs for s in i.steps]) for child in self.subagents]
        for check, steps in sessions:
            recorded = self._recorded.get(id(check))
            for agent in self.agents.by_parent.get(recorded or "", ()):
                if agent.used:
                    continue
                step = _spawning_step(steps, agent.spawn_call_id)
                if not check.in_range(step):
                    continue
                check.add(
                    Difference(
                        DifferenceKind.UNUSED_REPLIES,
                        step,
                        f"the record has subagent {agent.agent_id or '?'} (session {agent.session_id}"
                        + (f", spawned by call {agent.spawn_call_id}" if agent.spawn_call_id else "")
                        + "): it was not spawned now",
                    )
                )

    async def close(self) -> None:
        for client in self._clients:
            await client.close()


def _spawning_step(steps: Sequence[StepPlan], call_id: str | None) -> int | None:
    if call_id is None:
        return None
    for step in steps:
        if any(c.id == call_id for c in step.reply.tool_calls):
            return step.number
    return None


def _skipped_text() -> str:
    from ..loop import _SKIPPED_FOR_STEERING

    return _SKIPPED_FOR_STEERING

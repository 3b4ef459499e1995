"""What the parity and smoke suites share: the session harness and the helpers that know how each
profile edits files and how each provider marks a failed tool result.

:class:`Harness` builds a real Session with the real profile, a real LocalExecutionEnvironment in
tmp_path, and the real adapter talking HTTP to a ReplayServer on 127.0.0.1 whose answers come from
a :class:`~tests.support.wire.ScriptedModel`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ra.agent import Session, SessionConfig
from ra.agent.config import StopReason
from ra.agent.events import EventKind, SessionEvent
from ra.agent.loop import SubmitResult
from ra.env import LocalExecutionEnvironment
from ra.llm.retrying import RetryPolicy
from tests.support.replay import ReplayServer
from tests.support.wire import Call, ScriptedModel, ToolResultView, Wire, WireRequest, tool

E = EventKind


@dataclass
class Agent:
    """One session under test and everything observed about it."""

    session: Session
    env: LocalExecutionEnvironment
    model: ScriptedModel
    wire: Wire
    root: Path
    events: list[SessionEvent] = field(default_factory=list)

    async def submit(self, text: str) -> SubmitResult:
        """Submit ``text``; fail here (not at teardown) when the script broke or the input did
        not end in a natural completion."""
        result = await self.session.submit(text)
        self.model.raise_failures()
        assert result.stop_reason is StopReason.COMPLETED, (result.stop_reason, result.error)
        return result

    def of(self, kind: EventKind) -> list[SessionEvent]:
        return [e for e in self.events if e.kind is kind]

    def tool_ends(self, name: str | None = None) -> list[SessionEvent]:
        return [e for e in self.of(E.TOOL_CALL_END) if name is None or e["tool_name"] == name]

    def child_events(self, kind: EventKind) -> list[SessionEvent]:
        """Events of subagents (unwrapped from SUBAGENT_EVENT), of one kind."""
        return [e["event"] for e in self.of(E.SUBAGENT_EVENT) if e["kind"] == kind]


class Harness:
    def __init__(self, server: ReplayServer, wire: Wire, root: Path) -> None:
        self.server = server
        self.wire = wire
        self.root = root
        self.model = ScriptedModel(server, wire)
        self.client = wire.client(server.base_url)
        self.sessions: list[Session] = []

    def start(self, config: SessionConfig | None = None, **profile_options: Any) -> Agent:
        """A session on this wire's profile; retries off, so a scripting error fails at once."""
        config = config or SessionConfig()
        config.retry_policy = RetryPolicy(max_retries=0)
        env = LocalExecutionEnvironment(self.root)
        session = Session(self.wire.profile(**profile_options), env, llm_client=self.client, config=config)
        agent = Agent(session, env, self.model, self.wire, self.root)
        session.add_listener(agent.events.append)
        self.sessions.append(session)
        return agent

    async def close(self) -> None:
        for session in self.sessions:
            await session.close()
        await self.client.close()


def edit(wire: Wire, path: str, old: str, new: str) -> Call:
    """The profile's own edit format: a v4a patch for OpenAI, edit_file for Anthropic and Gemini."""
    if wire.name == "openai":
        lines = ["*** Begin Patch", f"*** Update File: {path}", "@@"]
        lines += ["-" + line for line in old.split("\n")]
        lines += ["+" + line for line in new.split("\n")]
        lines.append("*** End Patch")
        return tool("apply_patch", patch="\n".join(lines) + "\n")
    return tool("edit_file", file_path=path, old_string=old, new_string=new)


def edit_tool(wire: Wire) -> str:
    return "apply_patch" if wire.name == "openai" else "edit_file"


def assert_ok(view: ToolResultView) -> None:
    """The result reached the model as a success, in whichever provider shape it went."""
    assert view.is_error in (False, None), view
    raw = view.raw
    if "tool_use_id" in raw:  # Anthropic tool_result block
        assert not raw.get("is_error")
    elif "response" in raw:  # Gemini functionResponse
        assert "result" in raw["response"] and "error" not in raw["response"]
    else:  # OpenAI function_call_output: no flag on the wire, only the text
        assert raw["type"] == "function_call_output" and isinstance(raw["output"], str)


def assert_failed(wire: Wire, view: ToolResultView, *needles: str) -> None:
    """The error reached the model marked as an error the way this provider marks one."""
    if wire.error_flag_on_wire:
        assert view.is_error is True, view
    else:
        assert view.is_error is None  # OpenAI Responses: function_call_output has only the text
    if wire.name == "anthropic":
        assert view.raw["is_error"] is True
    elif wire.name == "gemini":
        assert "error" in view.raw["response"] and "result" not in view.raw["response"]
    else:
        assert view.raw["type"] == "function_call_output" and isinstance(view.raw["output"], str)
    for needle in needles:
        assert needle in view.output, (needle, view.output)


def results_by_call(request: WireRequest) -> list[tuple[str, ToolResultView]]:
    """Each new result with the name of the call it answers, checked to follow the call order."""
    assert request.new_results, "the request carries no tool results"
    calls = request.tool_calls[-len(request.new_results) :]
    pairs = []
    for (call_id, name, _), view in zip(calls, request.new_results, strict=True):
        assert view.call_id == call_id
        pairs.append((name, view))
    return pairs


def steer_on_first_tool_call(agent: Agent, message: str) -> None:
    """Call ``steer()`` once, while the next tool call of this session runs (from the event
    listener, so the message arrives during the tool round as it would from a user)."""
    fired: list[bool] = []

    def listener(event: SessionEvent) -> None:
        if event.kind is E.TOOL_CALL_START and not fired and event.session_id == agent.session.id:
            fired.append(True)
            agent.session.steer(message)

    agent.session.add_listener(listener, replay=False)


def output_lines(view: ToolResultView) -> list[str]:
    """read_file's lines without their ``NNN | `` prefix."""
    return [re.sub(r"^\s*\d+ \| ", "", line) for line in view.output.splitlines()]


def agent_id_of(view: ToolResultView) -> str:
    return str(json.loads(view.output)["agent_id"])

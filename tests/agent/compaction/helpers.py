"""Shared pieces for the compaction tests: a session in compact mode with a small window, a
scripted agent that works step by step, and checks over every request the model received."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ra.agent import Session, SessionConfig
from ra.agent.compaction import CompactionConfig
from ra.llm.testing import ScriptedAdapter, Step, StepLike, reply
from ra.llm.types import Request, Role, ToolCall

from ..support import make_session

SUMMARY = "## Goal\nthe user's task\n## Progress\n- Done: some steps"


def compact_session(
    script: list[StepLike] | None = None,
    *,
    window: int = 4000,
    compaction: CompactionConfig | None = None,
    default: StepLike | None = None,
    tools: Any = None,
    env: Any = None,
    streaming: bool = False,
    **config: Any,
) -> tuple[Session, ScriptedAdapter]:
    config.setdefault("max_tool_rounds_per_input", 0)
    config.setdefault("enable_loop_detection", False)
    cfg = SessionConfig(context_overflow="compact", compaction=compaction or CompactionConfig(), **config)
    return make_session(
        script,
        config=cfg,
        context_window=window,
        default=default,
        tools=tools,
        env=env,
        streaming=streaming,
        system_prompt="SYSTEM PROMPT",
    )


def is_summary_request(request: Request) -> bool:
    """The loop's requests always offer the test tools; the summariser's offer none."""
    return not request.tools


def agent(steps: int, *, size: int = 300, summary: str = SUMMARY, tool: str = "echo") -> Callable[[Request], Step]:
    """A model that calls ``tool`` ``steps`` times (each call's text ``size`` characters long),
    answers every summary request with ``summary``, then says "done"."""
    state = {"n": 0}

    def answer(request: Request) -> Step:
        if is_summary_request(request):
            return reply(summary)
        state["n"] += 1
        n = state["n"]
        if n > steps:
            return reply("done")
        return Step(tool_calls=[ToolCall(f"call_{n}", tool, {"text": f"step {n} " + "x" * size})])

    return answer


def request_chars(request: Request) -> int:
    total = 0
    for message in request.messages:
        for part in message.content:
            if part.text:
                total += len(part.text)
            elif part.tool_result is not None:
                total += len(str(part.tool_result.content))
            elif part.tool_call is not None:
                total += len(str(part.tool_call.arguments)) + len(part.tool_call.name)
    return total


def pairing_problems(request: Request) -> list[str]:
    """Every tool result must answer a call of the assistant message right before its run of
    results, and every call must be answered before the next message that is not a result."""
    problems: list[str] = []
    open_calls: set[str] = set()
    for index, message in enumerate(request.messages):
        if message.role == Role.TOOL:
            ids = {p.tool_result.tool_call_id for p in message.content if p.tool_result is not None}
            for call_id in ids:
                if call_id not in open_calls:
                    problems.append(f"message {index}: result for {call_id} without its call")
                open_calls.discard(call_id)
            continue
        if open_calls:
            problems.append(f"message {index}: calls {sorted(open_calls)} were never answered")
            open_calls = set()
        if message.role == Role.ASSISTANT:
            open_calls = {c.id for c in message.tool_calls}
    if open_calls:
        problems.append(f"calls {sorted(open_calls)} were never answered at the end")
    return problems


def user_texts(request: Request) -> list[str]:
    return [m.text for m in request.messages if m.role == Role.USER]

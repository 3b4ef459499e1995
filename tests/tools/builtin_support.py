"""Helpers for the built-in tool tests: run a tool through the real pipeline on a real env."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ra.env import LocalExecutionEnvironment
from ra.llm.types import ToolCall
from ra.tools.pipeline import ToolCallOutcome, ToolPipeline
from ra.tools.registry import RegisteredTool, ToolRegistry

_ids = itertools.count(1)


@dataclass
class Sink:
    deltas: list[tuple[str, str]] = field(default_factory=list)
    ended: list[ToolCallOutcome] = field(default_factory=list)

    def tool_start(self, call: ToolCall) -> None:
        pass

    def tool_output(self, call: ToolCall, stream: str, chunk: str) -> None:
        self.deltas.append((stream, chunk))

    def tool_end(self, outcome: ToolCallOutcome) -> None:
        self.ended.append(outcome)


class Runner:
    """One tool, one env, one pipeline: ``await runner(**arguments)`` -> ToolCallOutcome."""

    def __init__(self, tool: RegisteredTool, env: Any, config: Any = None) -> None:
        self.tool = tool
        self.env = env
        self.sink = Sink()
        self.pipeline = ToolPipeline(ToolRegistry([tool]), env, self.sink, config=config)

    async def __call__(self, **arguments: Any) -> ToolCallOutcome:
        return await self.pipeline.run(ToolCall(f"call_{next(_ids)}", self.tool.name, arguments))


def local_env(root: Path, **options: Any) -> LocalExecutionEnvironment:
    return LocalExecutionEnvironment(root, **options)

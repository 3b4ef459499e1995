"""Replay: a recorded session as a regression test (docs/agent.md, "Replay").

``await replay(turns, profile=..., execution_env=...)`` re-runs the tool calls of a recorded
session against today's code and working tree, answering the model calls with the recorded
replies, and returns a :class:`ReplayReport` listing every step whose tool result differs.
"""

from __future__ import annotations

from .check import ReplayCheck
from .model import RecordedModel, ReplayDiverged
from .plan import ReplayError, plan_replay
from .report import DEFAULT_IGNORES, MASK, AgentStep, Difference, DifferenceKind, ReplayReport
from .run import replay, replay_config

__all__ = [
    "DEFAULT_IGNORES",
    "MASK",
    "AgentStep",
    "Difference",
    "DifferenceKind",
    "RecordedModel",
    "ReplayCheck",
    "ReplayDiverged",
    "ReplayError",
    "ReplayReport",
    "plan_replay",
    "replay",
    "replay_config",
]

"""ra.agent: the Session, its loop, events, steering, limits and context strategies.

Names load lazily (PEP 562) so that ``import ra.agent`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "Session": ".session",
    "SessionConfig": ".config",
    "SessionState": ".config",
    "StopReason": ".config",
    "EventKind": ".events",
    "SessionEvent": ".events",
    "EventSubscription": ".event_hub",
    "SubmitResult": ".result",
    "History": ".history",
    "UserTurn": ".history",
    "AssistantTurn": ".history",
    "ToolResultsTurn": ".history",
    "SystemTurn": ".history",
    "SteeringTurn": ".history",
    "Turn": ".history",
    "ProviderProfile": ".profile",
    "GenericProfile": ".profile",
    "SessionError": ".errors",
    "SessionBusyError": ".errors",
    "SessionClosedError": ".errors",
    "ContextOverflowError": ".errors",
    "detect_loop": ".loop_detection",
    "prune_messages": ".context",
    "SubAgentManager": ".subagents",
    "SubAgentHandle": ".subagents",
    "SubAgentResult": ".subagents",
    # The decision seam: what a host needs to write a control.
    "Control": ".controls",
    "Controls": ".controls",
    "Allow": ".controls",
    "Deny": ".controls",
    "Stop": ".controls",
    "Admit": ".controls",
    "Continue": ".controls",
    "CancelCompaction": ".controls",
    "UseSummary": ".controls",
    "CompactionConfig": ".compaction",
    "CompactionTurn": ".history",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover
    from .compaction import CompactionConfig
    from .config import SessionConfig, SessionState, StopReason
    from .context import prune_messages
    from .controls import Admit, Allow, CancelCompaction, Continue, Control, Controls, Deny, Stop, UseSummary
    from .errors import ContextOverflowError, SessionBusyError, SessionClosedError, SessionError
    from .event_hub import EventSubscription
    from .events import EventKind, SessionEvent
    from .history import (
        AssistantTurn,
        CompactionTurn,
        History,
        SteeringTurn,
        SystemTurn,
        ToolResultsTurn,
        Turn,
        UserTurn,
    )
    from .loop_detection import detect_loop
    from .profile import GenericProfile, ProviderProfile
    from .result import SubmitResult
    from .session import Session
    from .subagents import SubAgentHandle, SubAgentManager, SubAgentResult

"""A task handed out and not yet back, and the result lines the coordinator writes for it itself."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from .runner import base_record
from .tasks import Task

__all__ = ["Attempt", "crashed_record", "interrupted_record"]


@dataclass(slots=True)
class Attempt:
    """A task the coordinator has handed out and not had back."""

    task: Task
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=time.monotonic)


def interrupted_record(attempt: Attempt, why: str) -> dict[str, Any]:
    result = base_record(attempt.task, attempt.session_id)
    result.update(status="interrupted", error=why, duration_s=round(time.monotonic() - attempt.started, 3))
    return result


def crashed_record(attempt: Attempt, error: str) -> dict[str, Any]:
    result = base_record(attempt.task, attempt.session_id)
    result.update(status="crashed", error=error, duration_s=round(time.monotonic() - attempt.started, 3))
    return result

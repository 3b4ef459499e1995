"""What a compaction is about to do: what ``before_compact`` controls are shown."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..history import Turn

__all__ = ["CompactionPlan", "Trigger"]

#: "auto": the window was nearly full; "overflow": the provider refused the context;
#: "manual": ``Session.compact()``.
Trigger = Literal["auto", "overflow", "manual"]


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """A summary compaction about to run. A control may cancel it or supply the summary
    (:class:`~ra.agent.controls.decisions.CancelCompaction`, :class:`~ra.agent.controls.decisions.UseSummary`)."""

    trigger: Trigger
    #: What the caller of ``Session.compact(instructions)`` asked the summary to take care of.
    instructions: str | None
    #: The context's estimated size now.
    tokens_before: int
    #: The turns the summary replaces (after the previous compaction's kept part began).
    turns: Sequence[Turn]
    #: Index in the history's turns of the first turn kept verbatim.
    first_kept: int
    #: The summary this one updates (the last compaction's), or None.
    previous_summary: str | None

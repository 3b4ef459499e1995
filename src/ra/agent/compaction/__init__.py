"""Compaction (``context_overflow="compact"``): a long session goes on past its context window.

One module per job: :mod:`.config` (the numbers), :mod:`.cheap` (clearing old tool outputs),
:mod:`.cut` (where to cut), :mod:`.files` (files read and changed), :mod:`.summary` (the
summariser), :mod:`.context` (the context rebuilt from the turns), :mod:`.compactor` (when and
how, step by step). The loop calls the compactor; docs/agent.md describes the behaviour.

``context_from_turns`` and ``CompactionConfig`` are imported eagerly (the session config and a
resumed session need them); the rest when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

from .config import Budgets, CompactionConfig
from .context import context_from_turns

_EXPORTS = {
    "CompactionConfig": ".config",
    "Budgets": ".config",
    "context_from_turns": ".context",
    "CompactionPlan": ".plan",
    "compact_if_due": ".compactor",
    "compact_after_overflow": ".compactor",
    "compact_now": ".compactor",
    "clear_tool_outputs": ".cheap",
    "find_cut": ".cut",
    "touched_files": ".files",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from .cheap import clear_tool_outputs
    from .compactor import compact_after_overflow, compact_if_due, compact_now
    from .cut import find_cut
    from .files import touched_files
    from .plan import CompactionPlan

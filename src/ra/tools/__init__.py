"""Developer tools the agent calls: file editing (apply_patch, edit_file), the registry, the
execution pipeline and output truncation.

Kept import-light on purpose: submodules are imported where they are used, and the names below
load lazily (PEP 562) on first access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    "AbortState": "registry",
    "RegisteredTool": "registry",
    "ToolContext": "registry",
    "ToolError": "registry",
    "ToolOutput": "registry",
    "ToolRegistry": "registry",
    "ToolCallOutcome": "pipeline",
    "ToolPipeline": "pipeline",
    "truncate_lines": "truncation",
    "truncate_output": "truncation",
    "truncate_tool_output": "truncation",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ra.tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover
    from .pipeline import ToolCallOutcome, ToolPipeline
    from .registry import AbortState, RegisteredTool, ToolContext, ToolError, ToolOutput, ToolRegistry
    from .truncation import truncate_lines, truncate_output, truncate_tool_output

"""Developer tools the agent calls: file editing (apply_patch, edit_file), the registry, the
execution pipeline, output truncation, and ``tool`` (a typed Python function as a tool).

Kept import-light on purpose: submodules are imported where they are used, and the names below
load lazily (PEP 562) on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

# name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    "AbortState": ".registry",
    "RegisteredTool": ".registry",
    "ToolContext": ".registry",
    "ToolError": ".registry",
    "ToolOutput": ".registry",
    "ToolRegistry": ".registry",
    "ToolCallOutcome": ".pipeline",
    "ToolPipeline": ".pipeline",
    "truncate_lines": ".truncation",
    "truncate_output": ".truncation",
    "truncate_tool_output": ".truncation",
    "FunctionTool": ".function",
    "ToolDefinitionError": ".function",
    "tool": ".function",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover
    from .function import FunctionTool, ToolDefinitionError, tool
    from .pipeline import ToolCallOutcome, ToolPipeline
    from .registry import AbortState, RegisteredTool, ToolContext, ToolError, ToolOutput, ToolRegistry
    from .truncation import truncate_lines, truncate_output, truncate_tool_output

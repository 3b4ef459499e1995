"""The built-in tools: one factory per tool, each returning a fresh ``RegisteredTool``.

Profiles pick the tools they offer (and their flavour: Claude Code's grep output modes, a 120 s
shell default) by calling these factories; a host can call them too, to build its own registry.
Every executor does its I/O through ``ctx.env``, the session's ``ExecutionEnvironment``.

Names load lazily (PEP 562), so ``import ra.tools.builtin`` costs nothing until a factory is used.
Other modules in this package (``submit``; ``plan`` for its parsing helpers) are imported by name where needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

# name -> submodule that defines it
_EXPORTS: dict[str, str] = {
    "read_file_tool": ".files",
    "write_file_tool": ".files",
    "edit_file_tool": ".files",
    "read_many_files_tool": ".batch",
    "apply_patch_tool": ".patch",
    "shell_tool": ".shell",
    "shell_command_tool": ".shell",
    "grep_tool": ".search",
    "grep_files_tool": ".search",
    "glob_tool": ".search",
    "list_dir_tool": ".listing",
    "update_plan_tool": ".plan",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover
    from .batch import read_many_files_tool
    from .files import edit_file_tool, read_file_tool, write_file_tool
    from .listing import list_dir_tool
    from .patch import apply_patch_tool
    from .plan import update_plan_tool
    from .search import glob_tool, grep_files_tool, grep_tool
    from .shell import shell_command_tool, shell_tool

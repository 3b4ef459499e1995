"""apply_patch (coding-agent-loop-spec 3.4, Appendix A; ra-spec): the codex-style patch tool.

The engine is :mod:`ra.tools.apply_patch` (v4a ``*** Begin Patch`` envelopes and unified diffs,
all or nothing). The parameter is ``patch``, as the spec names it; codex's function tool calls the
same argument ``input``, and models trained on codex send that, so ``input`` is accepted too.
"""

from __future__ import annotations

from typing import Any

from ra.tools.registry import RegisteredTool, ToolContext, ToolEffect, ToolOutput

from ._common import AliasedTool, define, display_path, error

__all__ = ["apply_patch_tool"]

_V4A_DESCRIPTION = (
    "Create, update, rename or delete files with one patch; it applies completely or not at all. "
    "Format:\n"
    "*** Begin Patch\n"
    "*** Add File: path/new.py\n"
    "+every line of the new file, each prefixed with +\n"
    "*** Update File: path/old.py\n"
    "*** Move to: path/renamed.py   (optional, to rename)\n"
    "@@ class or def line near the change (optional hint)\n"
    " unchanged line (space prefix)\n"
    "-line to remove\n"
    "+line to add\n"
    "*** Delete File: path/gone.py\n"
    "*** End Patch\n"
    "Give about three unchanged lines around each change so it can be located. Paths are "
    "relative to the working directory. A unified diff (as from `git diff`) is accepted too."
)

_UNIFIED_DESCRIPTION = (
    "Change files by applying a unified diff (the format of `git diff` / `diff -u`: '--- a/path', "
    "'+++ b/path', '@@' hunks with ' ', '-' and '+' lines; /dev/null creates or deletes a file). "
    "The whole patch applies or nothing changes. Paths are relative to the working directory."
)


def apply_patch_tool(*, unified_diff: bool = False) -> RegisteredTool:
    """``apply_patch(patch)``. ``unified_diff=True`` describes the unified-diff format (ra-spec)
    instead of v4a (codex); both formats are accepted either way."""
    definition = define(
        "apply_patch",
        _UNIFIED_DESCRIPTION if unified_diff else _V4A_DESCRIPTION,
        {"patch": {"type": "string", "description": "The full patch text."}},
        ["patch"],
    )

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        from ra.tools.apply_patch import PatchError, apply_patch

        text = arguments.get("patch")
        if text is None:
            text = arguments.get("input")
        if not isinstance(text, str) or not text.strip():
            return error("The patch is empty; send the full patch text in the 'patch' argument.")
        try:
            result = await apply_patch(text, ctx.env)
        except PatchError as exc:
            return error(str(exc))
        from ra.tools.file_diff import change_record

        changes = [
            {
                "op": change.letter,
                "path": change.path,
                "move_to": change.move_to,
                "added": change.added,
                "removed": change.removed,
                # For hosts to show what changed (ra's terminal diff); see ra.tools.file_diff.
                "diff": change_record(
                    display_path(ctx, change.final_path),
                    change.before,
                    change.after,
                    old_path=display_path(ctx, change.path) if change.move_to else None,
                ),
            }
            for change in result.changes
        ]
        return ToolOutput(result.summary, metadata={"format": result.format, "changes": changes})

    return AliasedTool(definition, execute, aliases={"input": "patch"}, effect=ToolEffect.EDIT)

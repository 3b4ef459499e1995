"""list_dir (codex / ra-spec): a bounded, paginated, indented tree of one directory.

Entries are listed depth first with each directory's children under it, two spaces of indent per
level, directories marked with a trailing ``/``. ``offset`` (1-based) and ``limit`` page through
the entries, so a large directory costs the model one page at a time; the last line says when more
entries exist and which offset shows the next page.
"""

from __future__ import annotations

from typing import Any

from ra.tools.registry import RegisteredTool, ToolContext, ToolEffect, ToolOutput

from ._common import define, display_path, error, integer, optional_int, os_error_message

__all__ = ["list_dir_tool"]

DEFAULT_LIMIT = 25
DEFAULT_DEPTH = 2
#: Deeper listings get large fast; the model can list a subdirectory instead.
MAX_DEPTH = 10


def list_dir_tool(*, default_limit: int = DEFAULT_LIMIT, default_depth: int = DEFAULT_DEPTH) -> RegisteredTool:
    """``list_dir(dir_path, offset?, limit?, depth?)``."""
    definition = define(
        "list_dir",
        "List the entries of a directory as an indented tree (directories end with '/'). "
        f"Shows {default_limit} entries per call from offset (1-based) and descends depth levels "
        f"(default {default_depth}); .git directories are skipped.",
        {
            "dir_path": {
                "type": "string",
                "description": "Directory to list; absolute, or relative to the working directory.",
            },
            "offset": integer("1-based number of the first entry to show (default 1).", minimum=1),
            "limit": integer(f"Maximum number of entries to show (default {default_limit}).", minimum=1),
            "depth": integer(
                f"How many directory levels to descend (default {default_depth}, 1 = only direct children).",
                minimum=1,
                maximum=MAX_DEPTH,
            ),
        },
        ["dir_path"],
    )

    async def execute(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput | str:
        path = arguments["dir_path"]
        offset = optional_int(arguments, "offset") or 1
        limit = optional_int(arguments, "limit") or default_limit
        depth = optional_int(arguments, "depth") or default_depth
        shown = display_path(ctx, path)
        try:
            entries = await ctx.env.list_directory(path, depth)
        except NotADirectoryError:
            return error(f"{shown} is not a directory. Use read_file to read a file.")
        except FileNotFoundError:
            return error(f"Directory not found: {shown}")
        except OSError as exc:
            return error(os_error_message(exc, shown))
        except ValueError as exc:
            return error(str(exc))
        total = len(entries)
        header = f"Absolute path: {shown}"
        if total == 0:
            return f"{header}\n(empty directory)"
        if offset > total:
            return error(f"offset {offset} is past the last entry: {shown} has {total} entries at depth {depth}.")
        page = entries[offset - 1 : offset - 1 + limit]
        lines = [header]
        for entry in page:
            level = entry.name.count("/")
            leaf = entry.name.rsplit("/", 1)[-1]
            lines.append("  " * level + leaf + ("/" if entry.is_dir else ""))
        end = offset - 1 + len(page)
        if end < total:
            lines.append(
                f"More than {limit} entries found: showing {offset}-{end} of {total}; "
                f"call again with offset={end + 1} to see more."
            )
        return ToolOutput("\n".join(lines), metadata={"path": shown, "total": total, "shown": len(page)})

    return RegisteredTool(definition, execute, effect=ToolEffect.READ)

"""Claude Code's names for ra's built-in tools, so hook scripts and permission rules written for
Claude Code work on ra unchanged.

ra's built-in tools take the same arguments as their Claude Code counterparts where one exists
(``shell``: ``command``; ``edit_file``: ``file_path``, ``old_string``, ``new_string``;
``write_file``: ``file_path``, ``content``; ``read_file``: ``file_path``), so a hook that checks
``tool_name == "Bash"`` and reads ``tool_input.command`` only needs the name. Matchers and rules
accept either name; command hooks receive the Claude Code name in ``tool_name`` (and ra's own in
``ra_tool_name``).
"""

from __future__ import annotations

__all__ = ["CLAUDE_TOOL_NAMES", "claude_name", "names_of"]

#: ra tool name -> Claude Code tool name.
CLAUDE_TOOL_NAMES: dict[str, str] = {
    "shell": "Bash",
    "shell_command": "Bash",
    "read_file": "Read",
    "write_file": "Write",
    "edit_file": "Edit",
    "grep": "Grep",
    "grep_files": "Grep",
    "glob": "Glob",
    "list_dir": "LS",
    "web_fetch": "WebFetch",
    "web_open": "WebFetch",
    "web_search": "WebSearch",
    "spawn_agent": "Task",
}


def claude_name(tool_name: str) -> str:
    """Claude Code's name for ``tool_name``, or the name itself when there is no counterpart."""
    return CLAUDE_TOOL_NAMES.get(tool_name, tool_name)


def names_of(tool_name: str) -> tuple[str, ...]:
    """The names a matcher or rule may use for ``tool_name``: ra's, then Claude Code's."""
    other = CLAUDE_TOOL_NAMES.get(tool_name)
    return (tool_name,) if other is None else (tool_name, other)

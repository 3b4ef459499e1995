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

__all__ = ["CLAUDE_TOOL_NAMES", "RULE_ALIASES", "claude_name", "names_of", "rule_names_of"]

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


#: The tools that write files (``ToolEffect.EDIT`` with paths): Claude Code's ``Edit`` rules apply
#: to every tool that edits files, so ``Edit(src/**)`` covers them all, on every profile.
_FILE_WRITERS = frozenset({"edit_file", "write_file", "apply_patch"})
#: The tools that read files (``ToolEffect.READ`` with paths): ``Read(...)`` covers them all.
_FILE_READERS = frozenset({"read_file", "read_many_files", "grep", "grep_files", "glob", "list_dir"})

#: Claude Code's tool names as *rule* names -> the ra tools they cover, by what the tools do.
#: Wider than :data:`CLAUDE_TOOL_NAMES` (one name per tool, what hooks are told): a rule about
#: ``Edit`` must hold for ``write_file`` and ``apply_patch`` too, or it would be a rule that
#: ``apply_patch`` walks around.
RULE_ALIASES: dict[str, frozenset[str]] = {
    "Bash": frozenset({"shell", "shell_command"}),
    "Read": _FILE_READERS,
    "Edit": _FILE_WRITERS,
    "Write": _FILE_WRITERS,
    "MultiEdit": _FILE_WRITERS,
    "NotebookEdit": _FILE_WRITERS,
    "Grep": frozenset({"grep", "grep_files"}),
    "Glob": frozenset({"glob"}),
    "LS": frozenset({"list_dir"}),
    "WebFetch": frozenset({"web_fetch", "web_open", "web_find"}),
    "WebSearch": frozenset({"web_search"}),
    "Task": frozenset({"spawn_agent"}),
    "Agent": frozenset({"spawn_agent"}),
}
_ALIASES_OF: dict[str, tuple[str, ...]] = {}
for _alias, _tools in RULE_ALIASES.items():
    for _tool in _tools:
        _ALIASES_OF[_tool] = (*_ALIASES_OF.get(_tool, ()), _alias)


def rule_names_of(tool_name: str) -> tuple[str, ...]:
    """The names a permission rule may use for ``tool_name``: ra's, then every Claude Code name
    that covers it (``write_file``: ``Edit``, ``Write``, ``MultiEdit``, ``NotebookEdit``)."""
    aliases = _ALIASES_OF.get(tool_name)
    return (tool_name,) if aliases is None else (tool_name, *aliases)

"""Permissions: which tool calls run, decided in one documented order, with every denial recorded.

For each tool call, before it runs (the seam's ``before_tool``):

1. **PreToolUse hooks** (:mod:`ra.agent.hooks`). A ``deny`` ends it. An ``allow`` skips the
   mode, the allow rules and the prompt - never a deny or ask rule. An ``ask`` always asks.
2. **Deny rules** (``SessionConfig.disallowed_tools``): a match denies, in every mode.
3. **Ask rules** (``ask_tools``): a match asks, in every mode but ``dont_ask`` (which denies).
4. **The mode** (``permission_mode``), by what the tool declares it does (``ToolEffect``; a tool
   that declares nothing counts as ``execute``):

   ============== ============================== ==========================================
   mode           allows                         otherwise
   ============== ============================== ==========================================
   ``default``    read, network, none            edits and commands: on to the allow rules
   ``accept_edits`` + edits                      commands: on to the allow rules
   ``plan``       read, network, none            edits and commands are **denied**
   ``bypass``     everything                     -
   ``dont_ask``   read, network, none            on to the allow rules; what would be asked is denied
   ============== ============================== ==========================================

5. **Allow rules** (``allowed_tools``): a match allows.
6. **Ask**: the host's ``can_use_tool(tool_name, tool_input, context)`` decides - allow (maybe
   with rewritten input, maybe "always" for the rest of the session) or deny (with the message
   the model reads, and optionally ``interrupt`` to end the input). Without a callback the call
   is allowed (the library's default, so a session without any policy behaves as before), except
   in ``dont_ask`` mode, where it is denied, and in ``plan`` mode, where an edit or a command is
   denied (an ask rule does not open plan mode when nobody can be asked).

Every denial is an error result the model reads (it can try something else), a
``PERMISSION_DENIED`` event, and an entry in ``Session.permission_denials``.

**Rules** are ``Tool`` or ``Tool(spec)``. ``Tool`` is a tool name - ra's or Claude Code's
(``Bash``, ``Edit``, ...; see :mod:`ra.agent.permissions.tool_names`) - or a glob over names
(``mcp__github__*``). The spec depends on what the tool acts on:

* commands (tools with a ``command`` argument): ``git diff:*`` matches commands that start with
  the words ``git diff``; a spec with ``*`` is a glob over the whole command; anything else must
  match exactly. A compound command (``a && b``, ``a; b``, ``a | b``) is split: an allow rule must
  match every part, a deny or ask rule any part. A command with ``$(...)``, backticks or process
  substitution is never allowed by a rule (it is asked), since what runs cannot be read off it.
* files (``file_path``, ``path``, ``dir_path`` arguments, and every file an ``apply_patch`` patch
  names): a glob - ``*`` within a directory, ``**`` across directories - relative to the working
  directory (``src/**``), absolute when it starts with ``/``, or a bare name such as ``*.py``,
  which matches at any depth. A path outside the working directory matches only absolute specs.
* web tools (``url``): ``domain:example.com`` matches that host and its subdomains.

A bare deny rule (``disallowed_tools=("shell",)``) also takes the tool out of the model's list.
In ``plan`` mode the model's list holds only the tools that change nothing, and the system
prompt says it is in plan mode and that its answer is the plan (:mod:`.plan`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "CanUseTool": ".check",
    "PermissionAllow": ".check",
    "PermissionContext": ".check",
    "PermissionDenial": ".check",
    "PermissionDeny": ".check",
    "Permissions": ".check",
    "PERMISSION_MODES": ".rules",
    "CallFacts": ".rules",
    "PermissionMode": ".rules",
    "Rule": ".rules",
    "normalize_mode": ".rules",
    "parse_rules": ".rules",
    "read_only_tools": ".rules",
    "rules_of": ".rules",
    "split_command": ".rules",
    "visible_tools": ".rules",
    "CLAUDE_TOOL_NAMES": ".tool_names",
    "claude_name": ".tool_names",
    "names_of": ".tool_names",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from .check import (
        CanUseTool,
        PermissionAllow,
        PermissionContext,
        PermissionDenial,
        PermissionDeny,
        Permissions,
    )
    from .rules import (
        PERMISSION_MODES,
        CallFacts,
        PermissionMode,
        Rule,
        normalize_mode,
        parse_rules,
        read_only_tools,
        rules_of,
        split_command,
        visible_tools,
    )
    from .tool_names import CLAUDE_TOOL_NAMES, claude_name, names_of

"""Permissions: which tool calls run, decided in one documented order, with every denial recorded.

For each tool call, before it runs (the seam's ``before_tool``):

1. **PreToolUse hooks** (:mod:`ra.agent.hooks`). A ``deny`` ends it. An ``allow`` skips the
   mode, the allow rules and the prompt - never a deny or ask rule. An ``ask`` always asks.
2. **Deny rules** (``SessionConfig.disallowed_tools``): a match denies, in every mode. A deny
   rule that cannot tell whether it names the call (a command ra cannot read) makes it an ask.
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
   the model reads, and optionally ``interrupt`` to end the input). **Without a callback the call
   is denied** (source ``no_prompt``): where ra cannot ask, it does not run the call. ``dont_ask``
   mode denies before asking; ``plan`` mode denies an edit or a command outright.

A session that names no mode (``SessionConfig.permission_mode=None``) runs in ``bypass`` unless
something asks for checks - allow or ask rules, or a ``can_use_tool`` callback - and then in
``default`` (:func:`~ra.agent.permissions.rules.effective_mode`).

Every denial is an error result the model reads (it can try something else), a
``PERMISSION_DENIED`` event, and an entry in ``Session.permission_denials``.

**Rules** are ``Tool`` or ``Tool(spec)``. ``Tool`` is a tool name of the profile, a Claude Code
name that covers every tool doing the same thing on every profile (``Bash``: every command tool;
``Edit``/``Write``: every file-writing tool; ``Read``: every file-reading tool; see
:data:`~ra.agent.permissions.tool_names.RULE_ALIASES`), ``mcp__server`` (every tool of that
server), or a glob over names (``mcp__github__*``). A rule naming no tool of the session would
match nothing: :func:`~ra.agent.permissions.rules.validate_rules` says so, the ``ra`` command
refuses it as a flag, and a session warns once. The spec depends on what the tool acts on:

* commands: ``git diff:*`` (or ``git diff *``) matches commands that are or start with the words
  ``git diff``; a spec with ``*`` is a wildcard over the whole command; anything else must match
  exactly. The line is read as the shell reads it (:mod:`ra.agent.permissions.shell_words`): a
  compound command is split (an allow rule must match every part, a deny or ask rule any part);
  an allow rule does not match a command with leading assignments or an output redirection
  unless it names them, nor one whose command word only the shell works out, nor a line with a
  substitution; deny and ask rules see through assignments, redirections and wrappers (``sudo``,
  ``env``, ``bash -c``, ...), and ask when they cannot tell.
* files (``file_path``, ``path``, ``dir_path``, ``paths``, and every file an ``apply_patch``
  patch touches, as the patch parser reads it): Claude Code's gitignore-style forms - ``src/**``
  or ``./src/**`` relative to the working directory, ``//abs`` absolute, ``~/p`` under home,
  ``/p`` from the project root (deny and ask rules also read it as the absolute ``/p``, its old
  meaning), a bare name (``*.env``) at any depth. Each path is also resolved through symlinks: a
  deny or ask rule matches the given or the resolved path, an allow rule the resolved one.
* web tools (``url``; every URL in ``web_fetch``'s ``prompt``): ``domain:example.com`` matches
  that host and its subdomains; the tools follow redirects on the same host only.

A bare deny rule (``disallowed_tools=("Bash",)``) also takes the tools out of the model's list.
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
    "anchor_rule": ".rules",
    "effective_mode": ".rules",
    "validate_rules": ".rules",
    "RULE_ALIASES": ".tool_names",
    "rule_names_of": ".tool_names",
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
        anchor_rule,
        effective_mode,
        normalize_mode,
        parse_rules,
        read_only_tools,
        rules_of,
        split_command,
        validate_rules,
        visible_tools,
    )
    from .tool_names import CLAUDE_TOOL_NAMES, RULE_ALIASES, claude_name, names_of, rule_names_of

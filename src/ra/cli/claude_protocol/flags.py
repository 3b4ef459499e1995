"""The flags of Claude Code's command line that ``ra`` did not have, so the Claude Agent SDK's
transport can start ``ra`` in place of ``claude``.

Three kinds (``docs/claude-sdk.md`` has the table):

* spellings of ra's own flags: ``--allowedTools`` / ``--disallowedTools`` (``--allowed-tools``),
  ``--max-turns`` (``--max-steps``), ``--effort`` (``--reasoning-effort``, where the value is one
  ra has) - added where those flags are defined, as aliases;
* flags with an effect here: ``--input-format stream-json``, ``--permission-prompt-tool stdio``,
  ``--permission-prompts none`` (nobody is asked: what would be asked is denied),
  ``--system-prompt-file``, ``--tools`` (the built-in tools offered; what it leaves out becomes a
  bare deny rule, so it is neither offered nor run), ``--add-dir`` (ra does not confine its file tools to the working
  directory, so every directory is already reachable; the directory must exist);
* flags ra accepts and does not act on (:data:`IGNORED`): each one used is named in one warning
  on stderr (:func:`ignored_warnings`), never an error, so a program that sets the option still
  runs;
* flags ra refuses (:data:`REFUSED`): an organization's managed settings, a main-thread agent,
  another checkout's project files - each restricts or changes what a session may do, and running
  without it would quietly do something else (often: allow more).

The TypeScript SDK passes every flag in the ``--flag=value`` form, which argparse reads as well.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["IGNORED", "REFUSED", "add_arguments", "ignored_warnings", "offered_tools", "withheld_tools"]

#: Flags ra accepts and ignores -> why (the warning says it). True: the flag takes no value.
IGNORED: dict[str, tuple[bool, str]] = {
    "--betas": (False, "Anthropic beta headers are not sent"),
    "--task-budget": (False, "no task budget; --max-budget-usd bounds the spend"),
    "--include-hook-events": (True, "hook progress messages are not written"),
    "--resume-drops-turn": (False, "no turn is dropped on resume"),
    "--session-mirror": (True, "transcripts are not mirrored to the SDK's session store"),
    "--setting-sources": (False, "ra reads its own config file and the --settings file"),
    "--plugin-dir": (False, "Claude Code plugins are not loaded"),
    "--thinking": (False, "reasoning is set with --reasoning-effort"),
    "--max-thinking-tokens": (False, "reasoning is set with --reasoning-effort"),
    "--thinking-display": (False, "reasoning is shown as the provider returns it"),
    "--json-schema": (False, "no structured output; the result is the model's text"),
    # Passed by the TypeScript SDK only:
    "--debug-file": (False, "ra writes no debug file; --debug shows log messages on stderr"),
    "--channels": (False, "Claude Code channels are not supported"),
    "--plugin-dir-no-mcp": (False, "Claude Code plugins are not loaded"),
    "--initialize-fields": (
        False,
        "settings and disallowed tools sent in the initialize request are refused there; send them as flags "
        "(the SDK's settingsDelivery / disallowedToolsDelivery 'argv', the default)",
    ),
}

#: Flags ra refuses (UsageError): honouring them is not possible here, and ignoring them would
#: drop a restriction the program relies on.
REFUSED: dict[str, tuple[bool, str]] = {
    "--agent": (
        False,
        "ra cannot run the main thread as a named agent, so the agent's prompt, tool limits and model would "
        "not apply; give its prompt as the system prompt and its limits as --disallowedTools",
    ),
    "--project-config-root": (
        False,
        "ra reads the project's files (AGENTS.md, a trusted .mcp.json) from the working directory and cannot "
        "take them from another checkout",
    ),
    "--managed-settings": (
        False,
        "ra cannot enforce an organization's managed settings; put the rules in --settings or ra's config file",
    ),
    "--managed-settings-in-initialize": (
        True,
        "ra cannot enforce an organization's managed settings; put the rules in --settings or ra's config file",
    ),
}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


class _Refused(argparse.Action):
    """Remembers that the flag was given: :func:`apply` refuses the run."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: Any = None) -> None:
        seen = getattr(namespace, "claude_refused", None) or []
        if self.option_strings[0] not in seen:
            seen.append(self.option_strings[0])
        namespace.claude_refused = seen


class _Ignored(argparse.Action):
    """Remembers that the flag was given (its value is not used)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: Any = None) -> None:
        seen = getattr(namespace, "claude_ignored", None) or []
        if self.option_strings[0] not in seen:
            seen.append(self.option_strings[0])
        namespace.claude_ignored = seen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("Claude Code's command line (the Claude Agent SDK runs ra with these)")
    g.add_argument(
        "--input-format",
        choices=("text", "stream-json"),
        default="text",
        help="stream-json: read user messages and control requests as JSON lines on stdin, as `claude "
        "--input-format stream-json` does (needs --output-format stream-json): how the Claude Agent SDK runs "
        "ra when its cli_path names ra",
    )
    g.add_argument(
        "--permission-prompt-tool",
        metavar="stdio",
        help="stdio: ask the SDK host (can_use_tool) about the calls ra would ask about",
    )
    g.add_argument(
        "--permission-prompts",
        choices=("host", "none"),
        help="none: nobody answers permission questions - what would be asked is denied, the SDK's "
        "canUseTool is never called (host, the default: --permission-prompt-tool decides)",
    )
    g.add_argument("--system-prompt-file", metavar="FILE", help="the system prompt, read from FILE")
    g.add_argument(
        "--tools",
        dest="claude_tools",
        metavar="NAMES",
        help="the built-in tools the model is offered, by Claude's names or ra's (Bash,Read,Edit or "
        'shell_command,read_file): "" for none, "default" for the profile\'s; MCP tools are not affected',
    )
    g.add_argument(
        "--add-dir",
        action="append",
        metavar="DIR",
        help="a directory the agent may use (DIR must exist): ra's file tools reach it already; under the "
        "workspace-write sandbox it becomes writable too",
    )
    # Claude's spellings of ra's flags: the same destination, so errors name ra's flag.
    g.add_argument("--allowedTools", dest="allowed_tools", action="append", help=argparse.SUPPRESS)
    g.add_argument("--disallowedTools", dest="disallowed_tools", action="append", help=argparse.SUPPRESS)
    g.add_argument("--max-turns", dest="max_steps", type=_positive_int, help=argparse.SUPPRESS)
    # What these two ask for is what ra does anyway: bypassPermissions needs no opt-in, and with
    # --input-format stream-json ra waits for the SDK's initialize before it opens the session.
    g.add_argument("--allow-dangerously-skip-permissions", action="store_true", help=argparse.SUPPRESS)
    g.add_argument("--await-initialize", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(claude_ignored=[], claude_refused=[])
    for flag, (bare, why) in IGNORED.items():
        g.add_argument(flag, action=_Ignored, nargs=0 if bare else None, help=f"accepted and ignored: {why}")
    for flag, (bare, why) in REFUSED.items():
        g.add_argument(flag, action=_Refused, nargs=0 if bare else None, help=f"refused: {why}")


def offered_tools(value: str | None) -> frozenset[str] | None:
    """``--tools``: the names given (Claude's or ra's), or None for the profile's own set."""
    if value is None or value.strip() == "default":
        return None
    return frozenset(name for name in value.replace(",", " ").split() if name)


def withheld_tools(tool_names: list[str], offered: frozenset[str]) -> list[str]:
    """The profile's tools that ``--tools`` leaves out: every tool but MCP servers' ones whose
    own name and Claude's names for it (:func:`~ra.agent.permissions.tool_names.rule_names_of`:
    ``Edit`` covers every tool that writes files, as it does for a rule) are all missing from
    ``offered``. A name that is no tool offers nothing - the set only ever gets smaller."""
    from ra.agent.permissions.tool_names import rule_names_of

    return [
        name
        for name in tool_names
        if not name.startswith("mcp__") and not any(alias in offered for alias in rule_names_of(name))
    ]


def ignored_warnings(args: argparse.Namespace) -> list[str]:
    """One warning per ignored flag that was given."""
    return [
        f"warning: {flag} is accepted and ignored: {IGNORED[flag][1]}" for flag in getattr(args, "claude_ignored", [])
    ]


def apply(args: argparse.Namespace, cwd: str | None, *, stream_input: bool) -> tuple[list[str], list[str]]:
    """Fold Claude's flags into ra's (in ``args``); returns the warnings for stderr and the names
    of the SDK's in-process MCP servers (taken out of ``--mcp-config``). UsageError for a flag that
    cannot work here."""
    import json
    import os

    from ..config import REASONING_EFFORTS
    from ..errors import UsageError

    refused = getattr(args, "claude_refused", None) or []
    if refused:
        raise UsageError("; ".join(f"{flag} is not supported: {REFUSED[flag][1]}" for flag in refused))
    notices = ignored_warnings(args)
    if args.system_prompt_file is not None:
        if args.system_prompt:
            raise UsageError("--system-prompt and --system-prompt-file: give one")
        path = os.path.join(cwd or ".", os.path.expanduser(args.system_prompt_file))
        try:
            with open(path, encoding="utf-8-sig") as f:
                args.system_prompt = f.read()
        except OSError as exc:
            raise UsageError(f"--system-prompt-file {args.system_prompt_file}: {exc.strerror or exc}") from None
    if args.system_prompt is not None and not args.system_prompt.strip():
        args.system_prompt = None  # Claude's SDK sends "" for "no system prompt option": the profile's own
    for directory in args.add_dir or ():
        if not os.path.isdir(os.path.join(cwd or ".", os.path.expanduser(directory))):
            raise UsageError(f"--add-dir {directory}: no such directory")
    if args.effort is not None:
        if args.effort in REASONING_EFFORTS and args.reasoning_effort is None:
            args.reasoning_effort = args.effort
        elif args.effort not in REASONING_EFFORTS:
            notices.append(
                f"warning: --effort {args.effort} is ignored: ra's levels are {', '.join(REASONING_EFFORTS)}"
            )
    tool = args.permission_prompt_tool
    if getattr(args, "permission_prompts", None) == "none":
        tool = args.permission_prompt_tool = None  # nobody to ask: what would be asked is denied
    if tool is not None and tool != "stdio":
        notices.append(
            f"warning: --permission-prompt-tool {tool} is ignored: only 'stdio' (the SDK's can_use_tool) is supported"
        )
        args.permission_prompt_tool = None
    elif tool == "stdio" and not stream_input:
        raise UsageError("--permission-prompt-tool stdio needs --input-format stream-json (the SDK answers on stdin)")
    sdk_servers: list[str] = []
    configs = list(args.mcp_config or ())
    for i, value in enumerate(configs):
        if not value.lstrip().startswith("{"):
            continue
        try:
            data = json.loads(value)
        except ValueError:
            continue  # reported by the MCP configuration, with its place
        servers = data.get("mcpServers") if isinstance(data, dict) else None
        if not isinstance(servers, dict):
            continue
        found = [name for name, entry in servers.items() if isinstance(entry, dict) and entry.get("type") == "sdk"]
        if not found:
            continue
        if not stream_input:
            raise UsageError(
                f"--mcp-config: server {found[0]!r} is an SDK server (type 'sdk'): it needs --input-format stream-json"
            )
        sdk_servers.extend(found)
        configs[i] = json.dumps({**data, "mcpServers": {k: v for k, v in servers.items() if k not in found}})
    args.mcp_config = configs or None
    return notices, sdk_servers

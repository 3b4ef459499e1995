"""``ra acp``: ra as an Agent Client Protocol agent on stdin/stdout, for editors.

The editor starts ``ra acp`` and speaks JSON-RPC on its stdio; stdout belongs to the protocol,
so every remark goes to stderr (editors show it in their agent log). Provider, model, keys,
rules, hooks and MCP servers come from the same flags, environment and config file as any ``ra``
run (:mod:`ra.cli.run_settings`, :func:`ra.cli.runner.prepare`). docs/editors.md has the editor
entries.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from .errors import UsageError

__all__ = ["build_acp_parser", "run_acp"]

_EPILOG = """\
ra acp speaks the Agent Client Protocol (https://agentclientprotocol.com) on stdin and stdout.
An editor starts it; it is not meant to be run by hand. Zed (settings.json; docs/editors.md has
the JetBrains, Neovim and Emacs entries and where each comes from):

  {
    "agent_servers": {
      "ra": {
        "type": "custom",
        "command": "ra",
        "args": ["acp", "--model", "gpt-4.1-mini"],
        "env": { "OPENAI_API_KEY": "sk-..." }
      }
    }
  }

Each editor session is a ra session, recorded like any other (`ra sessions` lists them; the editor
can list and load them too). In the editor, the default mode asks before edits and commands
(modes: Ask, Accept edits, Plan, Don't ask, Bypass permissions; a --permission-mode or the config
file's permission_mode sets the starting one). When the editor offers its file system and
terminal, files are read and written through it (unsaved buffers included) and commands run in
its terminal.

Provider, model and keys: as for `ra` (see `ra --help`): flags here, RA_* and the providers'
variables in the editor's environment for the agent, and the config file.
Needs the acp extra: pip install 'ra-agent[acp]'.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise UsageError(message)


def build_acp_parser() -> argparse.ArgumentParser:
    from .argtypes import positive_float, positive_int
    from .policy import add_arguments as add_policy_arguments
    from .run_settings import SANDBOX_HELP, add_mcp_arguments, add_model_arguments

    p = _Parser(
        prog="ra acp",
        usage="ra acp [OPTIONS]",
        description="Run ra as an Agent Client Protocol agent for an editor (Zed, JetBrains, Neovim, Emacs).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model_arguments(p)
    g = p.add_argument_group("run")
    g.add_argument("--max-steps", type=positive_int, metavar="N", help="model steps per prompt (max_turn_requests)")
    g.add_argument("--time-limit", type=positive_float, metavar="SECONDS", help="time per prompt")
    g.add_argument(
        "--web", action=argparse.BooleanOptionalAction, default=None, help="enable web_search, web_open, web_find"
    )
    g.add_argument("--system-prompt", metavar="TEXT", help="base instructions in place of the profile's own")
    g.add_argument("--append-system-prompt", metavar="TEXT", help="instructions added at the end of the system prompt")
    g.add_argument(
        "--sandbox",
        metavar="MODE",
        help=SANDBOX_HELP + "; under a sandbox, files and commands stay in ra (not the editor's buffers and terminal)",
    )
    add_policy_arguments(p)
    add_mcp_arguments(p)
    g = p.add_argument_group("sessions")
    g.add_argument(
        "--no-session-persistence",
        action="store_true",
        help="record nothing (the editor then cannot list, load or fork sessions)",
    )
    g.add_argument("--debug", action="store_true", help="log messages on stderr")
    return p


def _notice(text: str) -> None:
    try:
        sys.stderr.write(f"ra acp: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def run_acp(argv: list[str]) -> int:
    args = build_acp_parser().parse_args(argv)
    try:
        import acp  # noqa: F401
    except ImportError:
        raise UsageError("ra acp needs the agent-client-protocol package: pip install 'ra-agent[acp]'") from None
    from .run_settings import settings_from_args

    settings = settings_from_args(args)
    settings.system_prompt = args.system_prompt
    settings.append_system_prompt = args.append_system_prompt
    if settings.policy is not None and settings.policy.permission_mode is None:
        # In an editor someone is there to ask: edits and commands are asked about unless the
        # flags or the config file name another mode (a plain ``ra`` run would bypass).
        settings.policy.permission_mode = "default"
    for notice in settings.notices:
        _notice(notice)
    return asyncio.run(_serve(settings, persist=not args.no_session_persistence))


async def _serve(settings: Any, *, persist: bool) -> int:
    from ra.acp import AcpSetup, serve

    from .runner import as_run_error, prepare

    try:
        ctx = await prepare(settings, [])
    except Exception as exc:
        raise as_run_error(exc, settings, False) from exc
    store = None
    if persist:
        from ra.agent.store import default_store

        store = default_store()
    extra: dict[str, Any] = {}
    if settings.sandbox is not None and settings.sandbox.confined:
        # Every session's environment under the sandbox (prepare() has checked that it can run
        # here), and never through the editor: its buffers and terminal are outside the sandbox.
        from ra.env.local import LocalExecutionEnvironment

        from .runner import confine

        extra["make_env"] = lambda cwd: confine(settings.sandbox, LocalExecutionEnvironment(cwd))
        extra["editor_io"] = False
        _notice(
            f"sandbox {settings.sandbox.mode}: files and commands stay in ra, under the sandbox "
            "(the editor's buffers and terminal are not used)"
        )
    setup = AcpSetup(
        profile=ctx.profile,
        client=ctx.client,
        session_config=ctx.session_config,
        store=store,
        hooks=ctx.hooks,
        mcp_servers=dict(settings.mcp.servers) if settings.mcp is not None else {},
        **extra,
    )
    _notice(f"{settings.model} via {settings.provider}; waiting for the editor on stdin")
    try:
        await serve(setup)
    finally:
        await ctx.client.close()
    return 0

"""Settings from a command line: the model and MCP flags, and how flags, environment and config
file combine into :class:`~ra.cli.config.Settings` with its policy and MCP servers.

Shared by ``ra [TASK]`` and ``ra acp``, so both pick provider, model, keys, rules and servers the
same way.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from .argtypes import float_number, positive_int

if TYPE_CHECKING:
    from .config import Settings

__all__ = ["SANDBOX_HELP", "add_mcp_arguments", "add_model_arguments", "settings_from_args"]


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    from .config import PROFILES, PROVIDERS, REASONING_EFFORTS

    g = p.add_argument_group("model")
    g.add_argument("--provider", choices=PROVIDERS, help="model provider (default: see below)")
    g.add_argument("--model", help="model id (default: RA_MODEL, the config file, or the provider's default)")
    g.add_argument("--base-url", metavar="URL", help="the provider's base URL (e.g. http://127.0.0.1:8000/v1)")
    g.add_argument("--profile", choices=PROFILES, help="tools and prompt family (default: ra)")
    g.add_argument(
        "--temperature", type=float_number, metavar="T", help="sampling temperature (default: the provider's)"
    )
    g.add_argument("--top-p", type=float_number, metavar="P", help="nucleus sampling (default: the provider's)")
    g.add_argument("--max-tokens", type=positive_int, metavar="N", help="output tokens per step")
    g.add_argument("--reasoning-effort", choices=REASONING_EFFORTS, help="reasoning effort for reasoning models")


#: ``--sandbox``'s help (``ra`` and ``ra acp``).
SANDBOX_HELP = (
    "run every command under bubblewrap (Linux): read-only, workspace-write (the working directory "
    "and /tmp writable, .git hooks and config read-only) or danger-full-access (no sandbox); network off "
    "unless [sandbox_workspace_write] network_access = true (default: sandbox_mode in the config file, or none)"
)


def add_mcp_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("MCP servers")
    g.add_argument(
        "--mcp-config",
        action="append",
        metavar="FILE|JSON",
        help='MCP servers from a file in the .mcp.json shape ({"mcpServers": {NAME: {...}}}), or that JSON '
        "itself (repeatable; a later one wins a server name over an earlier one and over the config file)",
    )
    g.add_argument(
        "--strict-mcp-config",
        action="store_true",
        help="use only the --mcp-config servers (not the config file's, not a trusted project's .mcp.json)",
    )


def settings_from_args(
    args: argparse.Namespace,
    environ: Mapping[str, str] | None = None,
    *,
    sdk_servers: Collection[str] = (),
    check_mcp_rules_now: bool = True,
) -> Settings:
    """Flags, environment and config file combined (usage errors raise), with the permission
    policy and the MCP servers; remarks for the user are in ``settings.notices``. Flags the
    command does not have count as not given. ``sdk_servers``: MCP servers a Claude Agent SDK
    program serves over the control channel (rules may name them too). ``check_mcp_rules_now``
    False: the caller checks the rules that name MCP servers later, once it knows all of them
    (the TypeScript SDK names its in-process servers in the ``initialize`` request)."""
    from .config import Flags, config_path, resolve
    from .mcp_config import check_mcp_rules, missing_package_notice, remember_secrets, resolve_mcp_config
    from .policy import resolve_policy
    from .ssh import ssh_target

    environ = os.environ if environ is None else environ

    def flag(name: str) -> Any:
        return getattr(args, name, None)

    flags = Flags(
        provider=flag("provider"),
        model=flag("model"),
        base_url=flag("base_url"),
        profile=flag("profile"),
        submit=flag("submit"),
        max_steps=flag("max_steps"),
        time_limit=flag("time_limit"),
        web=flag("web"),
        cwd=flag("cwd"),
        temperature=flag("temperature"),
        top_p=flag("top_p"),
        max_tokens=flag("max_tokens"),
        reasoning_effort=flag("reasoning_effort"),
        sandbox=flag("sandbox"),
    )
    settings = resolve(flags, environ)
    settings.ssh = ssh_target(args)
    settings.policy = resolve_policy(args, settings.file, settings.cwd, source=settings.config_file or "config")
    settings.notices.extend(settings.policy.notices)
    settings.mcp = resolve_mcp_config(
        flag("mcp_config"),
        strict=bool(flag("strict_mcp_config")),
        file=settings.file,
        config_file=str(config_path(environ)),
        cwd=settings.cwd,
    )
    remember_secrets(settings.mcp)
    settings.notices.extend(settings.mcp.notices)
    if check_mcp_rules_now:
        settings.notices.extend(check_mcp_rules(settings.policy, settings.mcp, sdk_servers))
    missing = missing_package_notice(settings.mcp)
    if missing is not None:
        settings.notices.append(missing)
    return settings

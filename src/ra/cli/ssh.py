"""``ra --ssh DEST``: the tools' files, commands and searches on another machine over SSH
(:class:`ra.env.ssh.SshExecutionEnvironment`); the model calls, config, session records, hooks and
MCP servers stay here.

What cannot be honoured over SSH is refused before anything runs (exit 2), never half applied:
the sandbox (bubblewrap confines local processes only) and permission rules whose spec is matched
against file paths - they resolve links with this machine's file system, which is not the one the
tools touch. Rules on a whole tool (``Read``, ``Bash``), command rules (``Bash(git:*)``) and
``domain:`` rules keep working. The host key is always checked against known_hosts: an unknown or
changed key stops the run, there is no trust on first use.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .config import ConfigError

if TYPE_CHECKING:
    from .config import Settings

__all__ = ["SshTarget", "add_ssh_arguments", "check_ssh_settings", "open_ssh_environment", "parse_destination"]

#: How long ``ra`` waits for the connection before the run (and on each reconnection).
CONNECT_TIMEOUT_S = 15.0


@dataclass(frozen=True, slots=True)
class SshTarget:
    """Where ``--ssh`` runs the tools: the flags, checked."""

    host: str
    port: int = 22
    username: str | None = None
    #: The remote working directory: absolute, or relative to the remote home (``~``).
    directory: str = "~"
    known_hosts: str | None = None
    keys: tuple[str, ...] = ()

    @property
    def destination(self) -> str:
        """``user@host:port`` as a person would write it (for records and messages)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.username}@" if self.username else ""
        return f"{user}{host}:{self.port}"


def add_ssh_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("remote (SSH)")
    g.add_argument(
        "--ssh",
        metavar="[USER@]HOST[:PORT]",
        help="run the tools (files, commands, search) on HOST over SSH; the model calls, config, session "
        "records, hooks and MCP servers stay on this machine. The host key must already be in known_hosts. "
        "Not with --sandbox, nor with permission rules on file paths (needs: pip install 'ra-agent[ssh]')",
    )
    g.add_argument("--ssh-dir", metavar="DIR", help="with --ssh: the remote working directory (default: the home, ~)")
    g.add_argument(
        "--ssh-known-hosts",
        metavar="FILE",
        help="with --ssh: the known_hosts file with HOST's key (default: what ssh uses, ~/.ssh/known_hosts)",
    )
    g.add_argument(
        "--ssh-key",
        action="append",
        metavar="FILE",
        help="with --ssh: a private key file (repeatable; default: the SSH agent and ~/.ssh/id_*)",
    )


def parse_destination(text: str) -> tuple[str | None, str, int]:
    """``[USER@]HOST[:PORT]`` (an IPv6 address in brackets: ``[::1]:2222``) as (user, host, port);
    anything else is a ConfigError naming the form."""
    usage = f"--ssh {text!r}: expected [USER@]HOST[:PORT] (an IPv6 address in brackets: [::1]:22)"
    user, at, rest = text.strip().rpartition("@")
    if at and not user:
        raise ConfigError(usage)
    port_text = ""
    if rest.startswith("["):
        host, bracket, tail = rest[1:].partition("]")
        if not bracket or (tail and not tail.startswith(":")):
            raise ConfigError(usage)
        port_text = tail[1:] if tail else ""
        if tail and not port_text:
            raise ConfigError(usage)
    elif rest.count(":") == 1:
        host, _, port_text = rest.partition(":")
        if not port_text:
            raise ConfigError(usage)
    elif ":" in rest:
        raise ConfigError(usage)
    else:
        host = rest
    if not host or host.startswith("-") or any(c.isspace() or c in "/@[]" for c in host):
        raise ConfigError(usage)
    port = 22
    if port_text:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ConfigError(f"--ssh {text!r}: the port must be a number from 1 to 65535")
        port = int(port_text)
    return (user or None), host, port


def ssh_target(args: argparse.Namespace) -> SshTarget | None:
    """The ``--ssh`` flags as a target, or None without ``--ssh`` (then the other ``--ssh-*``
    flags are refused: they would do nothing)."""
    dest = getattr(args, "ssh", None)
    directory = getattr(args, "ssh_dir", None)
    known_hosts = getattr(args, "ssh_known_hosts", None)
    keys = getattr(args, "ssh_key", None)
    if dest is None:
        given = [
            flag
            for flag, value in (("--ssh-dir", directory), ("--ssh-known-hosts", known_hosts), ("--ssh-key", keys))
            if value is not None
        ]
        if given:
            raise ConfigError(f"{', '.join(given)} only means something with --ssh [USER@]HOST[:PORT]")
        return None
    user, host, port = parse_destination(dest)
    if directory is not None and not directory.strip():
        raise ConfigError("--ssh-dir: give a directory (absolute, or relative to the remote home)")
    for key in keys or ():
        if not os.path.isfile(os.path.expanduser(key)):
            raise ConfigError(f"--ssh-key {key}: no such file")
    return SshTarget(
        host=host,
        port=port,
        username=user,
        directory=directory if directory is not None else "~",
        known_hosts=known_hosts,
        keys=tuple(keys or ()),
    )


def check_ssh_settings(settings: Settings, tool_registry: Any) -> None:
    """Refuse (ConfigError, exit 2) what ``--ssh`` cannot honour: a sandbox, and permission
    rules whose spec is matched against file paths (see the module docstring)."""
    if settings.ssh is None:
        return
    sandbox = settings.sandbox
    if sandbox is not None and sandbox.confined:
        raise ConfigError(
            f"--ssh cannot run under the sandbox ({sandbox.mode}): bubblewrap confines commands on this "
            "machine, not on the remote host; drop --sandbox / sandbox_mode for this run"
        )
    policy = settings.policy
    if policy is None:
        return
    from ra.agent.permissions.rules import path_scoped

    for text in (*policy.allowed_tools, *policy.disallowed_tools, *policy.ask_tools):
        if path_scoped(text, tool_registry):
            raise ConfigError(
                f"--ssh: the permission rule {text!r} names files, and ra checks file rules against this "
                "machine's files (links resolved here), not the remote host's, so it could not take effect; "
                "remove it for this run, or use rules on whole tools (Read, Edit) and commands (Bash(git:*))"
            )


async def open_ssh_environment(target: SshTarget, settings: Settings) -> Any:
    """The connected environment for ``target``: connected now, so that a missing extra, an
    unknown host key, a failed login or a missing directory stops the run (ConfigError, exit 2)
    before the model is asked anything."""
    try:
        from ra.env.ssh import SshConnectionError, SshExecutionEnvironment
    except ImportError:
        raise ConfigError(_MISSING) from None
    try:
        env = SshExecutionEnvironment(
            target.host,
            port=target.port,
            username=target.username,
            client_keys=list(target.keys) or None,
            known_hosts=target.known_hosts,
            working_directory=target.directory,
            connect_timeout_s=CONNECT_TIMEOUT_S,
        )
    except ImportError:
        raise ConfigError(_MISSING) from None
    except (FileNotFoundError, ValueError) as exc:
        raise ConfigError(f"--ssh {target.destination}: {exc}") from None
    try:
        await env.initialize()
    except BaseException as exc:
        with contextlib.suppress(Exception):  # the connection error is what the user needs to see
            await env.cleanup()
        if isinstance(exc, SshConnectionError | OSError):
            raise ConfigError(f"--ssh {target.destination}: {exc}") from None
        raise
    return env


_MISSING = "--ssh needs the asyncssh package: pip install 'ra-agent[ssh]'"

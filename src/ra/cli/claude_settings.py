"""``--settings FILE``: a Claude Code ``settings.json``, read for what ra can act on.

Read: ``hooks`` (the same shape as the config file's ``[hooks]``) and ``permissions`` -
``allow``, ``deny``, ``ask`` (rules), ``defaultMode`` (the permission mode) and
``additionalDirectories``. Every other key (``env``, ``model``, ``statusLine``, ...) is reported
in a notice, never dropped silently; a key of the wrong type is a ConfigError naming it.

Rules are Claude Code's (``Bash(npm run test:*)``, ``Read(./.env)``) and ra reads the same
syntax (:mod:`ra.agent.permissions`), with one form anchored here: ``Edit(/src/**)`` is relative
to the settings file in Claude Code, so :func:`ra_rule` turns it into the absolute
``Edit(//<settings dir>/src/**)``; ``//abs``, ``~/p``, ``./p`` and ``p`` mean the same in both.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import ConfigError

__all__ = ["ClaudeSettings", "ra_rule", "read_settings"]

_PERMISSION_KEYS = ("allow", "deny", "ask", "defaultMode", "additionalDirectories")
#: Keys that describe the file, not a setting.
_QUIET_KEYS = frozenset({"$schema"})


@dataclass(slots=True)
class ClaudeSettings:
    """What a settings file says that ra uses."""

    path: str
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    default_mode: str | None = None
    #: Absolute paths of ``additionalDirectories`` (each an existing directory).
    additional_directories: tuple[str, ...] = ()
    hooks: Mapping[str, Any] | None = None
    notices: list[str] = field(default_factory=list)

    @property
    def directory(self) -> str:
        """The settings file's directory (what ``/path`` rules are relative to)."""
        return os.path.dirname(self.path)


def read_settings(path: str, cwd: str) -> ClaudeSettings:
    """The settings file at ``path`` (relative to ``cwd``); ConfigError for anything unreadable."""
    if path.lstrip().startswith("{"):
        # The settings themselves, as Claude Code (and its SDK's ``settings=``) accepts them: the
        # working directory is "the settings file's directory" for ``/path`` rules.
        raw, full, label = path, os.path.join(os.path.abspath(cwd), "settings.json"), "--settings JSON"
        where = "--settings JSON"
    else:
        full = os.path.abspath(os.path.join(cwd, os.path.expanduser(path)))
        label, where = f"--settings {path}", f"settings file {full}"
        try:
            raw = Path(full).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{label}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{label}: cannot read it ({exc})") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"{label}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{label}: a settings file is a JSON object")
    settings = ClaudeSettings(full)
    unused = [k for k in data if k not in ("hooks", "permissions") and k not in _QUIET_KEYS]
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise ConfigError(f"{where}: 'hooks' must be an object of event name to a list of matchers")
    settings.hooks = hooks or None
    permissions = data.get("permissions", {})
    if not isinstance(permissions, dict):
        raise ConfigError(f"{where}: 'permissions' must be an object")
    unused += [f"permissions.{k}" for k in permissions if k not in _PERMISSION_KEYS]
    for key in ("allow", "deny", "ask"):
        rules = permissions.get(key, [])
        if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
            raise ConfigError(f"{where}: 'permissions.{key}' must be a list of rule strings, got {rules!r}")
        setattr(settings, key, tuple(ra_rule(r, settings.directory) for r in rules))
    mode = permissions.get("defaultMode")
    if mode is not None:
        from ra.agent.permissions.rules import normalize_mode

        if not isinstance(mode, str):
            raise ConfigError(f"{where}: 'permissions.defaultMode' must be a string, got {mode!r}")
        try:
            settings.default_mode = normalize_mode(mode)
        except ValueError as exc:
            raise ConfigError(f"{where}: permissions.defaultMode: {exc}") from None
    dirs = permissions.get("additionalDirectories", [])
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        raise ConfigError(f"{where}: 'permissions.additionalDirectories' must be a list of paths, got {dirs!r}")
    resolved = []
    for d in dirs:
        absolute = os.path.normpath(os.path.join(cwd, os.path.expanduser(d)))
        if not os.path.isdir(absolute):
            raise ConfigError(f"{where}: permissions.additionalDirectories: {d!r} is not a directory ({absolute})")
        resolved.append(absolute)
    settings.additional_directories = tuple(resolved)
    if unused:
        settings.notices.append(f"{where}: not used by ra (ignored): {', '.join(unused)}")
    return settings


def ra_rule(rule: str, settings_dir: str) -> str:
    """A Claude Code rule from a settings file, in ra's syntax (see the module docstring): a file
    rule's ``/p`` anchored at the settings file's directory
    (:func:`ra.agent.permissions.rules.anchor_rule`); every other rule as it is. A rule that
    cannot be read is returned as it is too, for the policy's parser to refuse naming the file."""
    from ra.agent.permissions.rules import anchor_rule

    try:
        return anchor_rule(rule, settings_dir)
    except ValueError:
        return rule

"""A batch's tasks: one JSON object per line, checked whole before anything runs.

A typo in a field name, a missing instruction or a repository that is not there would otherwise
surface as a failed task hours into a batch; here it is a :class:`TasksFileError` naming the line,
and nothing starts. Paths are resolved against the tasks file's directory, so a tasks file and the
repositories next to it can move together.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

__all__ = ["PROFILES", "SANDBOX_MODES", "Task", "TasksFileError", "load_tasks", "parse_tasks"]

#: The profiles a task may name (``ra.sdk.QueryOptions.profile``).
PROFILES = ("ra", "openai", "anthropic", "gemini")
#: The sandbox modes (``ra.env.sandbox.SandboxPolicy``; codex's names).
SANDBOX_MODES = ("read-only", "workspace-write", "danger-full-access")
#: A task id names its working copy and its diff file: letters, digits, ``._-``, not a dot first.
_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
#: A base commit: a hash, a branch or tag name, ``HEAD~2``; never an option (``-x``).
_BASE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/~^@{}-]{0,199}")
#: ``user@host:path`` (git's scp-like syntax) or ``scheme://...``: a repository to clone.
_URL = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:)")


class TasksFileError(ValueError):
    """The tasks file (or list) is not usable; the message names the line and the field."""


@dataclass(frozen=True, slots=True)
class Task:
    """One task of a batch (see docs/batch.md for the fields)."""

    id: str
    instruction: str
    #: A local git repository (absolute path) or a URL to clone; with ``base`` the commit to start from.
    repo: str | None = None
    base: str | None = None
    #: A directory (absolute path) copied for the task.
    directory: str | None = None
    model: str | None = None
    profile: str | None = None
    max_turns: int | None = None
    max_budget_usd: float | None = None
    #: Seconds for the whole task: the working copy, the agent and the check.
    timeout: float | None = None
    #: A shell command run in the working copy after the agent stops; exit 0 passes.
    check: str | None = None
    #: A sandbox mode (:data:`SANDBOX_MODES`) the agent's commands and the check run under.
    sandbox: str | None = None
    #: Where the task came from (``tasks.jsonl line 3``), for messages.
    source: str = ""

    @property
    def repo_is_url(self) -> bool:
        return self.repo is not None and bool(_URL.match(self.repo))


_FIELDS = tuple(f.name for f in fields(Task) if f.name != "source")


def load_tasks(path: str | os.PathLike[str]) -> list[Task]:
    """The tasks of a JSONL file (blank lines skipped); relative paths are from the file's directory."""
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TasksFileError(f"{file}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TasksFileError(f"{file}: cannot read it ({exc})") from None
    items: list[tuple[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{file.name} line {number}"
        try:
            items.append((where, json.loads(line)))
        except (ValueError, RecursionError) as exc:
            raise TasksFileError(f"{where}: not valid JSON ({exc})") from None
    return _check_all(items, file.resolve().parent, str(file))


def parse_tasks(
    items: Iterable[Task | Mapping[str, Any]], *, base_dir: str | os.PathLike[str] | None = None
) -> list[Task]:
    """Tasks from objects (dicts in the file's shape, or :class:`Task`); relative paths from ``base_dir``
    (default: the current directory)."""
    base = Path(base_dir if base_dir is not None else os.getcwd()).resolve()
    listed: list[tuple[str, Any]] = []
    for index, item in enumerate(items):
        if isinstance(item, Task):
            item = {name: getattr(item, name) for name in _FIELDS if getattr(item, name) is not None}
        listed.append((f"task {index + 1}", item))
    return _check_all(listed, base, "the tasks")


def _check_all(items: list[tuple[str, Any]], base: Path, what: str) -> list[Task]:
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    for where, data in items:
        task = _check(where, data, base)
        if task.id in seen:
            raise TasksFileError(f"{task.source}: id {task.id!r} is already used ({seen[task.id]}); ids must be unique")
        seen[task.id] = where
        tasks.append(task)
    if not tasks:
        raise TasksFileError(f"{what}: no tasks")
    return tasks


def _check(where: str, data: Any, base: Path) -> Task:
    if not isinstance(data, dict):
        raise TasksFileError(f"{where}: a task is a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise TasksFileError(f"{where}: unknown field {unknown[0]!r} (the fields are: {', '.join(_FIELDS)})")

    def text(name: str, *, required: bool = False) -> str | None:
        value = data.get(name)
        if value is None:
            if required:
                raise TasksFileError(f"{where}: {name!r} is required")
            return None
        if not isinstance(value, str) or not value.strip():
            raise TasksFileError(f"{where}: {name!r} must be a non-empty string")
        return value

    task_id = text("id", required=True)
    assert task_id is not None
    if not _ID.fullmatch(task_id):
        raise TasksFileError(
            f"{where}: id {task_id!r} must be 1-128 letters, digits, '.', '_' or '-', not starting with '.' "
            "(it names the task's working copy)"
        )
    where = f"{where} (id {task_id})"
    instruction = text("instruction", required=True)
    assert instruction is not None
    repo, directory, base_commit = text("repo"), text("directory"), text("base")
    if (repo is None) == (directory is None):
        raise TasksFileError(f"{where}: give exactly one of 'repo' (a git repository) and 'directory' (copied)")
    if base_commit is not None:
        if repo is None:
            raise TasksFileError(f"{where}: 'base' is for a 'repo' task (a directory is copied as it is)")
        if not _BASE.fullmatch(base_commit):
            raise TasksFileError(f"{where}: 'base' {base_commit!r} is not a commit, branch or tag name")
    if repo is not None:
        if repo.startswith("-"):
            raise TasksFileError(f"{where}: 'repo' {repo!r} cannot start with '-'")
        if not _URL.match(repo):
            path = (base / Path(repo).expanduser()).resolve()
            if not path.is_dir():
                raise TasksFileError(f"{where}: 'repo' {repo} is not a directory ({path})")
            if not (path / ".git").exists():
                raise TasksFileError(f"{where}: 'repo' {repo} is not a git repository (no .git in {path})")
            repo = str(path)
    if directory is not None:
        path = (base / Path(directory).expanduser()).resolve()
        if not path.is_dir():
            raise TasksFileError(f"{where}: 'directory' {directory} is not a directory ({path})")
        directory = str(path)
    profile = text("profile")
    if profile is not None and profile not in PROFILES:
        raise TasksFileError(f"{where}: 'profile' {profile!r} is not one of {', '.join(PROFILES)}")
    sandbox = text("sandbox")
    if sandbox is not None and sandbox not in SANDBOX_MODES:
        raise TasksFileError(f"{where}: 'sandbox' {sandbox!r} is not one of {', '.join(SANDBOX_MODES)}")
    max_turns = data.get("max_turns")
    if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1):
        raise TasksFileError(f"{where}: 'max_turns' must be a whole number >= 1, got {max_turns!r}")
    budget = _number(where, data, "max_budget_usd", allow_zero=True)
    timeout = _number(where, data, "timeout", allow_zero=False)
    return Task(
        id=task_id,
        instruction=instruction,
        repo=repo,
        base=base_commit,
        directory=directory,
        model=text("model"),
        profile=profile,
        max_turns=max_turns,
        max_budget_usd=budget,
        timeout=timeout,
        check=text("check"),
        sandbox=sandbox,
        source=where,
    )


def _number(where: str, data: dict[str, Any], name: str, *, allow_zero: bool) -> float | None:
    value = data.get(name)
    if value is None:
        return None
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise TasksFileError(f"{where}: {name!r} must be a number {bound}, got {value!r}")
    return float(value)

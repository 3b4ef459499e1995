"""What the system prompt says about the world: environment block (spec 6.3), git snapshot (6.4)
and project documents (6.5).

Everything goes through the ``ExecutionEnvironment``, never the local filesystem directly, so a
session running in a container or over SSH describes *that* machine. The snapshot is taken once
at session start; the model can run ``git status`` itself for anything fresher.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from types import MappingProxyType

from ..env.base import ExecutionEnvironment

__all__ = [
    "PROFILE_DOC_FILES",
    "PROJECT_DOC_BUDGET",
    "TRUNCATION_MARKER",
    "GitSnapshot",
    "ProjectDoc",
    "discover_agents_md_chain",
    "discover_project_docs",
    "environment_block",
    "format_project_docs",
    "git_snapshot",
    "truncation_marker",
]

#: Spec 6.5: project instructions are capped at 32 KB in total.
PROJECT_DOC_BUDGET = 32 * 1024
#: Spec 6.5's marker, verbatim, for the default budget.
TRUNCATION_MARKER = "[Project instructions truncated at 32KB]"

#: The instruction files each profile family reads besides ``AGENTS.md`` (spec 6.5's table).
#: ``AGENTS.md`` is universal and always read, so it is not repeated here.
PROFILE_DOC_FILES: MappingProxyType[str, tuple[str, ...]] = MappingProxyType(
    {
        "openai": (".codex/instructions.md",),
        "anthropic": ("CLAUDE.md",),
        "gemini": ("GEMINI.md",),
        "ra": (),
    }
)

#: Longest commit subject kept in the snapshot; a pasted changelog as a subject is not orientation.
_MAX_SUBJECT = 200
_SEP = "\x1e"  # ASCII record separator: cannot appear in paths git prints or in one-line subjects


@dataclass(slots=True)
class GitSnapshot:
    is_repo: bool = False
    #: The top of the work tree, spelled as the environment spells its working directory (so a
    #: working directory reached through a symlink still lies under it).
    root: str | None = None
    #: Current branch; None when HEAD is detached (or unknown).
    branch: str | None = None
    #: Abbreviated commit id of HEAD; None before the first commit.
    head: str | None = None
    #: Files with staged or unstaged changes; None when ``git status`` did not finish.
    modified: int | None = 0
    #: Untracked files (each file, not each directory); None when ``git status`` did not finish.
    untracked: int | None = 0
    #: Subjects of the most recent commits, newest first.
    recent_commits: list[str] = field(default_factory=list)

    def branch_label(self) -> str:
        """What the environment block shows as "Git branch"."""
        if not self.is_repo:
            return "(none)"
        if self.branch:
            return self.branch
        return f"(detached at {self.head})" if self.head else "(detached)"

    def render(self) -> str:
        """A short block for the prompt; empty when the directory is not a repository."""
        if not self.is_repo:
            return ""

        def count(value: int | None) -> str:
            return "unknown" if value is None else str(value)

        lines = [
            "<git>",
            f"Branch: {self.branch_label()}",
            f"Modified files: {count(self.modified)}",
            f"Untracked files: {count(self.untracked)}",
        ]
        if self.recent_commits:
            lines.append("Recent commits:")
            lines.extend(f"- {subject}" for subject in self.recent_commits)
        elif self.head is None:
            lines.append("Recent commits: none yet")
        lines.append("</git>")
        return "\n".join(lines)


async def git_snapshot(env: ExecutionEnvironment, max_commits: int = 10) -> GitSnapshot:
    """Branch, counts of modified and untracked files, and recent commit subjects.

    One shell round trip: the commands are joined with separators so a remote environment pays
    for a single exec. Not a repository (or git missing, or the command failing outright) yields
    ``is_repo=False``. A repository without commits is still a repository. When the command runs
    out of time, the sections that finished are kept and the rest are reported as unknown.
    """
    if max_commits < 0:
        raise ValueError(f"max_commits must be at least 0, got {max_commits}")
    script = (
        "git rev-parse --show-toplevel --show-prefix 2>/dev/null || exit 0; "
        f"printf '{_SEP}'; git symbolic-ref --short -q HEAD 2>/dev/null; "
        f"printf '{_SEP}'; git rev-parse --short -q --verify HEAD 2>/dev/null; "
        f"printf '{_SEP}'; git status --porcelain=v1 --untracked-files=all 2>/dev/null; "
        f"printf '{_SEP}'; git log -n {int(max_commits)} --format=%s 2>/dev/null; "
        f"printf '{_SEP}'; exit 0"
    )
    try:
        result = await env.exec_command(script, timeout_ms=10_000, env_vars={"GIT_OPTIONAL_LOCKS": "0"})
    except Exception:  # the snapshot is orientation only; never fail a session over it
        return GitSnapshot()
    if _SEP not in result.stdout or (result.exit_code != 0 and not result.timed_out):
        return GitSnapshot()
    # A section counts only when the separator after it arrived (it finished before any timeout).
    sections = result.stdout.split(_SEP)[:-1]
    location = sections[0].splitlines()
    toplevel = location[0].strip() if location else ""
    prefix = location[1].strip() if len(location) > 1 else ""
    snap = GitSnapshot(is_repo=True, root=_root_as_seen_by(env, toplevel, prefix))
    if len(sections) > 1:
        snap.branch = sections[1].strip() or None
    if len(sections) > 2:
        snap.head = sections[2].strip() or None
    if len(sections) > 3:
        entries = [line for line in sections[3].splitlines() if line.strip()]
        snap.untracked = sum(1 for line in entries if line.startswith("??"))
        snap.modified = sum(1 for line in entries if not line.startswith(("??", "!!")))
    else:
        snap.modified = snap.untracked = None
    if len(sections) > 4:
        snap.recent_commits = [_clip(line.strip()) for line in sections[4].splitlines() if line.strip()]
    return snap


def _root_as_seen_by(env: ExecutionEnvironment, toplevel: str, prefix: str) -> str | None:
    """The work tree's top in the environment's spelling of paths.

    git prints the real path of the top level; a working directory reached through a symlink
    (``/tmp`` on macOS, a symlinked checkout) would then not lie under it, and the docs walk would
    lose every directory above the working directory. ``--show-prefix`` (the working directory
    relative to the top) lets us strip the right number of components from the environment's own
    working directory instead.
    """
    cwd = posixpath.normpath(env.working_directory())
    rel = prefix.strip("/")
    if not rel:
        return cwd
    if cwd.endswith("/" + rel):
        return cwd[: -len(rel) - 1] or "/"
    return toplevel or None


def _clip(subject: str) -> str:
    return subject if len(subject) <= _MAX_SUBJECT else subject[: _MAX_SUBJECT - 3] + "..."


def environment_block(
    *,
    working_directory: str,
    git: GitSnapshot,
    platform: str,
    os_version: str,
    model: str,
    knowledge_cutoff: str | None = None,
    today: date | None = None,
) -> str:
    """The spec 6.3 block, with exactly its fields. ``model`` is what the model is told it is
    (display name, with the id where they differ)."""
    day = (today or date.today()).isoformat()
    return "\n".join(
        [
            "<environment>",
            f"Working directory: {working_directory}",
            f"Is git repository: {'true' if git.is_repo else 'false'}",
            f"Git branch: {git.branch_label()}",
            f"Platform: {platform}",
            f"OS version: {os_version}",
            f"Today's date: {day}",
            f"Model: {model}",
            f"Knowledge cutoff: {knowledge_cutoff or 'unknown'}",
            "</environment>",
        ]
    )


@dataclass(slots=True)
class ProjectDoc:
    path: str
    content: str
    #: True when the budget ran out inside (or before) this file.
    truncated: bool = False


def truncation_marker(budget: int) -> str:
    """Spec 6.5's marker; other budgets name their own size."""
    if budget == PROJECT_DOC_BUDGET:
        return TRUNCATION_MARKER
    size = f"{budget // 1024}KB" if budget % 1024 == 0 else f"{budget} bytes"
    return f"[Project instructions truncated at {size}]"


def _chain(root: str, cwd: str) -> list[str]:
    """Directories from ``root`` down to ``cwd`` (just ``cwd`` when it is not under ``root``)."""
    root = posixpath.normpath(root)
    cwd = posixpath.normpath(cwd)
    if cwd != root and not cwd.startswith(root.rstrip("/") + "/"):
        return [cwd]
    dirs = [root]
    rel = posixpath.relpath(cwd, root)
    if rel != ".":
        current = root
        for part in rel.split("/"):
            current = posixpath.join(current, part)
            dirs.append(current)
    return dirs


def _ancestors(cwd: str) -> list[str]:
    """``cwd`` and every directory above it, outermost (``/``) first."""
    current = posixpath.normpath(cwd)
    dirs = [current]
    while True:
        parent = posixpath.dirname(current)
        if parent == current:
            break
        dirs.append(parent)
        current = parent
    dirs.reverse()
    return dirs


def _checked_names(file_names: Iterable[str]) -> list[str]:
    """``AGENTS.md`` first, then the profile's own names, each once, each relative and inside."""
    if isinstance(file_names, str):
        raise TypeError("file_names must be a list of names, not a single string")
    names = ["AGENTS.md"]
    for name in file_names:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"project doc file names must be non-empty strings, got {name!r}")
        normal = posixpath.normpath(name)
        if posixpath.isabs(normal) or normal == ".." or normal.startswith("../"):
            raise ValueError(f"project doc file names are relative to each directory, got {name!r}")
        if normal not in names:
            names.append(normal)
    return names


async def _collect(env: ExecutionEnvironment, dirs: list[str], names: list[str], budget: int) -> list[ProjectDoc]:
    if budget < 1:
        raise ValueError(f"budget must be at least 1 byte, got {budget}")
    docs: list[ProjectDoc] = []
    used = 0
    for directory in dirs:
        for name in names:
            path = posixpath.join(directory, name)
            try:
                if not await env.file_exists(path) or await env.is_directory(path):
                    continue
                raw = await env.read_bytes(path)
            except (OSError, ValueError):  # unreadable: skip it, as if absent
                continue
            text = raw.decode("utf-8", "replace")
            if not text.strip():
                continue
            data = text.encode("utf-8")
            if used + len(data) > budget:
                # Cut on a character boundary; the marker tells the model the rest exists.
                cut = data[: budget - used].decode("utf-8", "ignore").rstrip()
                body = f"{cut}\n{truncation_marker(budget)}" if cut else truncation_marker(budget)
                docs.append(ProjectDoc(path, body, truncated=True))
                return docs
            docs.append(ProjectDoc(path, text))
            used += len(data)
    return docs


async def discover_project_docs(
    env: ExecutionEnvironment,
    file_names: Iterable[str],
    *,
    git_root: str | None = None,
    budget: int = PROJECT_DOC_BUDGET,
) -> list[ProjectDoc]:
    """Instruction files from the git root (or the working directory) down to the working
    directory, outermost first, so deeper files come later and take precedence. ``AGENTS.md`` is
    always included (first in each directory); ``file_names`` adds the profile's own (CLAUDE.md,
    GEMINI.md, .codex/instructions.md, ...). Empty files are skipped. The total is capped at
    ``budget`` bytes; the doc that crosses it is cut and ends with the marker, and nothing after
    it is read."""
    names = _checked_names(file_names)
    cwd = env.working_directory()
    return await _collect(env, _chain(git_root or cwd, cwd), names, budget)


async def discover_agents_md_chain(env: ExecutionEnvironment, *, budget: int = PROJECT_DOC_BUDGET) -> list[ProjectDoc]:
    """ra-spec's rule: ``AGENTS.md`` from the working directory and every directory above it, up
    to the filesystem root (not only up to the git root), outermost first."""
    return await _collect(env, _ancestors(env.working_directory()), ["AGENTS.md"], budget)


def format_project_docs(docs: list[ProjectDoc]) -> str:
    if not docs:
        return ""
    blocks = [f'<project_instructions path="{d.path}">\n{d.content.rstrip()}\n</project_instructions>' for d in docs]
    return "\n\n".join(blocks)

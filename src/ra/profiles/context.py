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

from ..env.base import ExecutionEnvironment

__all__ = [
    "PROJECT_DOC_BUDGET",
    "GitSnapshot",
    "ProjectDoc",
    "discover_project_docs",
    "environment_block",
    "format_project_docs",
    "git_snapshot",
]

#: Spec 6.5: project instructions are capped at 32 KB in total.
PROJECT_DOC_BUDGET = 32 * 1024
TRUNCATION_MARKER = "[Project instructions truncated at 32KB]"


@dataclass(slots=True)
class GitSnapshot:
    is_repo: bool = False
    root: str | None = None
    branch: str | None = None
    modified: int = 0
    untracked: int = 0
    recent_commits: list[str] = field(default_factory=list)

    def render(self) -> str:
        """A short block for the prompt; empty when the directory is not a repository."""
        if not self.is_repo:
            return ""
        lines = [
            "<git>",
            f"Branch: {self.branch or '(detached)'}",
            f"Modified files: {self.modified}",
            f"Untracked files: {self.untracked}",
        ]
        if self.recent_commits:
            lines.append("Recent commits:")
            lines.extend(f"- {subject}" for subject in self.recent_commits)
        lines.append("</git>")
        return "\n".join(lines)


async def git_snapshot(env: ExecutionEnvironment, max_commits: int = 10) -> GitSnapshot:
    """Branch, counts of modified and untracked files, and recent commit subjects.

    One shell round trip: the commands are joined with separators so a remote environment pays
    for a single exec. Any failure (git missing, not a repository) yields ``is_repo=False``.
    """
    sep = "\x1e"
    script = (
        "git rev-parse --show-toplevel 2>/dev/null || exit 0; "
        f"printf '{sep}'; git rev-parse --abbrev-ref HEAD 2>/dev/null; "
        f"printf '{sep}'; git status --porcelain=v1 --untracked-files=all 2>/dev/null; "
        f"printf '{sep}'; git log -n {int(max_commits)} --format=%s 2>/dev/null"
    )
    try:
        result = await env.exec_command(script, timeout_ms=10_000, env_vars={"GIT_OPTIONAL_LOCKS": "0"})
    except Exception:  # the snapshot is orientation only; never fail a session over it
        return GitSnapshot()
    if result.exit_code != 0 or sep not in result.stdout:
        return GitSnapshot()
    root, branch, status, log = [*result.stdout.split(sep), "", "", ""][:4]
    status_lines = [line for line in status.splitlines() if line.strip()]
    untracked = sum(1 for line in status_lines if line.startswith("??"))
    branch = branch.strip()
    return GitSnapshot(
        is_repo=True,
        root=root.strip() or None,
        branch=None if branch in ("", "HEAD") else branch,
        modified=len(status_lines) - untracked,
        untracked=untracked,
        recent_commits=[line for line in log.splitlines() if line.strip()],
    )


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
    """The spec 6.3 block, with exactly its fields."""
    day = (today or date.today()).isoformat()
    return "\n".join(
        [
            "<environment>",
            f"Working directory: {working_directory}",
            f"Is git repository: {'true' if git.is_repo else 'false'}",
            f"Git branch: {git.branch or ('(detached)' if git.is_repo else '(none)')}",
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


async def discover_project_docs(
    env: ExecutionEnvironment,
    file_names: Iterable[str],
    *,
    git_root: str | None = None,
    budget: int = PROJECT_DOC_BUDGET,
) -> list[ProjectDoc]:
    """Instruction files from the git root (or the working directory) down to the working
    directory, outermost first, so deeper files come later and take precedence. ``AGENTS.md`` is
    always included; ``file_names`` adds the profile's own (CLAUDE.md, GEMINI.md, ...). The total
    is capped at ``budget`` bytes; the doc that crosses it is cut and marked."""
    names = ["AGENTS.md", *(n for n in file_names if n != "AGENTS.md")]
    cwd = env.working_directory()
    docs: list[ProjectDoc] = []
    used = 0
    for directory in _chain(git_root or cwd, cwd):
        for name in names:
            path = posixpath.join(directory, name)
            try:
                if not await env.file_exists(path) or await env.is_directory(path):
                    continue
                raw = await env.read_bytes(path)
            except OSError:
                continue
            text = raw.decode("utf-8", "replace")
            size = len(text.encode("utf-8"))
            if used + size > budget:
                room = max(0, budget - used)
                cut = text.encode("utf-8")[:room].decode("utf-8", "ignore")
                docs.append(ProjectDoc(path, cut.rstrip() + "\n" + TRUNCATION_MARKER))
                return docs
            docs.append(ProjectDoc(path, text))
            used += size
    return docs


def format_project_docs(docs: list[ProjectDoc]) -> str:
    if not docs:
        return ""
    blocks = [f'<project_instructions path="{d.path}">\n{d.content.rstrip()}\n</project_instructions>' for d in docs]
    return "\n\n".join(blocks)

"""A task's own working copy: a git worktree, a clone or a copied directory, and its diff.

Every git command runs with the git directory named explicitly (``--git-dir``, ``--work-tree``)
and hooks and fsmonitor off. The working copy is the agent's to change - under a sandbox it is
the one place it may write - so nothing in it may choose what ra runs: a ``.git`` file or
directory the agent wrote there is never read, and a clone's git directory lives outside the
working copy (``--separate-git-dir``). A copied directory gets a private git directory too, whose
tree of the copy is the base its diff is taken against.

The diff covers new files (it is taken through a temporary index: the working copy's own index is
left alone) and honours ``.gitignore``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import uuid
from dataclasses import dataclass
from pathlib import Path

from .tasks import Task

__all__ = ["WorkingCopy", "WorkingCopyError", "create_working_copy"]

#: Options every git command gets: no hooks, no fsmonitor command, no ``ext::`` transport.
_SAFE = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "protocol.ext.allow=never",
    "-c",
    "core.quotePath=false",
)
#: Bytes of a failed git command's stderr kept for the message.
_ERROR_BYTES = 2000


class WorkingCopyError(Exception):
    """A working copy could not be made (or diffed): the message says which git step failed."""


async def _run(args: list[str], *, cwd: str | None = None, timeout: float, env: dict[str, str] | None = None) -> bytes:
    """Run a command, return its stdout; WorkingCopyError on a non-zero exit or the timeout (the
    whole process group is killed: nothing of it outlives the call, also when cancelled)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    environ.update(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="", SSH_ASKPASS="", **(env or {}))
    proc = await asyncio.create_subprocess_exec(
        *args,
        cwd=cwd,
        env=environ,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 5)
        if isinstance(exc, TimeoutError):
            raise WorkingCopyError(f"{_show(args)} did not finish within {timeout:g}s") from None
        raise
    if proc.returncode != 0:
        text = err[-_ERROR_BYTES:].decode("utf-8", "replace").strip() or f"exit code {proc.returncode}"
        raise WorkingCopyError(f"{_show(args)} failed: {text}")
    return out


def _show(args: list[str]) -> str:
    """The git command, named without its safety options (for messages)."""
    shown = [a for i, a in enumerate(args) if a != "-c" and (i == 0 or args[i - 1] != "-c")]
    return " ".join(shown[:4])


@dataclass(slots=True)
class WorkingCopy:
    """Where a task works, and what its diff is taken against."""

    path: Path
    #: The git directory the diff reads (never the one the working copy names).
    git_dir: Path
    #: The commit (repo) or tree (copied directory) the diff is against.
    base: str
    #: "worktree", "clone" or "copy".
    kind: str
    #: The repository a worktree belongs to (to unregister it).
    repo: str | None = None

    def _git(self, *args: str) -> list[str]:
        return ["git", *_SAFE, f"--git-dir={self.git_dir}", f"--work-tree={self.path}", *args]

    async def diff(self, *, timeout: float) -> str:
        """The working copy against the base: changed, deleted and new files (``--binary``)."""
        index = self.git_dir / f"ra-batch-index-{uuid.uuid4().hex}"
        env = {"GIT_INDEX_FILE": str(index)}
        try:
            async with asyncio.timeout(timeout):
                await _run(self._git("read-tree", self.base), env=env, timeout=timeout)
                await _run(self._git("add", "-A", "--", "."), cwd=str(self.path), env=env, timeout=timeout)
                out = await _run(
                    self._git(
                        "diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "--no-textconv", self.base
                    ),
                    cwd=str(self.path),
                    env=env,
                    timeout=timeout,
                )
        except TimeoutError:
            raise WorkingCopyError(f"the diff was not ready within {timeout:g}s") from None
        finally:
            with contextlib.suppress(OSError):
                index.unlink()
        return out.decode("utf-8", "replace")

    async def remove(self, *, timeout: float = 60.0) -> None:
        """Delete the working copy (and unregister a worktree; delete a private git directory)."""
        if self.kind == "worktree" and self.repo is not None:
            with contextlib.suppress(WorkingCopyError):
                await _run(
                    ["git", *_SAFE, "-C", self.repo, "worktree", "remove", "--force", str(self.path)], timeout=timeout
                )
        await asyncio.to_thread(shutil.rmtree, self.path, True)
        if self.kind == "worktree" and self.repo is not None:
            with contextlib.suppress(WorkingCopyError):
                await _run(["git", *_SAFE, "-C", self.repo, "worktree", "prune"], timeout=timeout)
        else:
            await asyncio.to_thread(shutil.rmtree, self.git_dir, True)


async def create_working_copy(task: Task, root: Path, *, timeout: float) -> WorkingCopy:
    """Make ``task``'s working copy under ``root`` (``root/work/ID``; private git directories in
    ``root/git/ID``). A leftover of an earlier attempt is removed first."""
    path = root / "work" / task.id
    git_dir = root / "git" / task.id
    await _clear(task, path, git_dir, timeout)
    path.parent.mkdir(parents=True, exist_ok=True)
    git_dir.parent.mkdir(parents=True, exist_ok=True)
    if task.directory is not None:
        return await _copy(task.directory, path, git_dir, root, timeout)
    assert task.repo is not None
    if task.repo_is_url:
        return await _clone(task, path, git_dir, timeout)
    return await _worktree(task, path, timeout)


async def _clear(task: Task, path: Path, git_dir: Path, timeout: float) -> None:
    if task.repo is not None and not task.repo_is_url and await asyncio.to_thread(path.exists):
        with contextlib.suppress(WorkingCopyError):
            await _run(["git", *_SAFE, "-C", task.repo, "worktree", "remove", "--force", str(path)], timeout=timeout)
    await asyncio.to_thread(shutil.rmtree, path, True)
    await asyncio.to_thread(shutil.rmtree, git_dir, True)
    if task.repo is not None and not task.repo_is_url:
        with contextlib.suppress(WorkingCopyError):
            await _run(["git", *_SAFE, "-C", task.repo, "worktree", "prune"], timeout=timeout)


async def _worktree(task: Task, path: Path, timeout: float) -> WorkingCopy:
    repo = task.repo
    assert repo is not None
    spec = f"{task.base or 'HEAD'}^{{commit}}"
    try:
        out = await _run(
            ["git", *_SAFE, "-C", repo, "rev-parse", "--verify", "--end-of-options", spec], timeout=timeout
        )
    except WorkingCopyError:
        raise WorkingCopyError(f"{repo} has no commit {task.base or 'HEAD'!r}") from None
    commit = out.decode().strip()
    await _run(["git", *_SAFE, "-C", repo, "worktree", "add", "--detach", "-f", str(path), commit], timeout=timeout)
    # Read now, before the agent can rewrite the working copy's .git file.
    out = await _run(["git", *_SAFE, "-C", str(path), "rev-parse", "--absolute-git-dir"], timeout=timeout)
    git_dir = Path(out.decode().strip())
    return WorkingCopy(path, git_dir, commit, "worktree", repo)


async def _clone(task: Task, path: Path, git_dir: Path, timeout: float) -> WorkingCopy:
    assert task.repo is not None
    await _run(
        ["git", *_SAFE, "clone", "-q", "--no-checkout", f"--separate-git-dir={git_dir}", "--", task.repo, str(path)],
        timeout=timeout,
    )
    copy = WorkingCopy(path, git_dir, "", "clone")
    spec = f"{task.base or 'HEAD'}^{{commit}}"
    try:
        out = await _run(copy._git("rev-parse", "--verify", "--end-of-options", spec), timeout=timeout)
    except WorkingCopyError:
        raise WorkingCopyError(f"{task.repo} has no commit {task.base or 'HEAD'!r}") from None
    copy.base = out.decode().strip()
    await _run(copy._git("checkout", "-q", "--detach", copy.base), cwd=str(path), timeout=timeout)
    return copy


async def _copy(source: str, path: Path, git_dir: Path, root: Path, timeout: float) -> WorkingCopy:
    def copy() -> None:
        inside = root.resolve()

        def ignore(directory: str, names: list[str]) -> list[str]:
            # The batch's own output inside the copied directory is not copied (it would copy itself).
            return [n for n in names if Path(directory, n).resolve() == inside]

        shutil.copytree(source, path, symlinks=True, ignore=ignore)

    try:
        async with asyncio.timeout(timeout):
            await asyncio.to_thread(copy)
    except TimeoutError:
        raise WorkingCopyError(f"copying {source} did not finish within {timeout:g}s") from None
    except OSError as exc:
        raise WorkingCopyError(f"cannot copy {source}: {exc}") from None
    await _run(["git", *_SAFE, "init", "-q", "--bare", str(git_dir)], timeout=timeout)
    copy_ = WorkingCopy(path, git_dir, "", "copy")
    index = git_dir / "ra-batch-base-index"
    env = {"GIT_INDEX_FILE": str(index)}
    await _run(copy_._git("add", "-A", "--", "."), cwd=str(path), env=env, timeout=timeout)
    out = await _run(copy_._git("write-tree"), cwd=str(path), env=env, timeout=timeout)
    with contextlib.suppress(OSError):
        index.unlink()
    copy_.base = out.decode().strip()
    return copy_

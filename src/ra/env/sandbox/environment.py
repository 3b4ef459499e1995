"""SandboxedExecutionEnvironment: a local environment whose commands run under bubblewrap.

Every command of the wrapped :class:`~ra.env.local.LocalExecutionEnvironment` starts as
``bwrap [namespaces] [mounts] --seccomp FD -- bash -c COMMAND`` (through the local environment's
command wrapper, so process groups, the kill cookie, timeouts and output capture stay as they
are; the sandbox ends with the command). The file tools run in ra's own
process, outside the sandbox, so they are held to the same boundary here: a write, delete or move
outside the writable roots is a PermissionError naming the path and the mode, symlinks are
resolved before the check, and the change is made without following any link afterwards
(:mod:`.safefs`). Reads are not confined (as in codex's read-only mode): the sandbox keeps a
model from changing the machine, not from seeing it.

The writable roots (workspace-write): the working directory, /tmp, $TMPDIR and the policy's
``writable_roots``. Each is bound on itself, so it is a mount point a command cannot rename away.
In each, the repository's ``.git`` stays in place (bound on itself too) and its ``hooks``,
``config`` (which can name hook paths and commands) and a worktree's ``.git`` file are read-only:
otherwise a command could plant a hook that the user's next ``git commit`` runs unconfined.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat

from ..local import _THREAD_THRESHOLD, LocalExecutionEnvironment
from ..wrappers import DelegatingExecutionEnvironment
from . import safefs
from .bwrap import bind_args, check_bwrap, find_bwrap, namespace_args
from .policy import SandboxPolicy
from .seccomp import unix_socket_filter

__all__ = ["SandboxedExecutionEnvironment", "check_sandbox"]


def check_sandbox(policy: SandboxPolicy, *, bwrap: str | None = None) -> None:
    """Raise :class:`~ra.env.sandbox.SandboxUnavailable` saying what to install or enable when
    ``policy`` cannot be enforced here (bwrap missing, user namespaces off); None when it can."""
    if policy.confined:
        check_bwrap(find_bwrap(bwrap), network=policy.network_allowed)


class SandboxedExecutionEnvironment(DelegatingExecutionEnvironment):
    """``inner``'s files and commands, confined by ``policy`` (a :class:`SandboxPolicy` or a mode
    name). ``bwrap`` names the executable (default: ``bwrap`` on PATH). Construction checks that
    the sandbox works here and raises SandboxUnavailable otherwise."""

    def __init__(self, inner: LocalExecutionEnvironment, policy: SandboxPolicy | str, *, bwrap: str | None = None):
        if not isinstance(inner, LocalExecutionEnvironment):
            raise TypeError(
                "the sandbox wraps a LocalExecutionEnvironment (bwrap runs on this machine), "
                f"got {type(inner).__name__}"
            )
        super().__init__(inner)
        self.policy = SandboxPolicy(policy) if isinstance(policy, str) else policy
        self._roots: tuple[str, ...] = ()
        if not self.policy.confined:
            return
        self._bwrap = find_bwrap(bwrap)
        self._roots = self._writable_roots()
        disable_userns = check_bwrap(self._bwrap, network=self.policy.network_allowed)
        self._prefix = [
            self._bwrap,
            *namespace_args(network=self.policy.network_allowed, disable_userns=disable_userns),
            *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"),
        ]
        if self.policy.mode == "read-only":
            self._prefix += ["--tmpfs", "/tmp"]
        self._seccomp = unix_socket_filter()
        # When the command's first process exits, its process group - which holds bwrap's PID 1 of
        # the sandbox - is killed, and with PID 1 every process of the sandbox's PID namespace:
        # nothing a command starts outlives it, not even a child that left the group with
        # ``setsid`` and dropped the kill cookie with ``env -i``. (PID 1 holds the output pipes
        # while any process is left, so without this the call would wait for the background
        # grace and then the kill grace, PID 1 ignoring SIGTERM.)
        inner.set_command_wrapper(self._wrap, end_group_on_exit=True)

    # -- the boundary ----------------------------------------------------------------------------

    def _writable_roots(self) -> tuple[str, ...]:
        if self.policy.mode != "workspace-write":
            return ()
        roots = [os.path.realpath(p) for p in (self.inner.working_directory(), "/tmp") if os.path.isdir(p)]
        tmpdir = os.path.realpath(os.environ.get("TMPDIR") or "/tmp")
        home = os.path.realpath(os.path.expanduser("~"))
        # $TMPDIR too (codex does), unless it would open up the file system or the home directory.
        if os.path.isdir(tmpdir) and tmpdir != "/" and not _within(home, tmpdir):
            roots.append(tmpdir)
        for path in self.policy.writable_roots:
            if not os.path.isdir(path):
                raise ValueError(f"a writable root of the sandbox is not an existing directory: {path}")
            roots.append(os.path.realpath(path))
        # Parents first, so a nested root is bound over its parent's binding, not under it.
        return tuple(sorted(set(roots), key=lambda p: (p.count(os.sep), p)))

    def sandbox_summary(self) -> str | None:
        """One paragraph for the model's system prompt, so it knows why a write or a download
        fails instead of retrying it; None in ``danger-full-access``."""
        if not self.policy.confined:
            return None
        network = "on" if self.policy.network_allowed else "off (downloads and package installs fail)"
        if self.policy.mode == "read-only":
            where = "nothing outside a private /tmp that is emptied after each command"
        else:
            where = f"only {', '.join(self._roots)} (.git hooks and config are read-only)"
        return (
            f"<sandbox>\nCommands run in a {self.policy.mode} sandbox: commands and file edits may change {where}; "
            f"network access is {network}. Nothing a command starts in the background outlives it.\n</sandbox>"
        )

    @property
    def writable_roots(self) -> tuple[str, ...]:
        """The directories commands and file tools may change (none in read-only mode)."""
        return self._roots

    def _git_guards(self) -> tuple[list[str], list[str]]:
        """(``.git`` directories to pin in place, paths to keep read-only) of each writable root's
        repository as it is now: its ``.git`` (a directory, a worktree's ``gitdir:`` file, or a
        link), or the root itself when it is a repository directory. A missing ``hooks``
        directory or ``config`` is created first (empty), since only an existing path can be
        made read-only; where either is a symlink (which a command could replace with another),
        the whole repository directory is kept read-only."""
        pins: list[str] = []
        readonly: list[str] = []
        for root in self._roots:
            commons = [root] if _is_git_dir(root) else []
            dot = os.path.join(root, ".git")
            try:
                mode = os.lstat(dot).st_mode
            except OSError:
                mode = 0
            if stat.S_ISDIR(mode):
                pins.append(dot)
                commons.append(dot)
            elif stat.S_ISREG(mode):  # a worktree or submodule: "gitdir: PATH"
                readonly.append(dot)
                gitdir = _gitdir_of(dot)
                if gitdir is not None:
                    commons.append(_common_dir(gitdir))
                    readonly.append(os.path.join(gitdir, "config.worktree"))
            elif stat.S_ISLNK(mode) and os.path.isdir(dot):
                commons.append(_realpath(dot))
            for common in commons:
                if not self._writable(common):
                    continue
                hooks, config = os.path.join(common, "hooks"), os.path.join(common, "config")
                with contextlib.suppress(OSError):
                    if not os.path.lexists(hooks):
                        os.mkdir(hooks)
                    if not os.path.lexists(config):
                        os.close(os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                if os.path.islink(hooks) or os.path.islink(config):
                    readonly += [common, _realpath(hooks), _realpath(config)]
                else:
                    readonly += [hooks, config]
        readonly = [p for p in readonly if os.path.exists(p) and self._writable(_realpath(p))]
        return pins, readonly

    def _writable(self, real: str) -> bool:
        return any(_within(real, root) for root in self._roots)

    def _refuse(self, what: str, path: str, why: str) -> PermissionError:
        return PermissionError(f"sandbox ({self.policy.mode}): cannot {what} {path}: {why}")

    def _check(self, path: str, what: str, *, follow: bool) -> str:
        """The real path to act on, after refusing one outside the writable roots or in a guarded
        place. ``follow=False`` checks a final symlink itself (a delete or rename acts on the link,
        not on what it points to); its directory is resolved all the same."""
        if not self.policy.confined:
            return self.inner.resolve(path)
        full = self.inner.resolve(path)
        real = _realpath(full)
        if not follow:
            real = os.path.join(_realpath(os.path.dirname(full)), os.path.basename(full))
        if not self._roots:
            raise self._refuse(what, path, "nothing is writable in read-only mode")
        if not self._writable(real):
            where = f" (it resolves to {real})" if real != full else ""
            roots = ", ".join(self._roots)
            raise self._refuse(what, path, f"it is outside the writable roots{where}; writable: {roots}")
        pins, readonly = self._git_guards()
        for guarded in readonly:
            if _within(real, _realpath(guarded)):
                raise self._refuse(what, path, f"{guarded} is kept read-only (git hooks and config run commands)")
        if what != "write":
            for fixed in (*pins, *self._roots):
                if _within(fixed, real):
                    raise self._refuse(what, path, f"{fixed} must stay where it is (a writable root or a .git)")
        return real

    # -- files -----------------------------------------------------------------------------------
    # Confined, the changes go through :mod:`.safefs` (no symlink followed after the check), not
    # through the inner environment's path-based writes.

    async def write_file(self, path: str, content: str | bytes) -> None:
        if not self.policy.confined:
            await self.inner.write_file(path, content)
            return
        real = self._check(path, "write", follow=True)
        if isinstance(content, str):
            data = content.encode("utf-8")
        elif isinstance(content, bytes | bytearray | memoryview):
            data = bytes(content)
        else:
            raise TypeError(f"content must be str or bytes, got {type(content).__name__}")
        shown = self.inner.resolve(path)
        if len(data) > _THREAD_THRESHOLD:
            await asyncio.to_thread(safefs.write, real, shown, data)
        else:
            safefs.write(real, shown, data)

    async def delete_file(self, path: str) -> None:
        if not self.policy.confined:
            await self.inner.delete_file(path)
            return
        safefs.delete(self._check(path, "delete", follow=False), self.inner.resolve(path))

    async def move_file(self, source: str, destination: str) -> None:
        if not self.policy.confined:
            await self.inner.move_file(source, destination)
            return
        src = self._check(source, "move", follow=False)
        # The rename replaces a link at the destination, but a copy across file systems would
        # write through it: both the link and what it points to must be writable.
        self._check(destination, "move onto", follow=True)
        dst = self._check(destination, "move onto", follow=False)
        await asyncio.to_thread(safefs.move, src, dst, self.inner.resolve(source), self.inner.resolve(destination))

    # -- commands --------------------------------------------------------------------------------

    def _wrap(
        self, argv: list[str], cwd: str, env: dict[str, str]
    ) -> tuple[list[str], dict[str, str], tuple[int, ...]]:
        args = list(self._prefix)
        fds: tuple[int, ...] = ()
        if self._seccomp is not None:
            # A pipe holds the filter (far below a pipe's buffer); bwrap reads it to the end.
            read_end, write_end = os.pipe()
            try:
                os.write(write_end, self._seccomp)
            finally:
                os.close(write_end)
            fds = (read_end,)
            args += ["--seccomp", str(read_end)]
        if self.policy.mode == "read-only":
            # The private /tmp hides a working directory under /tmp: show it again, read-only.
            args += bind_args("--ro-bind", {p for p in (self.inner.working_directory(), cwd) if _within(p, "/tmp")})
        else:
            pins, readonly = self._git_guards()
            args += bind_args("--bind", self._roots)
            args += bind_args("--bind", pins)
            args += bind_args("--ro-bind", readonly)
        args += ["--chdir", cwd, "--", *argv]
        return args, env, fds


def _realpath(path: str) -> str:
    """``os.path.realpath``, which raises when a command swaps a link for a directory between its
    ``islink`` and its ``readlink``: tried again, then refused (where ra cannot resolve a path, it
    does not act on it)."""
    for _ in range(3):
        try:
            return os.path.realpath(path)
        except OSError:
            continue
    raise PermissionError(f"sandbox: {path} kept changing while it was resolved (a symlink swapped in and out)")


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _is_git_dir(path: str) -> bool:
    """A repository directory itself (a ``.git`` or a bare repository), as git recognises one."""
    parts = ("HEAD", "objects", "refs")
    head, objects, refs = (os.path.join(path, part) for part in parts)
    return os.path.isfile(head) and os.path.isdir(objects) and os.path.isdir(refs)


def _gitdir_of(dot_git_file: str) -> str | None:
    try:
        with open(dot_git_file, encoding="utf-8", errors="replace") as fh:
            first = fh.readline(4096).strip()
    except OSError:
        return None
    if not first.startswith("gitdir:"):
        return None
    target = os.path.join(os.path.dirname(dot_git_file), first[len("gitdir:") :].strip())
    return _realpath(target) if os.path.isdir(target) else None


def _common_dir(gitdir: str) -> str:
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8", errors="replace") as fh:
            rel = fh.readline(4096).strip()
    except OSError:
        return gitdir
    common = _realpath(os.path.join(gitdir, rel)) if rel else gitdir
    return common if os.path.isdir(common) else gitdir

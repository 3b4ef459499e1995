"""Environments that wrap another one for a cross-cutting concern (coding-agent-loop-spec 4.4).

``DelegatingExecutionEnvironment`` forwards everything; the others override what they change:

* ``LoggingExecutionEnvironment`` records every call (``logging`` and/or a callback).
* ``ReadOnlyExecutionEnvironment`` refuses writes, deletes and moves. Commands still run: a shell
  can write anyway, so this guards the file tools, not the machine.
* ``ScopedExecutionEnvironment`` confines paths to one directory (a subagent's workspace):
  relative paths resolve against it, and a path that leaves it, by ``..`` or through a symlink, is
  refused. Commands start there. Like read-only mode it is a guard rail for tools, not a sandbox.
  The symlink check reads the local filesystem, which is what the local environment uses. One
  exception: the spill file of a command run through the scope (``ExecResult.full_output_path``,
  which usually lies in a temporary directory) can be read and searched, because the shell tool
  tells the model to page through it with ``read_file`` and ``grep``.
* ``ChildExecutionEnvironment`` shares everything with the environment it wraps except stopping:
  its ``terminate_all`` and ``cleanup`` stop only the commands started through it (a subagent's,
  so that closing one child leaves its parent's and siblings' commands running).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from .base import DirEntry, ExecResult, ExecutionEnvironment, GrepOptions, OutputCallback, local_paths

__all__ = [
    "ChildExecutionEnvironment",
    "DelegatingExecutionEnvironment",
    "EnvCallRecord",
    "LoggingExecutionEnvironment",
    "ReadOnlyExecutionEnvironment",
    "ScopedExecutionEnvironment",
    "ssh_destination_of",
]

T = TypeVar("T")


class DelegatingExecutionEnvironment:
    """Forwards every call to ``inner``; subclass it and override what a wrapper changes."""

    def __init__(self, inner: ExecutionEnvironment) -> None:
        self.inner = inner

    async def read_file(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        return await self.inner.read_file(path, offset, limit)

    async def read_bytes(self, path: str) -> bytes:
        return await self.inner.read_bytes(path)

    async def file_size(self, path: str) -> int:
        """The inner environment's ``file_size`` (a ValueError when it has none: see
        :func:`ra.tools.file_size.file_size`, which then lists the directory)."""
        sized = getattr(self.inner, "file_size", None)
        if sized is None:
            raise ValueError("the environment cannot tell a file's size")
        return int(await sized(path))

    async def write_file(self, path: str, content: str | bytes) -> None:
        await self.inner.write_file(path, content)

    async def delete_file(self, path: str) -> None:
        await self.inner.delete_file(path)

    async def move_file(self, source: str, destination: str) -> None:
        await self.inner.move_file(source, destination)

    async def file_exists(self, path: str) -> bool:
        return await self.inner.file_exists(path)

    async def is_directory(self, path: str) -> bool:
        return await self.inner.is_directory(path)

    async def list_directory(self, path: str, depth: int = 1) -> list[DirEntry]:
        return await self.inner.list_directory(path, depth)

    async def exec_command(
        self,
        command: str,
        timeout_ms: int | None = None,
        working_dir: str | None = None,
        env_vars: dict[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        return await self.inner.exec_command(command, timeout_ms, working_dir, env_vars, on_output)

    async def terminate_all(self) -> None:
        await self.inner.terminate_all()

    async def grep(self, pattern: str, path: str | None = None, options: GrepOptions | None = None) -> str:
        return await self.inner.grep(pattern, path, options)

    async def glob(self, pattern: str, path: str | None = None) -> list[str]:
        return await self.inner.glob(pattern, path)

    async def initialize(self) -> None:
        await self.inner.initialize()

    async def cleanup(self) -> None:
        await self.inner.cleanup()

    def working_directory(self) -> str:
        return self.inner.working_directory()

    @property
    def local_paths(self) -> bool:
        """The wrapped environment's (:func:`ra.env.base.local_paths`)."""
        return local_paths(self.inner)

    def resolve(self, path: str) -> str:
        return self.inner.resolve(path)

    def platform(self) -> str:
        return self.inner.platform()

    def os_version(self) -> str:
        return self.inner.os_version()

    def sandbox_summary(self) -> str | None:
        """The wrapped environment's sandbox, if any (:mod:`ra.env.sandbox`), for the prompt."""
        summary = getattr(self.inner, "sandbox_summary", None)
        return summary() if summary is not None else None


# ---------------------------------------------------------------------------------------------
# logging


@dataclass(slots=True)
class EnvCallRecord:
    """One finished call, as given to the logging wrapper's callback."""

    operation: str
    detail: str
    duration_ms: int
    error: BaseException | None = None
    #: For exec_command: the result (exit code, timed_out, ...); None otherwise.
    result: ExecResult | None = None


class LoggingExecutionEnvironment(DelegatingExecutionEnvironment):
    """Logs each call with its duration and outcome to ``logger`` and/or ``on_call``."""

    def __init__(
        self,
        inner: ExecutionEnvironment,
        *,
        logger: logging.Logger | None = None,
        level: int = logging.INFO,
        on_call: Callable[[EnvCallRecord], None] | None = None,
    ) -> None:
        super().__init__(inner)
        self.logger = logger or logging.getLogger("ra.env")
        self.level = level
        self.on_call = on_call

    async def _logged(self, operation: str, detail: str, call: Awaitable[T]) -> T:
        started = time.monotonic()
        try:
            result = await call
        except BaseException as exc:
            self._finish(EnvCallRecord(operation, detail, _ms_since(started), error=exc))
            raise
        self._finish(
            EnvCallRecord(
                operation, detail, _ms_since(started), result=result if isinstance(result, ExecResult) else None
            )
        )
        return result

    def _finish(self, record: EnvCallRecord) -> None:
        if record.error is not None:
            self.logger.log(
                self.level,
                "%s %s failed after %dms: %s: %s",
                record.operation,
                record.detail,
                record.duration_ms,
                type(record.error).__name__,
                record.error,
            )
        elif record.result is not None:
            r = record.result
            flags = "".join([" (timed out)" if r.timed_out else "", " (aborted)" if r.aborted else ""])
            self.logger.log(self.level, "exec: %s", record.detail)
            self.logger.log(self.level, "exit: %d in %dms%s", r.exit_code, r.duration_ms, flags)
        else:
            self.logger.log(self.level, "%s %s (%dms)", record.operation, record.detail, record.duration_ms)
        if self.on_call is not None:
            self.on_call(record)

    async def read_file(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        return await self._logged(
            "read_file", f"{path} offset={offset} limit={limit}", super().read_file(path, offset, limit)
        )

    async def read_bytes(self, path: str) -> bytes:
        return await self._logged("read_bytes", path, super().read_bytes(path))

    async def write_file(self, path: str, content: str | bytes) -> None:
        await self._logged(
            "write_file",
            f"{path} ({len(content)} {'chars' if isinstance(content, str) else 'bytes'})",
            super().write_file(path, content),
        )

    async def delete_file(self, path: str) -> None:
        await self._logged("delete_file", path, super().delete_file(path))

    async def move_file(self, source: str, destination: str) -> None:
        await self._logged("move_file", f"{source} -> {destination}", super().move_file(source, destination))

    async def file_exists(self, path: str) -> bool:
        return await self._logged("file_exists", path, super().file_exists(path))

    async def is_directory(self, path: str) -> bool:
        return await self._logged("is_directory", path, super().is_directory(path))

    async def list_directory(self, path: str, depth: int = 1) -> list[DirEntry]:
        return await self._logged("list_directory", f"{path} depth={depth}", super().list_directory(path, depth))

    async def exec_command(
        self,
        command: str,
        timeout_ms: int | None = None,
        working_dir: str | None = None,
        env_vars: dict[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        return await self._logged(
            "exec_command", command, super().exec_command(command, timeout_ms, working_dir, env_vars, on_output)
        )

    async def terminate_all(self) -> None:
        await self._logged("terminate_all", "", super().terminate_all())

    async def grep(self, pattern: str, path: str | None = None, options: GrepOptions | None = None) -> str:
        return await self._logged("grep", f"{pattern!r} in {path or '.'}", super().grep(pattern, path, options))

    async def glob(self, pattern: str, path: str | None = None) -> list[str]:
        return await self._logged("glob", f"{pattern!r} in {path or '.'}", super().glob(pattern, path))


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


# ---------------------------------------------------------------------------------------------
# read-only


class ReadOnlyExecutionEnvironment(DelegatingExecutionEnvironment):
    """Refuses every file mutation with a PermissionError; reads, search and commands pass."""

    @staticmethod
    def _refuse(what: str) -> PermissionError:
        return PermissionError(f"Write operations are disabled in read-only mode (refused: {what})")

    async def write_file(self, path: str, content: str | bytes) -> None:
        raise self._refuse(f"write {path}")

    async def delete_file(self, path: str) -> None:
        raise self._refuse(f"delete {path}")

    async def move_file(self, source: str, destination: str) -> None:
        raise self._refuse(f"move {source} -> {destination}")


# ---------------------------------------------------------------------------------------------
# scoped


def ssh_destination_of(env: object) -> str | None:
    """``user@host:port`` when ``env`` is, or wraps, an SSH environment (its files are on that
    host, not here); None otherwise."""
    for _ in range(64):  # wrappers nest a few deep; never loop on a cycle
        if env is None:
            return None
        where = getattr(env, "ssh_destination", None)
        if isinstance(where, str):
            return where
        env = getattr(env, "inner", None)
    return None


class ScopedExecutionEnvironment(DelegatingExecutionEnvironment):
    """Confines every path to ``root`` (relative paths resolve against it). The checks use this
    machine's file system (links resolved here), so a remote environment is refused (ValueError)."""

    def __init__(self, inner: ExecutionEnvironment, root: str) -> None:
        remote = ssh_destination_of(inner)
        if remote is not None:
            raise ValueError(
                f"the files are on {remote}, and a scope is checked against this machine's files: "
                "it cannot confine paths there"
            )
        super().__init__(inner)
        resolved = inner.resolve(root)
        if not os.path.isdir(resolved):
            raise NotADirectoryError(f"scope root does not exist or is not a directory: {resolved}")
        self.root = os.path.realpath(resolved)
        #: Spill files of commands run through this scope: readable although outside it.
        self._own_outputs: set[str] = set()

    def _within(self, real: str) -> bool:
        return real == self.root or real.startswith(self.root.rstrip(os.sep) + os.sep)

    def _lexical(self, path: str) -> str:
        if not isinstance(path, str) or not path:
            raise ValueError("path must be a non-empty string")
        if "\0" in path:
            raise ValueError(f"path contains a NUL byte: {path!r}")
        candidate = os.path.normpath(os.path.join(self.root, os.path.expanduser(path)))
        if not self._within(candidate):
            raise PermissionError(f"Path is outside the allowed directory {self.root}: {path}")
        return candidate

    def resolve(self, path: str) -> str:
        """The confined absolute path; PermissionError when ``path`` leads outside the scope."""
        candidate = self._lexical(path)
        # Resolve symlinks (of the existing part of the path) so a link cannot point outside.
        real = os.path.realpath(candidate)
        if not self._within(real):
            raise PermissionError(f"Path leads outside the allowed directory {self.root} through a symlink: {path}")
        return real

    def working_directory(self) -> str:
        return self.root

    def _readable(self, path: str) -> str:
        """Like ``resolve``, but also lets through the spill file of a command run through this
        scope: its output is the scope's own, wherever the inner environment put it."""
        if isinstance(path, str) and os.path.isabs(path) and "\0" not in path:
            real = os.path.realpath(path)
            if real in self._own_outputs:
                return real
        return self.resolve(path)

    async def read_file(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        return await self.inner.read_file(self._readable(path), offset, limit)

    async def read_bytes(self, path: str) -> bytes:
        return await self.inner.read_bytes(self._readable(path))

    async def file_size(self, path: str) -> int:
        sized = getattr(self.inner, "file_size", None)
        if sized is None:
            raise ValueError("the environment cannot tell a file's size")
        return int(await sized(self._readable(path)))

    async def write_file(self, path: str, content: str | bytes) -> None:
        await self.inner.write_file(self.resolve(path), content)

    async def delete_file(self, path: str) -> None:
        # Check the link itself, not its target: deleting a link inside the scope is fine.
        await self.inner.delete_file(self._confine_link(path))

    async def move_file(self, source: str, destination: str) -> None:
        await self.inner.move_file(self._confine_link(source), self.resolve(destination))

    async def file_exists(self, path: str) -> bool:
        return await self.inner.file_exists(self._readable(path))

    async def is_directory(self, path: str) -> bool:
        return await self.inner.is_directory(self.resolve(path))

    async def list_directory(self, path: str, depth: int = 1) -> list[DirEntry]:
        return await self.inner.list_directory(self.resolve(path), depth)

    async def exec_command(
        self,
        command: str,
        timeout_ms: int | None = None,
        working_dir: str | None = None,
        env_vars: dict[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        cwd = self.resolve(working_dir if working_dir is not None else ".")
        result = await self.inner.exec_command(command, timeout_ms, cwd, env_vars, on_output)
        if result.full_output_path:
            self._remember_output(result.full_output_path)
        return result

    def _remember_output(self, path: str) -> None:
        self._own_outputs.add(os.path.realpath(path))

    async def grep(self, pattern: str, path: str | None = None, options: GrepOptions | None = None) -> str:
        return await self.inner.grep(pattern, self._readable(path or "."), options)

    async def glob(self, pattern: str, path: str | None = None) -> list[str]:
        base = self.resolve(path or ".")
        matches = await self.inner.glob(pattern, base)
        # A pattern can climb out on its own ("../*"); keep only what lies inside the scope.
        return [m for m in matches if self._contains(m)]

    def _contains(self, path: str) -> bool:
        return self._within(os.path.realpath(path))

    def _confine_link(self, path: str) -> str:
        """Like ``resolve``, but the last component may be a symlink pointing anywhere: deleting or
        moving a link inside the scope touches only the link."""
        candidate = self._lexical(path)
        parent = os.path.realpath(os.path.dirname(candidate))
        if not self._within(parent):
            raise PermissionError(f"Path is outside the allowed directory {self.root}: {path}")
        return os.path.join(parent, os.path.basename(candidate))


class ChildExecutionEnvironment(DelegatingExecutionEnvironment):
    """The parent's environment as a subagent uses it: everything is shared and forwarded, except
    that ``terminate_all`` and ``cleanup`` stop only the commands this child started.

    A session calls ``terminate_all`` when it shuts down. On the shared environment that would
    stop every command on it - the parent's and the siblings' too. Here the child's own commands
    are cancelled instead (the inner environment kills a cancelled command's process group at
    once, without the two-second grace) and report ``aborted=True``. When the parent shuts down,
    its own ``terminate_all`` reaches the children's commands with the grace period.
    """

    def __init__(self, inner: ExecutionEnvironment) -> None:
        super().__init__(inner)
        self._commands: set[asyncio.Task[ExecResult]] = set()
        self._stopped: set[asyncio.Task[ExecResult]] = set()

    async def exec_command(
        self,
        command: str,
        timeout_ms: int | None = None,
        working_dir: str | None = None,
        env_vars: dict[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        started = asyncio.get_running_loop().time()
        run = asyncio.ensure_future(self.inner.exec_command(command, timeout_ms, working_dir, env_vars, on_output))
        self._commands.add(run)
        try:
            return await run
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if run in self._stopped and (current is None or current.cancelling() == 0):
                elapsed = int((asyncio.get_running_loop().time() - started) * 1000)
                return ExecResult(
                    "", "Command stopped: the subagent was closed.", -1, duration_ms=elapsed, aborted=True
                )
            raise
        finally:
            self._commands.discard(run)
            self._stopped.discard(run)

    async def terminate_all(self) -> None:
        runs = [run for run in self._commands if not run.done()]
        for run in runs:
            self._stopped.add(run)
            run.cancel()
        if runs:
            await asyncio.wait(runs)

    async def cleanup(self) -> None:
        """Stop this child's commands; the shared environment is the parent's to clean up."""
        await self.terminate_all()

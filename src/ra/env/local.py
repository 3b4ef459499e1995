"""LocalExecutionEnvironment: files, commands and search on this machine (coding-agent-loop-spec 4.2).

Commands run as ``bash -c`` in their own session and process group, and each carries a cookie
in its environment that every process it starts inherits (:mod:`ra.env.proctree`). Three things
the agent loop relies on are enforced here rather than hoped for:

* **Termination.** A timeout, ``terminate_all`` or a cancelled call stops the whole tree: every
  process of the group and every process carrying the command's cookie - also those that left
  the group with ``setsid``, ``nohup``, a double fork or ``disown`` - are frozen, sent SIGTERM,
  given two seconds, and sent SIGKILL (so a child that traps SIGTERM dies too). A command that
  exits while background children still hold its output pipes is not waited on forever: after a
  short grace its tree is stopped the same way. Children that redirected their output and did not
  hold the pipes are left alone when the command ends normally: that is how a dev server is
  started on purpose.
* **Bounded memory.** Output is read as it arrives. Up to ``output_memory_cap`` bytes are kept in
  memory; past that the whole output is written to a spill file (``ExecResult.full_output_path``)
  and memory keeps only the head and the tail of each stream, with a marker saying what was left
  out and where it is.
* **Streaming.** ``on_output`` receives text as it is produced, decoded incrementally so a UTF-8
  sequence split across reads is never mangled.

Output is read through pipes of ra's own (:mod:`ra.env.pipes`: enlarged, read in large pieces, a
trickle let gather for a millisecond); past the cap, a stream nobody watches live goes from its
pipe into the spill file with ``os.splice`` and only its tail is read back.

POSIX only (process groups and signals); Windows would need its own environment.
"""

from __future__ import annotations

import asyncio
import codecs
import collections
import contextlib
import errno
import logging
import os
import platform as _platform
import shutil
import signal
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from typing import BinaryIO

from .base import DirEntry, ExecResult, GrepOptions, OutputCallback
from .envvars import EnvPolicy, build_environment, parse_policy
from .pipes import OutputPipes
from .proctree import COOKIE_VAR, kill_now, new_cookie, stop_tree
from .search import (
    binary_file_result,
    find_ripgrep,
    glob_files,
    grep_python,
    grep_ripgrep,
    is_binary_file,
    validate_options,
)
from .timeouts import effective_timeout_ms

__all__ = ["CommandWrapper", "LocalExecutionEnvironment", "timeout_message"]

logger = logging.getLogger(__name__)

#: Rewrites how a command starts: ``(argv, cwd, env) -> (argv, env, fds)``, where ``fds`` are
#: descriptors the new process inherits and the environment closes once it has started; see
#: ``set_command_wrapper``.
CommandWrapper = Callable[[list[str], str, dict[str, str]], tuple[list[str], dict[str, str], tuple[int, ...]]]

DEFAULT_READ_LIMIT = 2000
#: How much of a file is checked for NUL bytes before it is called binary.
BINARY_CHECK_BYTES = 8192
#: Files larger than this are read in a worker thread so the event loop stays responsive.
_THREAD_THRESHOLD = 4 * 1024 * 1024
_STREAMS = ("stdout", "stderr")


def timeout_message(timeout_ms: int) -> str:
    """The text appended to a timed-out command's stdout (spec 5.4, verbatim)."""
    return (
        f"[ERROR: Command timed out after {timeout_ms}ms. Partial output is shown above.\n"
        "You can retry with a longer timeout by setting the timeout_ms parameter.]"
    )


_BACKGROUND_NOTE = (
    "[The command exited, but processes it started in the background kept its output open, so they "
    "were stopped. To leave a process running, redirect its output: `cmd > out.log 2>&1 &`.]"
)


# ---------------------------------------------------------------------------------------------
# output capture


class _Spilled:
    """A piece of a stream that went straight into the spill file (``os.splice``), never through
    memory: where it is, and how long. Read back only if it ends up in the tail."""

    __slots__ = ("length", "offset")

    def __init__(self, offset: int, length: int) -> None:
        self.offset = offset
        self.length = length

    def __len__(self) -> int:
        return self.length


class _StreamBuffer:
    """One stream's bytes: everything until the spill, then a bounded head and tail."""

    __slots__ = ("chunks", "head", "head_cap", "size", "tail", "tail_cap", "tail_size", "total")

    def __init__(self) -> None:
        self.chunks: list[bytes] | None = []  # complete content while nothing has been dropped
        self.head = bytearray()
        self.tail: collections.deque[bytes | _Spilled] = collections.deque()
        self.tail_size = 0
        self.head_cap = 0
        self.tail_cap = 0
        self.size = 0  # bytes held in ``chunks``
        self.total = 0  # every byte this stream produced

    def bound(self, head_cap: int, tail_cap: int) -> None:
        """Switch from keeping everything to keeping a head and a tail."""
        chunks, self.chunks = self.chunks or [], None
        self.head_cap, self.tail_cap = head_cap, tail_cap
        # Reuse the chunk objects rather than joining them: no second copy of the output.
        for chunk in chunks:
            room = head_cap - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self._append_tail(chunk)

    def add(self, data: bytes) -> None:
        self.total += len(data)
        if self.chunks is not None:
            self.chunks.append(data)
            self.size += len(data)
            return
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self._append_tail(data)

    def head_full(self) -> bool:
        """Bounded, and the head has all it keeps: what comes next matters only for the tail."""
        return self.chunks is None and len(self.head) >= self.head_cap

    def add_spilled(self, offset: int, length: int) -> None:
        """``length`` bytes that went straight to the spill file at ``offset`` (head full)."""
        self.total += length
        self._append_tail(_Spilled(offset, length))

    def read_back(self, fd: int) -> None:
        """Replace the spilled pieces of the tail by their bytes, read from the spill file ``fd``
        (before it is closed or removed); a piece that cannot be read is left out of the tail,
        and counted with the omitted bytes."""
        for i, item in enumerate(self.tail):
            if isinstance(item, _Spilled):
                try:
                    data = os.pread(fd, item.length, item.offset)
                except OSError:
                    data = b""
                self.tail_size -= item.length - len(data)
                self.tail[i] = data

    def _append_tail(self, data: bytes | _Spilled) -> None:
        self.tail.append(data)
        self.tail_size += len(data)
        while self.tail and self.tail_size - len(self.tail[0]) >= self.tail_cap:
            self.tail_size -= len(self.tail.popleft())

    def render(self, name: str, spill_path: str | None, spill_error: str | None = None) -> str:
        if self.chunks is not None:
            return b"".join(self.chunks).decode("utf-8", errors="replace")
        tail = b"".join(item for item in self.tail if isinstance(item, bytes))
        if len(tail) > self.tail_cap:
            tail = tail[len(tail) - self.tail_cap :]
        dropped = self.total - len(self.head) - len(tail)
        if dropped <= 0:
            return (bytes(self.head) + tail).decode("utf-8", errors="replace")
        # Cut on character boundaries: drop a partial sequence at the end of the head and
        # continuation bytes at the start of the tail.
        head_text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(bytes(self.head), final=False)
        skip = 0
        while skip < min(3, len(tail)) and 0x80 <= tail[skip] <= 0xBF:
            skip += 1
        tail_text = tail[skip:].decode("utf-8", errors="replace")
        marker = (
            f"\n\n[... {dropped} bytes of {name} omitted here to bound memory "
            f"({self.total} bytes in all); {_where_the_rest_is(spill_path, spill_error)} ...]\n\n"
        )
        return head_text + marker + tail_text


def _where_the_rest_is(spill_path: str | None, spill_error: str | None) -> str:
    if spill_path is not None:
        return f"the full output of the command is in {spill_path}"
    return f"the full output could not be kept ({spill_error or 'no spill file'})"


class _OutputCapture:
    """Both streams of one command, the spill file, and the live callback.

    Past the cap every byte goes to the spill file. Once a stream's head is full and no callback
    wants its text, its bytes go there straight from the pipe (:meth:`splice_target`: the pipe
    reader moves them with ``os.splice``, never copying them through Python); the tail is read
    back from the file when the command ends.
    """

    def __init__(self, memory_cap: int, spill_dir: _SpillDir, on_output: OutputCallback | None) -> None:
        self._cap = memory_cap
        self._spill_dir = spill_dir
        self.streams = (_StreamBuffer(), _StreamBuffer())
        self._order: list[tuple[int, bytes]] | None = []  # arrival order, until the spill starts
        self._held = 0
        self.total = 0
        self.spill_path: str | None = None
        #: Why the full output could not be kept on disk (a full disk, say); output stays bounded.
        self.spill_error: str | None = None
        self._spill: int | None = None  # the spill file's descriptor
        self._spill_at = 0  # its length, where the next bytes go
        self._can_splice = hasattr(os, "splice")
        self._callback = on_output
        self._decoders = [codecs.getincrementaldecoder("utf-8")(errors="replace") for _ in _STREAMS]
        self._closed = False

    def feed(self, index: int, data: bytes) -> None:
        if self._closed or not data:
            return
        self.total += len(data)
        self.streams[index].add(data)
        if self._spill is not None:
            self._write_spill(data)
        elif self.spill_error is None:
            assert self._order is not None
            self._order.append((index, data))
            self._held += len(data)
            if self._held > self._cap:
                self._start_spill()
        if self._callback is not None:
            self._emit(index, self._decoders[index].decode(data))

    def splice_target(self, index: int) -> int | None:
        """The spill file's descriptor when stream ``index``'s next bytes may go straight into it:
        spilling, no callback to show them to, and the stream's head already full."""
        if self._spill is None or self._callback is not None or self._closed or not self._can_splice:
            return None
        return self._spill if self.streams[index].head_full() else None

    def spliced(self, index: int, count: int) -> None:
        """``count`` bytes of stream ``index`` were moved into the spill file, at its end."""
        self.total += count
        self.streams[index].add_spilled(self._spill_at, count)
        self._spill_at += count

    def splice_failed(self, exc: OSError) -> None:
        """Moving bytes into the spill file failed: the file system cannot splice (the bytes are
        read and written instead from now on), or the file cannot grow (a full disk: as for a
        failed write). The bytes are still in the pipe either way."""
        if exc.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EBADF):
            self._can_splice = False
        else:
            self._drop_spill(exc)

    def _write_spill(self, data: bytes) -> None:
        assert self._spill is not None
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._spill, view)
                self._spill_at += written
                view = view[written:]
        except OSError as exc:
            self._drop_spill(exc)

    def _start_spill(self) -> None:
        order, self._order = self._order or [], None
        half = self._cap // 2
        for stream in self.streams:
            stream.bound(half // 2, half - half // 2)
        try:
            fd, path = tempfile.mkstemp(prefix="command-", suffix=".log", dir=self._spill_dir.path())
        except OSError as exc:
            self._drop_spill(exc)
            return
        self._spill = fd
        self.spill_path = path
        for _, chunk in order:
            if self._spill is None:
                break
            self._write_spill(chunk)

    def _drop_spill(self, exc: OSError) -> None:
        """The spill file cannot be written (a full disk, a quota): remove what there is of it and
        go on with the head and tail kept in memory, so the command still ends with a result."""
        self.spill_error = exc.strerror or str(exc)
        self._close_spill()
        if self.spill_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.spill_path)
            self.spill_path = None

    def _close_spill(self) -> None:
        """Read back what the tails need from the spill file, and close it."""
        spill, self._spill = self._spill, None
        if spill is None:
            return
        for stream in self.streams:
            stream.read_back(spill)
        with contextlib.suppress(OSError):
            os.close(spill)

    def _emit(self, index: int, text: str) -> None:
        if not text or self._callback is None:
            return
        try:
            self._callback(_STREAMS[index], text)
        except Exception:
            # A broken observer must not lose the command's output; stop calling it.
            logger.exception("on_output callback failed; no further output will be sent to it")
            self._callback = None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for index in range(len(_STREAMS)):
            self._emit(index, self._decoders[index].decode(b"", final=True))
        self._close_spill()

    def text(self, index: int) -> str:
        return self.streams[index].render(_STREAMS[index], self.spill_path, self.spill_error)


class _SpillDir:
    """A private temporary directory for spill files, created on first use, removed by cleanup()."""

    def __init__(self) -> None:
        self._path: str | None = None

    def path(self) -> str:
        if self._path is None or not os.path.isdir(self._path):
            self._path = tempfile.mkdtemp(prefix="ra-output-")
        return self._path

    def remove(self) -> None:
        if self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)
            self._path = None


# ---------------------------------------------------------------------------------------------
# process groups


async def _wait_event(event: asyncio.Event, timeout: float) -> bool:
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True


class _CaptureProtocol(asyncio.SubprocessProtocol):
    """The command's exit (from asyncio's transport) and its output pipes, which are made and
    read here (:class:`ra.env.pipes.OutputPipes`: enlarged pipes, large reads) rather than by
    asyncio's pipe transports."""

    def __init__(self, capture: _OutputCapture) -> None:
        self.capture = capture
        self.exited = asyncio.Event()
        self.pipes_closed = asyncio.Event()
        self.pipes = OutputPipes(
            capture.feed,
            self.pipes_closed.set,
            splice_target=capture.splice_target,
            on_spliced=capture.spliced,
            on_splice_error=capture.splice_failed,
        )

    def process_exited(self) -> None:
        self.exited.set()


class _Run:
    """A command in flight: its process group, its cookie, and how it is being stopped."""

    __slots__ = ("aborted", "background_stopped", "cookie", "pgid", "protocol", "stop_task", "timed_out")

    def __init__(self, pgid: int, cookie: str, protocol: _CaptureProtocol) -> None:
        self.pgid = pgid
        self.cookie = cookie
        self.protocol = protocol
        self.aborted = False
        self.timed_out = False
        self.background_stopped = False
        self.stop_task: asyncio.Future[None] | None = None

    def stop(self, grace_s: float) -> asyncio.Future[None]:
        """Freeze, SIGTERM, wait up to ``grace_s``, SIGKILL - the group and every process carrying
        the command's cookie, whichever group it moved to. Idempotent."""
        if self.stop_task is None:
            self.stop_task = asyncio.ensure_future(stop_tree(self.pgid, self.cookie, grace_s))
        return asyncio.shield(self.stop_task)

    def kill_now(self) -> None:
        kill_now(self.pgid, self.cookie)


# ---------------------------------------------------------------------------------------------
# the environment


class LocalExecutionEnvironment:
    """Runs tools against the local filesystem and a local bash.

    ``env_policy`` is ``"inherit_all"`` (default; with ``exclude_secrets`` on, credentials-looking
    variables are dropped), ``"core_only"`` or ``"none"``; ``extra_env`` is added to every command,
    unfiltered. ``grep_backend`` is ``"auto"`` (ripgrep when found), ``"ripgrep"`` or ``"python"``.
    """

    def __init__(
        self,
        working_dir: str | os.PathLike[str] = ".",
        *,
        env_policy: EnvPolicy | str = EnvPolicy.INHERIT_ALL,
        exclude_secrets: bool = True,
        extra_env: Mapping[str, str] | None = None,
        default_timeout_ms: int = 10_000,
        max_command_timeout_ms: int = 600_000,
        output_memory_cap: int = 8 * 1024 * 1024,
        shell: str = "/bin/bash",
        kill_grace_ms: int = 2000,
        background_grace_ms: int = 500,
        grep_backend: str = "auto",
    ) -> None:
        root = os.path.abspath(os.path.expanduser(os.fspath(working_dir)))
        if not os.path.isdir(root):
            raise NotADirectoryError(f"working directory does not exist or is not a directory: {root}")
        if default_timeout_ms < 1 or max_command_timeout_ms < 1:
            raise ValueError("command timeouts must be positive")
        if output_memory_cap < 1024:
            raise ValueError(f"output_memory_cap must be at least 1024 bytes, got {output_memory_cap}")
        if grep_backend not in ("auto", "ripgrep", "python"):
            raise ValueError(f"grep_backend must be 'auto', 'ripgrep' or 'python', got {grep_backend!r}")
        self._root = root
        self._env_policy = parse_policy(env_policy)
        self._exclude_secrets = exclude_secrets
        self._extra_env = dict(extra_env or {})
        build_environment(EnvPolicy.NONE, extra=self._extra_env)  # validates names and values now
        self.max_command_timeout_ms = max_command_timeout_ms
        self.default_timeout_ms = min(default_timeout_ms, max_command_timeout_ms)
        self._memory_cap = output_memory_cap
        self._shell = shell
        self._kill_grace_s = kill_grace_ms / 1000
        self._background_grace_s = background_grace_ms / 1000
        self._grep_backend = grep_backend
        self._rg: str | None = None
        self._rg_checked = False
        self._running: set[_Run] = set()
        self._starting: set[asyncio.Future[tuple[asyncio.SubprocessTransport, _Run]]] = set()
        self._spill_dir = _SpillDir()
        self._command_wrapper: CommandWrapper | None = None
        self._end_group_on_exit = False

    def set_command_wrapper(self, wrapper: CommandWrapper | None, *, end_group_on_exit: bool = False) -> None:
        """Have every command start through ``wrapper(argv, cwd, env) -> (argv, env, fds)``: how a
        sandbox (:mod:`ra.env.sandbox`) puts ``bwrap`` in front of the shell while process groups,
        the cookie, timeouts and output capture stay this class's. One wrapper at a time: a second
        one would wrap the first's argv unknowingly, so it is refused (``None`` removes it).

        ``end_group_on_exit``: SIGKILL the command's process group as soon as its first process
        exits, instead of leaving background processes be. For a wrapper whose own process stays
        in the group holding the output (bwrap's PID 1, whose death ends the sandbox)."""
        if wrapper is not None and self._command_wrapper is not None:
            raise ValueError("this environment's commands are already wrapped (by a sandbox?)")
        self._command_wrapper = wrapper
        self._end_group_on_exit = wrapper is not None and end_group_on_exit

    # -- lifecycle and metadata ----------------------------------------------------------------

    async def initialize(self) -> None:
        _require_dir(self._root, "working directory")
        self._ripgrep()

    async def cleanup(self) -> None:
        """Stop running commands and delete spill files (their paths stop working after this)."""
        await self.terminate_all()
        self._spill_dir.remove()

    def working_directory(self) -> str:
        return self._root

    def resolve(self, path: str) -> str:
        if not isinstance(path, str):
            raise TypeError(f"path must be a string, got {type(path).__name__}")
        if not path:
            raise ValueError("path must not be empty")
        if "\0" in path:
            raise ValueError(f"path contains a NUL byte: {path!r}")
        return os.path.normpath(os.path.join(self._root, os.path.expanduser(path)))

    def platform(self) -> str:
        return {"win32": "windows", "cygwin": "windows"}.get(sys.platform, sys.platform.rstrip("0123456789"))

    def os_version(self) -> str:
        return f"{_platform.system()} {_platform.release()}"

    # -- files ---------------------------------------------------------------------------------

    async def read_file(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        full = self.resolve(path)
        if offset is not None and offset < 1:
            raise ValueError(f"offset is a 1-based line number, got {offset}")
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        size = _stat_file(full).st_size
        if size > _THREAD_THRESHOLD:
            return await asyncio.to_thread(_read_numbered, full, offset or 1, limit or DEFAULT_READ_LIMIT)
        return _read_numbered(full, offset or 1, limit or DEFAULT_READ_LIMIT)

    async def file_size(self, path: str) -> int:
        """The size of a regular file in bytes (for tools that bound what they read whole)."""
        return _stat_file(self.resolve(path)).st_size

    async def read_bytes(self, path: str) -> bytes:
        full = self.resolve(path)
        if _stat_file(full).st_size > _THREAD_THRESHOLD:
            return await asyncio.to_thread(_read_all, full)
        return _read_all(full)

    async def write_file(self, path: str, content: str | bytes) -> None:
        full = self.resolve(path)
        if isinstance(content, str):
            data = content.encode("utf-8")
        elif isinstance(content, bytes | bytearray | memoryview):
            data = bytes(content)
        else:
            raise TypeError(f"content must be str or bytes, got {type(content).__name__}")
        if len(data) > _THREAD_THRESHOLD:
            await asyncio.to_thread(_write_all, full, data)
        else:
            _write_all(full, data)

    async def delete_file(self, path: str) -> None:
        _delete(self.resolve(path))

    async def move_file(self, source: str, destination: str) -> None:
        # A rename is instant, but across file systems it becomes a copy: use a worker thread.
        await asyncio.to_thread(_move, self.resolve(source), self.resolve(destination))

    async def file_exists(self, path: str) -> bool:
        return _kind(self.resolve(path)) is not None

    async def is_directory(self, path: str) -> bool:
        return _kind(self.resolve(path)) == "dir"

    async def list_directory(self, path: str, depth: int = 1) -> list[DirEntry]:
        full = self.resolve(path)
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        _require_dir(full, "directory")
        return await asyncio.to_thread(_list_tree, full, depth)

    # -- search --------------------------------------------------------------------------------

    async def grep(self, pattern: str, path: str | None = None, options: GrepOptions | None = None) -> str:
        options = options or GrepOptions()
        validate_options(options)
        if not pattern:
            raise ValueError("pattern must not be empty")
        target = self.resolve(path or ".")
        kind = _kind(target)
        if kind is None:
            raise FileNotFoundError(f"Path not found: {target}")
        if kind == "other":
            raise _not_regular(target, os.stat(target).st_mode)
        if kind == "file" and is_binary_file(target):
            return await asyncio.to_thread(binary_file_result, pattern, target, options)
        rg = self._ripgrep()
        if rg is not None:
            return await grep_ripgrep(rg, pattern, target, options, target_is_dir=kind == "dir")
        return await asyncio.to_thread(grep_python, pattern, target, options)

    async def glob(self, pattern: str, path: str | None = None) -> list[str]:
        base = self.resolve(path or ".")
        _require_dir(base, "directory")
        return await asyncio.to_thread(glob_files, pattern, base)

    def _ripgrep(self) -> str | None:
        if not self._rg_checked:
            self._rg_checked = True
            if self._grep_backend != "python":
                self._rg = find_ripgrep()
                if self._rg is None and self._grep_backend == "ripgrep":
                    raise FileNotFoundError("grep_backend='ripgrep' but no rg executable was found")
        return self._rg

    # -- commands ------------------------------------------------------------------------------

    def effective_timeout_ms(self, timeout_ms: int | None) -> int:
        """The timeout a call gets: the default when unset, never above the maximum."""
        return effective_timeout_ms(timeout_ms, self.default_timeout_ms, self.max_command_timeout_ms)

    async def exec_command(
        self,
        command: str,
        timeout_ms: int | None = None,
        working_dir: str | None = None,
        env_vars: dict[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        if not isinstance(command, str) or not command.strip():
            raise ValueError("command must be a non-empty string")
        timeout = self.effective_timeout_ms(timeout_ms)
        cwd = self._root if working_dir is None else self.resolve(working_dir)
        _require_dir(cwd, "working_dir")
        cookie = new_cookie()
        env = build_environment(
            self._env_policy,
            exclude_secrets=self._exclude_secrets,
            extra={**self._extra_env, **(env_vars or {}), COOKIE_VAR: cookie},
        )
        capture = _OutputCapture(self._memory_cap, self._spill_dir, on_output)
        protocol = _CaptureProtocol(capture)
        started = time.monotonic()
        # The start runs as a task of its own, shielded: the process exists as soon as it forks,
        # but asyncio returns only once the pipes are connected. Cancelled in between, asyncio
        # would kill the shell alone and then wait, for as long as they live, for its children to
        # close the pipes; and terminate_all() would not see the command yet.
        starting = asyncio.ensure_future(self._start(command, cwd, env, cookie, protocol))
        self._starting.add(starting)
        starting.add_done_callback(self._starting.discard)
        try:
            transport, run = await asyncio.shield(starting)
        except asyncio.CancelledError:
            await self._abandon_start(starting)
            capture.close()
            raise
        try:
            if not await _wait_event(protocol.exited, timeout / 1000) and not run.aborted:
                run.timed_out = True
                await run.stop(self._kill_grace_s)
            if run.stop_task is not None:
                await run.stop(self._kill_grace_s)  # wait for a stop terminate_all began
            await _wait_event(protocol.exited, 5.0)
            if self._end_group_on_exit and run.stop_task is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(run.pgid, signal.SIGKILL)
            if not await _wait_event(protocol.pipes_closed, self._background_grace_s):
                if run.stop_task is None:
                    run.background_stopped = True
                    await run.stop(self._kill_grace_s)
                # Whatever still holds the pipes escaped even the cookie (a fresh environment
                # and a new session): stop reading rather than wait for it.
                await _wait_event(protocol.pipes_closed, 0.5)
        except BaseException:
            run.kill_now()
            # Let the child watcher reap the leader before the transport is closed: closing an
            # unreaped transport polls the process itself and races the watcher.
            with contextlib.suppress(BaseException):
                await _wait_event(protocol.exited, 1.0)
            raise
        finally:
            self._running.discard(run)
            transport.close()
            protocol.pipes.close()
            capture.close()
        duration_ms = int((time.monotonic() - started) * 1000)
        returncode = transport.get_returncode()
        if returncode is None:
            exit_code = -1
        elif returncode < 0:
            exit_code = 128 - returncode  # the shell's convention: 128 + signal number
        else:
            exit_code = returncode
        stdout, stderr = capture.text(0), capture.text(1)
        if run.timed_out:
            stdout = _append_note(stdout, timeout_message(timeout))
        if run.background_stopped:
            stderr = _append_note(stderr, _BACKGROUND_NOTE)
        return ExecResult(
            stdout=stdout,
            stderr=stderr,
            exit_code=exit_code,
            timed_out=run.timed_out,
            duration_ms=duration_ms,
            full_output_path=capture.spill_path,
            total_bytes=capture.total,
            aborted=run.aborted,
        )

    async def _start(
        self, command: str, cwd: str, env: dict[str, str], cookie: str, protocol: _CaptureProtocol
    ) -> tuple[asyncio.SubprocessTransport, _Run]:
        """Start the command and register it as running (so terminate_all() reaches it)."""
        loop = asyncio.get_running_loop()
        argv: list[str] = [self._shell, "-c", command]
        fds: tuple[int, ...] = ()
        if self._command_wrapper is not None:
            argv, env, fds = self._command_wrapper(argv, cwd, env)
        try:
            stdout, stderr = protocol.pipes.open()
            try:
                transport, _ = await loop.subprocess_exec(
                    lambda: protocol,
                    *argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=stdout,
                    stderr=stderr,
                    cwd=cwd,
                    env=env,
                    start_new_session=True,
                    pass_fds=fds,
                )
            except BaseException:
                protocol.pipes.close()
                raise
        finally:
            for fd in fds:
                os.close(fd)
        protocol.pipes.started(loop)
        run = _Run(transport.get_pid(), cookie, protocol)
        self._running.add(run)
        return transport, run

    async def _abandon_start(self, starting: asyncio.Future[tuple[asyncio.SubprocessTransport, _Run]]) -> None:
        """The call was cancelled while its command was starting: let the start finish (a few
        loop iterations), then kill the command's whole tree at once, as for any cancelled call."""
        try:
            await asyncio.wait({starting}, timeout=5.0)
        finally:
            if not starting.done():
                starting.cancel()  # asyncio then kills the shell, the most it can do
            elif not starting.cancelled() and starting.exception() is None:
                transport, run = starting.result()
                run.kill_now()
                with contextlib.suppress(BaseException):
                    await _wait_event(run.protocol.exited, 1.0)
                self._running.discard(run)
                transport.close()
                run.protocol.pipes.close()

    async def terminate_all(self) -> None:
        if self._starting:
            # Commands still starting are registered as soon as their start completes.
            await asyncio.wait(set(self._starting), timeout=5.0)
        runs = list(self._running)
        for run in runs:
            run.aborted = True
        if runs:
            await asyncio.gather(*(run.stop(self._kill_grace_s) for run in runs))


# ---------------------------------------------------------------------------------------------
# file helpers (blocking; small ones run inline, big ones in a worker thread)


def _append_note(text: str, note: str) -> str:
    if not text:
        return note
    return f"{text}{'' if text.endswith(chr(10)) else chr(10)}{note}"


def _kind(full: str) -> str | None:
    """ "file", "dir", "other", or None when nothing is there (symlinks followed)."""
    try:
        mode = os.stat(full).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return "other"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def _require_dir(full: str, what: str) -> None:
    kind = _kind(full)
    if kind is None:
        raise FileNotFoundError(f"{what} not found: {full}")
    if kind != "dir":
        raise NotADirectoryError(f"{what} is not a directory: {full}")


def _delete(full: str) -> None:
    if os.path.isdir(full) and not os.path.islink(full):
        raise IsADirectoryError(f"Is a directory, not a file: {full}")
    try:
        os.unlink(full)
    except FileNotFoundError:
        raise FileNotFoundError(f"File not found: {full}") from None
    except PermissionError:
        raise PermissionError(f"Permission denied: {full}") from None


def _move(src: str, dst: str) -> None:
    if not os.path.lexists(src):
        raise FileNotFoundError(f"File not found: {src}")
    if os.path.isdir(dst) and not os.path.islink(dst):
        raise IsADirectoryError(f"Destination is an existing directory: {dst}")
    _make_parents(dst)
    try:
        os.replace(src, dst)
    except PermissionError:
        raise PermissionError(f"Permission denied moving {src} to {dst}") from None
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        shutil.move(src, dst)


_SPECIAL_FILES = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def _not_regular(full: str, mode: int) -> ValueError:
    what = _SPECIAL_FILES.get(stat.S_IFMT(mode), "not a regular file")
    return ValueError(
        f"{full} is {what}, not a regular file: reading or writing it could wait forever or never end, "
        "so file tools do not open it"
    )


def _stat_file(full: str) -> os.stat_result:
    try:
        st = os.stat(full)
    except FileNotFoundError:
        raise FileNotFoundError(f"File not found: {full}") from None
    except NotADirectoryError:
        raise FileNotFoundError(f"File not found (a parent is not a directory): {full}") from None
    except PermissionError:
        raise PermissionError(f"Permission denied: {full}") from None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"Is a directory, not a file: {full}")
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(full, st.st_mode)
    return st


def _open_for_read(full: str) -> BinaryIO:
    """Open without ever blocking: O_NONBLOCK makes opening a FIFO return at once (instead of
    waiting for a writer), and the type is checked on the open descriptor, so a file swapped for
    a FIFO after a stat is caught too."""
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FileNotFoundError(f"File not found: {full}") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"Is a directory, not a file: {full}") from None
    except PermissionError:
        raise PermissionError(f"Permission denied: {full}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(f"Is a directory, not a file: {full}")
        raise _not_regular(full, mode)
    return os.fdopen(fd, "rb")


def _read_all(full: str) -> bytes:
    with _open_for_read(full) as fh:
        try:
            return fh.read()
        except BlockingIOError:  # a kernel pseudo-file with nothing to read now (/proc/kmsg)
            raise ValueError(f"{full} has nothing to read now and reading it would wait") from None


def _read_numbered(full: str, offset: int, limit: int) -> str:
    try:
        return _read_numbered_lines(full, offset, limit)
    except BlockingIOError:  # a kernel pseudo-file with nothing to read now (/proc/kmsg)
        raise ValueError(f"{full} has nothing to read now and reading it would wait") from None


def _read_numbered_lines(full: str, offset: int, limit: int) -> str:
    with _open_for_read(full) as fh:
        if b"\0" in (fh.read(BINARY_CHECK_BYTES) or b""):
            raise ValueError(f"{full} is a binary file; it cannot be shown as text")
        fh.seek(0)
        picked: list[tuple[int, bytes, int]] = []
        seen = 0
        for number, (raw, cut) in enumerate(_bounded_lines(fh), 1):
            seen = number
            if number < offset:
                continue
            if number >= offset + limit:
                break
            picked.append((number, raw, cut))
    return format_numbered(full, picked, seen, offset)


def format_numbered(full: str, picked: list[tuple[int, bytes, int]], seen: int, offset: int) -> str:
    """The ``N | text`` lines of ``picked`` (line number, its bytes, how many bytes were cut: -1
    past :data:`MAX_LINE_SKIP_BYTES`); ``seen`` is how many lines were read in all. Shared with
    environments that read files some other way (:mod:`ra.env.ssh`), so they show files alike."""
    if not picked:
        if seen == 0 and offset == 1:
            return ""
        raise ValueError(f"offset {offset} is past the end of {full}, which has {seen} lines")
    width = len(str(picked[-1][0]))
    out: list[str] = []
    for number, raw, cut in picked:
        text = raw.decode("utf-8", errors="replace").rstrip("\n")
        if text.endswith("\r"):
            text = text[:-1]
        if number == 1 and text.startswith("\ufeff"):
            text = text[1:]
        if cut == -1:
            mib = MAX_LINE_SKIP_BYTES // (1024 * 1024)
            text += f" [... line cut here: it goes on past {mib} MiB; nothing after it can be read with read_file]"
        elif cut:
            text += f" [... line cut here: {cut:,} more bytes]"
        out.append(f"{number:>{width}} | {text}")
    return "\n".join(out)


#: The most of one line :meth:`LocalExecutionEnvironment.read_file` holds: the rest of a longer
#: line is skipped (and counted), so one line of gigabytes - a minified bundle, a file with a
#: sparse hole - never sits in memory whole, whether it is shown or only passed over.
MAX_LINE_BYTES = 256 * 1024
#: How far past :data:`MAX_LINE_BYTES` a line is followed to its end; a longer one ends the
#: reading there (the lines after it are not reachable by line number: a time bound).
MAX_LINE_SKIP_BYTES = 64 * 1024 * 1024


def _bounded_lines(fh: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """Each line of ``fh`` as (its first MAX_LINE_BYTES bytes, how many bytes of it were cut);
    a cut of -1 is a line longer than MAX_LINE_SKIP_BYTES, and the last one yielded."""
    while True:
        raw = fh.readline(MAX_LINE_BYTES)
        if not raw:
            return
        if raw.endswith(b"\n") or len(raw) < MAX_LINE_BYTES:
            yield raw, 0
            continue
        cut = 0
        while True:
            rest = fh.readline(MAX_LINE_BYTES)
            if not rest:
                break
            if rest.endswith(b"\n"):
                cut += len(rest) - 1
                raw += b"\n"
                break
            cut += len(rest)
            if cut > MAX_LINE_SKIP_BYTES:
                yield raw, -1
                return
        yield raw, cut


def _make_parents(full: str) -> None:
    parent = os.path.dirname(full)
    try:
        os.makedirs(parent, exist_ok=True)
    except FileExistsError:
        raise NotADirectoryError(f"Cannot create {full}: a parent path is an existing file") from None
    except NotADirectoryError:
        raise NotADirectoryError(f"Cannot create {full}: a parent path is an existing file") from None
    except PermissionError:
        raise PermissionError(f"Permission denied creating directory {parent}") from None


def _write_all(full: str, data: bytes) -> None:
    """Write ``data`` to ``full`` so that a failure leaves the old content whole.

    The bytes go to a temporary file beside the target, which then replaces it in one rename: a
    full disk, a quota or a killed process mid-write loses nothing (an in-place write would have
    truncated the file first). The new file takes the old one's permissions and owner. A symlink is
    written through to its target; a file ra may not write is refused, as an in-place write would
    be. Where a rename cannot keep what the file is - it has other hard links, another owner (and
    ra is not root), or its directory cannot be written - it is written in place. Extended
    attributes and ACLs are not carried over to the new file.
    """
    if os.path.isdir(full):
        raise IsADirectoryError(f"Is a directory, cannot write a file there: {full}")
    _make_parents(full)
    target = os.path.realpath(full) if os.path.islink(full) else full
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    except PermissionError:
        raise PermissionError(f"Permission denied: {full}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise _not_regular(full, st.st_mode)
    if st is None:
        _write_new(full, target, data)
        return
    if not os.access(target, os.W_OK):
        # A read-only file stays read-only: a rename would replace it anyway.
        raise PermissionError(f"Permission denied: {full}")
    euid = os.geteuid()
    if (
        st.st_nlink > 1
        or (st.st_uid != euid and euid != 0)  # the new file could not keep its owner
        or not os.access(os.path.dirname(target) or ".", os.W_OK)
    ):
        _write_in_place(full, target, data)
        return
    directory, name = os.path.split(target)
    try:
        # The temporary name stays well under NAME_MAX (255 bytes) whatever the file's name.
        short = name.encode("utf-8", "surrogateescape")[:100].decode("utf-8", "ignore")
        fd, temp = tempfile.mkstemp(prefix=f".{short}.", suffix=".ra-tmp", dir=directory or ".")
    except PermissionError:
        raise PermissionError(f"Permission denied: {full}") from None
    try:
        fill_like(fd, data, st)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _write_new(full: str, target: str, data: bytes) -> None:
    """A file that did not exist: created (the umask applies), and removed again if the write
    fails, which leaves the directory as it was."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except FileExistsError:  # it appeared since the check
        _write_in_place(full, target, data)
        return
    except PermissionError:
        raise PermissionError(f"Permission denied: {full}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(target)
        raise


def fill_like(fd: int, data: bytes, st: os.stat_result) -> None:
    """Write ``data`` to the new file ``fd`` (and close it), then give it the owner and mode of the
    file it is to replace (``st``), so that an edit through a temporary file and a rename keeps
    them. The owner first: a chown clears the setuid and setgid bits the chmod then restores."""
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        if (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
            with contextlib.suppress(PermissionError):
                os.fchown(fh.fileno(), st.st_uid, st.st_gid)
        os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))


def fill_in_place(fd: int, shown: str, data: bytes) -> None:
    """Replace the content of the file just opened as ``fd`` (non-blocking, so that a FIFO that
    appeared since the checks failed the open at once) with ``data``, and close it: refused
    unless it is a regular file (a device or a FIFO opened by then is never written)."""
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(shown, mode)
    os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as fh:
        fh.truncate(0)
        fh.write(data)


def _write_in_place(full: str, target: str, data: bytes) -> None:
    try:
        # O_NONBLOCK: a FIFO that appeared since the check fails at once (ENXIO) instead of waiting.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except PermissionError:
        raise PermissionError(f"Permission denied: {full}") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise _not_regular(full, stat.S_IFIFO) from None
        raise
    fill_in_place(fd, full, data)


def _list_tree(root: str, depth: int) -> list[DirEntry]:
    out: list[DirEntry] = []

    def visit(directory: str, prefix: str, level: int) -> None:
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if entry.name == ".git":
                continue
            try:
                is_dir = entry.is_dir()
                size = None if is_dir else entry.stat().st_size
            except OSError:
                is_dir, size = False, None
            name = prefix + entry.name
            out.append(DirEntry(name=name, is_dir=is_dir, size=size))
            if is_dir and level < depth and not entry.is_symlink():
                visit(entry.path, name + "/", level + 1)

    visit(root, "", 1)
    return out

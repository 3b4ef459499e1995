"""A conformance kit for execution environments: the checks every ``ExecutionEnvironment`` must pass.

ra's tools and its agent loop trust an environment's contract - typed errors, a numbered
``read_file``, commands whose whole process tree dies on a timeout or an abort, calls that never
block the event loop. ``LocalExecutionEnvironment`` keeps it today; a sandbox (bwrap), an SSH host
or a container has to keep the same promises, or the agent hangs, leaks processes or misreads a
failure. This module states the contract as executable checks, so an environment's author runs
the same suite ra runs against its own environments::

    # tests/test_my_environment.py
    from pathlib import Path

    from ra.env import ExecutionEnvironment
    from ra.env.testing import EnvironmentConformance


    class TestMyEnvironment(EnvironmentConformance):
        kill_grace_s = 0.3  # the SIGTERM grace make_environment configures
        output_memory_cap = 64 * 1024  # the in-memory output cap it configures (None: skip that check)

        async def make_environment(self, root: Path) -> ExecutionEnvironment:
            return MyEnvironment(workspace=root, kill_grace_ms=300, output_memory_cap=64 * 1024)

pytest collects every ``test_*`` method (no plugin needed: the methods are plain functions that run
their own event loop); ``unittest`` does too when ``unittest.TestCase`` is mixed in. To leave out a
check your environment deliberately does not meet, set it to ``None`` in the subclass and say why.

How each check runs: a fresh empty temporary directory is made and handed to
``make_environment``, whose working directory must start out empty (it need not be that directory:
a remote environment may map it to a directory of its own). Then ``initialize()``, the check, and
``cleanup()``. Everything the check needs is set up *through the environment* - files with
``write_file``, FIFOs and timestamps with ``exec_command`` - so a remote environment is tested as
it is, not through the host's file system. Every wait is bounded: each call has its own time limit,
the check has ``check_timeout_s``, and the event loop runs in a worker thread watched from the
calling thread, so even an environment that blocks the loop (a synchronous ``open`` of a FIFO)
fails the check instead of hanging the test run.

The contract, as checked here (paths relative to ``working_directory()``):

* **metadata** - the Protocol's methods exist; ``working_directory()`` and ``resolve()`` give
  absolute paths; ``resolve`` of a relative path lies under the working directory and file
  operations and commands agree on it.
* **files** - ``write_file`` creates parent directories and replaces content exactly (text as
  UTF-8, bytes as given, line endings kept); ``read_bytes`` returns exactly what was written, also
  above several megabytes; ``read_file`` gives ``N | text`` lines, honours ``offset``/``limit``,
  gives ``""`` for an empty file and ``ValueError`` for a binary one. A missing path is
  ``FileNotFoundError`` (naming the path) for every operation that needs one; a directory where a
  file is needed is ``IsADirectoryError``, a file where a directory is needed
  ``NotADirectoryError``; bad arguments (empty path, NUL byte, offset 0) are ``ValueError``.
  ``list_directory`` lists names relative to the listed directory to the given depth;
  ``move_file`` creates parents and replaces; ``delete_file`` removes.
* **special files** - a FIFO is refused with ``ValueError`` at once, for reading and writing, and
  ``grep`` over a directory holding one still answers.
* **search** - ``grep`` output lines are ``path:line:text`` (``path`` in files-with-matches mode,
  ``path:count`` in count mode), no match is empty output, case and glob filters work, a bad regex
  is ``ValueError``; ``glob`` returns matching paths, newest first, ``**`` recursive.
* **commands** - stdout and stderr apart, exit codes (128+N for death by signal N), the working
  directory and ``working_dir``, ``env_vars`` arrive (even with secret-looking names: the host
  chose to pass them), secret-looking variables of the host's environment do *not*, stdin is empty,
  output streams to ``on_output`` while the command runs (UTF-8 never split; a failing callback
  loses nothing), concurrent commands are independent, bad arguments are ``ValueError``.
* **stopping** - a timeout reports ``timed_out``, keeps the partial output, sends SIGTERM first
  (a trap runs) and SIGKILL after the grace; a timeout, ``terminate_all()``, ``cleanup()`` and
  cancelling the call each stop the *whole* tree - a background child, a child that left with
  ``setsid``, and a ``setsid`` child that ignores SIGTERM - before they return (an abort reports
  ``aborted``; a cancelled call raises ``CancelledError``); a command that exits while background
  children hold its output returns anyway and those children are stopped; the environment keeps
  working after ``terminate_all()``.
* **output cap** (when ``output_memory_cap`` is set) - past the cap the result keeps the head and
  the tail within about the cap, ``total_bytes`` counts everything, and ``full_output_path`` holds
  the whole output, readable and searchable *through the environment* (the shell tool tells the
  model to read it with ``read_file``).

Processes are watched by heartbeat: each child the kit starts appends to a file in the working
directory every 50 ms, so "stopped" means "its file stopped growing" - true in any PID namespace or
on any host. A child that was frozen (SIGSTOP) and never killed would pass; every child ends by
itself after 30 s or once the check is over (a stop file), so a failing environment leaks nothing
for long. The checks assume a POSIX shell with ``sleep``, ``printf``, ``seq``, ``touch`` and
``kill``; those that need ``setsid`` or ``mkfifo`` are skipped where they are missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
import re
import secrets
import shutil
import stat
import tempfile
import threading
import time
import unittest
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .base import ExecResult, ExecutionEnvironment, GrepOptions

__all__ = ["EnvironmentConformance"]

T = TypeVar("T")

#: Heartbeat period of the kit's child processes, and how long "stopped" must hold.
_TICK_S = 0.05
_QUIET_S = 0.2
#: How long any single non-command call may take before it counts as hung.
_CALL_S = 10.0
_NUMBERED = re.compile(r"^ *(\d+) \| (.*)$")
_GREP_LINE = re.compile(r"^(.*?):(\d+):(.*)$")
#: Names the spec says are secrets (coding-agent-loop-spec 4.2): one probe variable per suffix.
_SECRET_SUFFIXES = ("API_KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL")


def _expect(condition: object, message: str) -> None:
    """Fail with ``message``: explicit, so ``python -O`` and modules pytest does not rewrite keep it."""
    if not condition:
        raise AssertionError(message)


def _expect_equal(actual: object, expected: object, what: str) -> None:
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


def _skip(reason: str) -> None:
    # unittest's SkipTest is honoured by pytest as well, so the kit needs no test framework.
    raise unittest.SkipTest(reason)


async def _within(awaitable: Awaitable[T], seconds: float, what: str) -> T:
    """``await awaitable``, failing the check if it takes longer than ``seconds`` (a TimeoutError
    the environment raises itself passes through as it is)."""
    async with asyncio.timeout(seconds) as limit:
        try:
            return await awaitable
        except TimeoutError:
            if not limit.expired():
                raise
    raise AssertionError(f"{what} did not finish within {seconds:g} s")


async def _raises(
    expected: type[BaseException] | tuple[type[BaseException], ...], awaitable: Awaitable[Any], what: str
) -> BaseException:
    """The exception ``awaitable`` raised, which must be one of ``expected`` (and come in time)."""
    names = "/".join(e.__name__ for e in (expected if isinstance(expected, tuple) else (expected,)))
    try:
        value = await _within(awaitable, _CALL_S, f"{what} (expected {names})")
    except expected as exc:
        return exc
    except AssertionError:
        raise
    except Exception as exc:
        raise AssertionError(f"{what}: expected {names}, got {type(exc).__name__}: {exc}") from exc
    raise AssertionError(f"{what}: expected {names}, but it returned {value!r}")


def _numbered(text: str, what: str) -> list[tuple[int, str]]:
    """``read_file`` output as (line number, text) pairs."""
    if not text:
        return []
    pairs = []
    for line in text.split("\n"):
        match = _NUMBERED.match(line)
        _expect(match is not None, f"{what}: line {line!r} is not in the 'N | text' form")
        assert match is not None
        pairs.append((int(match[1]), match[2].rstrip("\r")))
    return pairs


@contextlib.contextmanager
def _host_environment(values: dict[str, str]) -> Iterator[None]:
    """Set variables in this process's environment for the duration, then restore it."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def _release_fifo(path: str) -> None:
    """Open the other end of a host FIFO once, so a thread blocked opening it goes on."""
    try:
        if not stat.S_ISFIFO(os.stat(path).st_mode):
            return
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    except OSError:
        return
    os.close(fd)


@dataclass(frozen=True, slots=True)
class _Ticker:
    """A background child of a command that appends to ``file`` every 50 ms while it lives."""

    file: str
    label: str
    new_session: bool = False
    ignore_term: bool = False


@dataclass
class _Case:
    """One check's environment and helpers."""

    env: ExecutionEnvironment
    kill_grace_s: float
    tag: str = field(default_factory=lambda: secrets.token_hex(4))
    on_hang: list[Callable[[], None]] = field(default_factory=list)
    uses_tickers: bool = False

    @property
    def stop_file(self) -> str:
        return f"ra-conformance-stop-{self.tag}"

    def command_bound(self, timeout_ms: int) -> float:
        """The longest a command may take: its timeout, the kill grace, and slack."""
        return timeout_ms / 1000 + self.kill_grace_s + _CALL_S

    async def run(self, command: str, timeout_ms: int = 10_000, **kwargs: Any) -> ExecResult:
        result = await _within(
            self.env.exec_command(command, timeout_ms=timeout_ms, **kwargs),
            self.command_bound(timeout_ms),
            f"exec_command({command!r}, timeout_ms={timeout_ms})",
        )
        _expect(isinstance(result, ExecResult), f"exec_command must return an ExecResult, got {result!r}")
        return result

    async def call(self, awaitable: Awaitable[T], what: str) -> T:
        return await _within(awaitable, _CALL_S, what)

    async def write(self, path: str, content: str | bytes) -> None:
        await self.call(self.env.write_file(path, content), f"write_file({path!r})")

    async def require_tool(self, name: str) -> None:
        result = await self.run(f"command -v {name}")
        if result.exit_code != 0:
            _skip(f"{name} is not available in this environment")

    # -- heartbeat children --------------------------------------------------------------------

    def tickers(self, *kinds: str) -> list[_Ticker]:
        """Children of the kinds named: "group", "setsid", "setsid-ignoring-term"."""
        made = {
            "group": _Ticker(f"tick-{self.tag}-group", "a background child in the command's process group"),
            "setsid": _Ticker(f"tick-{self.tag}-setsid", "a child that left with setsid", new_session=True),
            "setsid-ignoring-term": _Ticker(
                f"tick-{self.tag}-stubborn",
                "a setsid child that ignores SIGTERM",
                new_session=True,
                ignore_term=True,
            ),
        }
        return [made[kind] for kind in kinds]

    def start_script(self, tickers: list[_Ticker]) -> str:
        """Shell lines that start ``tickers`` and return once every one of them has ticked."""
        self.uses_tickers = True
        lines = []
        for t in tickers:
            loop = (
                f'i=0; while [ "$i" -lt 600 ] && [ ! -e {self.stop_file} ]; '
                f"do echo . >> {t.file}; i=$((i+1)); sleep {_TICK_S}; done"
            )
            body = f'trap "" TERM; {loop}' if t.ignore_term else loop
            lines.append(f"{'setsid ' if t.new_session else ''}sh -c '{body}' &")
        waiting = " || ".join(f"[ ! -s {t.file} ]" for t in tickers)
        lines.append(f"while {waiting}; do sleep 0.02; done")
        return "\n".join(lines)

    async def size(self, path: str) -> int:
        try:
            return len(await self.call(self.env.read_bytes(path), f"read_bytes({path!r})"))
        except FileNotFoundError:
            return 0

    async def wait_ticking(self, tickers: list[_Ticker], seconds: float = 10.0) -> None:
        deadline = time.monotonic() + seconds
        while True:
            sizes = [await self.size(t.file) for t in tickers]
            if all(sizes):
                return
            if time.monotonic() > deadline:
                missing = [t.label for t, s in zip(tickers, sizes, strict=True) if not s]
                raise AssertionError(f"the command's children did not start within {seconds:g} s: {missing}")
            await asyncio.sleep(0.02)

    async def expect_stopped(self, tickers: list[_Ticker], after: str) -> None:
        """Fail unless every ticker has stopped ticking (each must have ticked before)."""
        before = [await self.size(t.file) for t in tickers]
        for t, size in zip(tickers, before, strict=True):
            _expect(size > 0, f"{t.label} never ran (its heartbeat file {t.file} is empty)")
        await asyncio.sleep(_QUIET_S)
        after_sizes = [await self.size(t.file) for t in tickers]
        alive = [t.label for t, b, a in zip(tickers, before, after_sizes, strict=True) if a > b]
        _expect(
            not alive,
            f"after {after}, these processes of the command were still running: {'; '.join(alive)}",
        )

    async def release(self) -> None:
        """Tell any surviving ticker to exit (the check is over)."""
        if self.uses_tickers:
            with contextlib.suppress(Exception):
                await _within(self.env.write_file(self.stop_file, ""), _CALL_S, "writing the stop file")


Check = Callable[[_Case], Awaitable[None]]


class EnvironmentConformance:
    """Subclass it (the subclass's name must start with ``Test`` for pytest to collect it) and
    implement :meth:`make_environment`. Class attributes describe how the environment was made."""

    #: Seconds between SIGTERM and SIGKILL in the environment ``make_environment`` builds; the
    #: checks wait that long for a stop. Configure a short one (0.2-0.5 s) to keep the suite fast.
    kill_grace_s: float = 2.0
    #: The in-memory output cap in bytes that ``make_environment`` configures; ``None`` skips the
    #: spill check. Configure a small one (64 KiB): the check writes four times the cap.
    output_memory_cap: int | None = None
    #: The bound of one check's body. Setup and cleanup have bounds of their own, and a check whose
    #: thread is still busy after 1.5 times this (plus a second) is failed and abandoned.
    check_timeout_s: float = 60.0

    async def make_environment(self, root: Path) -> ExecutionEnvironment:
        """A new environment whose working directory starts out empty; ``root`` is a fresh empty
        local directory it may use (and that is removed after the check)."""
        raise NotImplementedError("subclasses of EnvironmentConformance implement make_environment()")

    # -- running one check ---------------------------------------------------------------------

    def _run(self, check: Check) -> None:
        """Run ``check`` on a new environment in a new event loop in a worker thread, and fail -
        without waiting for it - if that thread has not finished in time."""
        outcome: list[BaseException] = []
        hooks: list[Callable[[], None]] = []
        root = tempfile.mkdtemp(prefix="ra-conformance-")

        def worker() -> None:
            try:
                asyncio.run(self._session(check, Path(root), hooks))
            except BaseException as exc:  # handed to the calling thread
                outcome.append(exc)

        thread = threading.Thread(target=worker, name=f"ra-conformance-{check.__name__}", daemon=True)
        thread.start()
        watchdog_s = self.check_timeout_s * 1.5 + 1
        thread.join(watchdog_s)
        try:
            if thread.is_alive():
                for release in hooks:
                    with contextlib.suppress(Exception):
                        release()
                thread.join(5)
                raise AssertionError(
                    f"{check.__name__}: still running after {watchdog_s:g} s; a call blocked the event "
                    "loop's thread (a synchronous wait inside an async method?)"
                )
            if outcome:
                raise outcome[0]
        finally:
            if not thread.is_alive():
                shutil.rmtree(root, ignore_errors=True)

    async def _session(self, check: Check, root: Path, hooks: list[Callable[[], None]]) -> None:
        env = await _within(self.make_environment(root), _CALL_S * 3, "make_environment()")
        case = _Case(env, self.kill_grace_s, on_hang=hooks)
        try:
            await _within(env.initialize(), _CALL_S * 3, "initialize()")
            await _within(check(case), self.check_timeout_s, check.__name__)
        finally:
            await case.release()
            await _within(env.cleanup(), self.kill_grace_s + _CALL_S * 3, "cleanup()")

    # ==========================================================================================
    # metadata and paths

    def test_metadata(self) -> None:
        async def metadata(c: _Case) -> None:
            env = c.env
            _expect(
                isinstance(env, ExecutionEnvironment),
                f"{type(env).__name__} lacks methods of the ExecutionEnvironment Protocol",
            )
            wd = env.working_directory()
            _expect(isinstance(wd, str) and posixpath.isabs(wd), f"working_directory() is not absolute: {wd!r}")
            for name in ("platform", "os_version"):
                value = getattr(env, name)()
                _expect(isinstance(value, str) and value.strip(), f"{name}() must be a non-empty string: {value!r}")

        self._run(metadata)

    def test_relative_paths_resolve_against_the_working_directory(self) -> None:
        async def paths(c: _Case) -> None:
            env = c.env
            wd = env.working_directory()
            _expect_equal(env.resolve("."), wd, "resolve('.')")
            full = env.resolve("paths/f.txt")
            _expect(posixpath.isabs(full), f"resolve() must give an absolute path, got {full!r}")
            _expect(full.startswith(wd.rstrip("/") + "/"), f"resolve('paths/f.txt') = {full!r} is not under {wd!r}")
            _expect_equal(env.resolve("paths/../paths/./f.txt"), full, "resolve() of a path with '..' and '.'")
            await c.write("paths/f.txt", "where am I\n")
            _expect_equal(
                await c.call(env.read_bytes(full), "read_bytes(absolute)"), b"where am I\n", "by absolute path"
            )
            _expect_equal((await c.run("cat paths/f.txt")).stdout, "where am I\n", "a command in the working directory")
            for workdir in ("paths", full.rpartition("/")[0]):
                result = await c.run("cat f.txt", working_dir=workdir)
                _expect_equal(result.stdout, "where am I\n", f"a command with working_dir={workdir!r}")

        self._run(paths)

    def test_bad_paths_are_value_errors(self) -> None:
        async def bad_paths(c: _Case) -> None:
            for path in ("", "a\0b"):
                await _raises(ValueError, c.env.read_file(path), f"read_file({path!r})")
                await _raises(ValueError, c.env.write_file(path, "x"), f"write_file({path!r})")

        self._run(bad_paths)

    # ==========================================================================================
    # files

    def test_text_round_trip_and_numbered_lines(self) -> None:
        async def text(c: _Case) -> None:
            env = c.env
            await c.write("t/a.txt", "alpha\nbeta\n")
            _expect_equal(await c.call(env.read_bytes("t/a.txt"), "read_bytes"), b"alpha\nbeta\n", "read_bytes")
            shown = await c.call(env.read_file("t/a.txt"), "read_file")
            _expect_equal(_numbered(shown, "read_file"), [(1, "alpha"), (2, "beta")], "read_file('t/a.txt')")
            await c.write("t/lines.txt", "".join(f"line {i}\n" for i in range(1, 13)))
            window = await c.call(env.read_file("t/lines.txt", 9, 3), "read_file(offset=9, limit=3)")
            _expect_equal(
                _numbered(window, "read_file"),
                [(9, "line 9"), (10, "line 10"), (11, "line 11")],
                "read_file('t/lines.txt', offset=9, limit=3)",
            )
            await c.write("t/empty.txt", "")
            _expect_equal(await c.call(env.read_file("t/empty.txt"), "read_file"), "", "read_file of an empty file")
            _expect_equal(await c.call(env.read_bytes("t/empty.txt"), "read_bytes"), b"", "read_bytes of an empty file")
            await _raises(ValueError, env.read_file("t/a.txt", 0, None), "read_file(offset=0)")
            await _raises(ValueError, env.read_file("t/a.txt", None, 0), "read_file(limit=0)")

        self._run(text)

    def test_unicode_and_line_endings_are_kept(self) -> None:
        async def unicode(c: _Case) -> None:
            content = "h\u00e9llo w\u00f6rld \u2713 \u65e5\u672c\u8a9e \U0001f389\r\nsecond\n"
            await c.write("u.txt", content)
            data = await c.call(c.env.read_bytes("u.txt"), "read_bytes")
            _expect_equal(data, content.encode("utf-8"), "read_bytes of text written as str (UTF-8, CRLF kept)")
            shown = _numbered(await c.call(c.env.read_file("u.txt"), "read_file"), "read_file")
            _expect_equal(shown, [(1, content.split("\r\n")[0]), (2, "second")], "read_file of unicode text")

        self._run(unicode)

    def test_binary_round_trip(self) -> None:
        async def binary(c: _Case) -> None:
            data = bytes(range(256)) * 4
            await c.write("b/blob.bin", data)
            _expect_equal(await c.call(c.env.read_bytes("b/blob.bin"), "read_bytes"), data, "read_bytes of bytes")
            await _raises(ValueError, c.env.read_file("b/blob.bin"), "read_file of a binary file")

        self._run(binary)

    def test_large_file_round_trip(self) -> None:
        async def large(c: _Case) -> None:
            count = 100_000
            content = "".join(f"{i:07d} " + "x" * 55 + "\n" for i in range(1, count + 1))  # 6.4 MB
            await c.write("large/big.txt", content)
            data = await c.call(c.env.read_bytes("large/big.txt"), "read_bytes of a large file")
            _expect(data == content.encode(), f"read_bytes of a {len(content)}-byte file returned {len(data)} bytes")
            tail = await c.call(c.env.read_file("large/big.txt", count - 1, 5), "read_file near the end")
            _expect_equal(
                [n for n, _ in _numbered(tail, "read_file")], [count - 1, count], "the last lines of a large file"
            )
            await c.write("large/big.bin", data[: 5 * 1024 * 1024])
            back = await c.call(c.env.read_bytes("large/big.bin"), "read_bytes of large bytes")
            _expect(back == data[: 5 * 1024 * 1024], "large bytes did not round-trip")

        self._run(large)

    def test_write_creates_parents_and_replaces(self) -> None:
        async def replace(c: _Case) -> None:
            env = c.env
            await c.write("w/deep/er/f.txt", "a long first version\n")
            await c.write("w/deep/er/f.txt", "short\n")
            _expect_equal(await c.call(env.read_bytes("w/deep/er/f.txt"), "read_bytes"), b"short\n", "after a rewrite")
            _expect(await c.call(env.is_directory("w/deep/er"), "is_directory"), "parent directories were not made")

        self._run(replace)

    def test_missing_paths_are_file_not_found(self) -> None:
        async def missing(c: _Case) -> None:
            env = c.env
            name = f"missing-{c.tag}.txt"
            await c.write("present.txt", "x")
            calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
                ("read_file", lambda: env.read_file(name)),
                ("read_bytes", lambda: env.read_bytes(name)),
                ("delete_file", lambda: env.delete_file(name)),
                ("move_file", lambda: env.move_file(name, "elsewhere.txt")),
                ("list_directory", lambda: env.list_directory(name)),
                ("grep", lambda: env.grep("x", name)),
                ("glob", lambda: env.glob("*.txt", name)),
                ("read_file below a missing directory", lambda: env.read_file(f"{name}/child.txt")),
            ]
            for what, start in calls:
                exc = await _raises(FileNotFoundError, start(), f"{what} of a missing path")
                _expect(name in str(exc), f"{what}: the error should name the missing path, got {str(exc)!r}")
            _expect(not await c.call(env.file_exists(name), "file_exists"), "file_exists of a missing path is True")
            _expect(not await c.call(env.is_directory(name), "is_directory"), "is_directory of a missing path is True")
            _expect(not await c.call(env.file_exists("elsewhere.txt"), "file_exists"), "a failed move created a file")

        self._run(missing)

    def test_directories_and_files_in_the_wrong_place(self) -> None:
        async def wrong_kind(c: _Case) -> None:
            env = c.env
            await c.write("d/inside.txt", "x")
            await _raises(IsADirectoryError, env.read_file("d"), "read_file of a directory")
            await _raises(IsADirectoryError, env.read_bytes("d"), "read_bytes of a directory")
            await _raises(IsADirectoryError, env.write_file("d", "x"), "write_file onto a directory")
            await _raises(IsADirectoryError, env.delete_file("d"), "delete_file of a directory")
            await _raises(NotADirectoryError, env.list_directory("d/inside.txt"), "list_directory of a file")
            _expect_equal(await c.call(env.read_bytes("d/inside.txt"), "read_bytes"), b"x", "after the refusals")

        self._run(wrong_kind)

    def test_exists_delete_and_move(self) -> None:
        async def moves(c: _Case) -> None:
            env = c.env
            await c.write("m/a.txt", "A")
            await c.write("m/b.txt", "B")
            _expect(await c.call(env.file_exists("m/a.txt"), "file_exists"), "file_exists of a file")
            _expect(await c.call(env.file_exists("m"), "file_exists"), "file_exists of a directory")
            _expect(await c.call(env.is_directory("m"), "is_directory"), "is_directory of a directory")
            _expect(not await c.call(env.is_directory("m/a.txt"), "is_directory"), "is_directory of a file")
            await c.call(env.move_file("m/a.txt", "m/new/dir/a.txt"), "move_file")
            _expect(not await c.call(env.file_exists("m/a.txt"), "file_exists"), "the source remains after a move")
            _expect_equal(await c.call(env.read_bytes("m/new/dir/a.txt"), "read_bytes"), b"A", "the moved file")
            await c.call(env.move_file("m/b.txt", "m/new/dir/a.txt"), "move_file onto a file")
            _expect_equal(await c.call(env.read_bytes("m/new/dir/a.txt"), "read_bytes"), b"B", "a replacing move")
            await c.call(env.delete_file("m/new/dir/a.txt"), "delete_file")
            _expect(not await c.call(env.file_exists("m/new/dir/a.txt"), "file_exists"), "a deleted file exists")
            await _raises(FileNotFoundError, env.delete_file("m/new/dir/a.txt"), "deleting it again")

        self._run(moves)

    def test_list_directory(self) -> None:
        async def listing(c: _Case) -> None:
            env = c.env
            await c.write("ls/top.txt", "abc")
            await c.write("ls/sub/inner.txt", "12345")
            await c.write("ls/sub/deeper/x.txt", "x")
            one = await c.call(env.list_directory("ls", 1), "list_directory(depth=1)")
            _expect_equal(sorted((e.name, e.is_dir) for e in one), [("sub", True), ("top.txt", False)], "depth 1")
            two = await c.call(env.list_directory("ls", 2), "list_directory(depth=2)")
            _expect_equal(
                sorted((e.name, e.is_dir) for e in two),
                [("sub", True), ("sub/deeper", True), ("sub/inner.txt", False), ("top.txt", False)],
                "depth 2 (names relative to the listed directory, '/'-separated)",
            )
            sizes = {e.name: e.size for e in two if not e.is_dir}
            for name, size in (("top.txt", 3), ("sub/inner.txt", 5)):
                _expect(sizes[name] in (None, size), f"the size of {name} is {sizes[name]}, not {size}")

        self._run(listing)

    def test_special_files_are_refused_without_blocking(self) -> None:
        async def fifo(c: _Case) -> None:
            env = c.env
            made = await c.run("mkdir -p fifo-dir && mkfifo fifo-dir/pipe")
            if made.exit_code != 0:
                _skip(f"cannot make a FIFO in this environment: {made.output.strip()}")
            # If a call blocks the loop's thread anyway, the watchdog opens the FIFO's other end.
            c.on_hang.append(lambda: _release_fifo(env.resolve("fifo-dir/pipe")))
            await _raises(ValueError, env.read_file("fifo-dir/pipe"), "read_file of a FIFO")
            await _raises(ValueError, env.read_bytes("fifo-dir/pipe"), "read_bytes of a FIFO")
            await _raises(ValueError, env.write_file("fifo-dir/pipe", "data"), "write_file to a FIFO")
            await _raises(ValueError, env.grep("needle", "fifo-dir/pipe"), "grep of a FIFO")
            await c.write("fifo-dir/a.txt", "needle\n")
            found = await c.call(env.grep("needle", "fifo-dir"), "grep of a directory holding a FIFO")
            _expect("a.txt" in found, f"grep beside a FIFO missed the match: {found!r}")

        self._run(fifo)

    # ==========================================================================================
    # search

    def test_grep(self) -> None:
        async def grep(c: _Case) -> None:
            env = c.env
            await c.write("g/a.txt", "alpha\nneedle one\nbeta\n")
            await c.write("g/sub/b.py", "x = 'NEEDLE two'\n")
            await c.write("g/c.md", "nothing here\n")
            a, b = env.resolve("g/a.txt"), env.resolve("g/sub/b.py")

            def hits(output: str) -> set[tuple[str, int, str]]:
                found = set()
                for line in output.splitlines():
                    match = _GREP_LINE.match(line)
                    _expect(match is not None, f"grep output line {line!r} is not 'path:line:text'")
                    assert match is not None
                    found.add((env.resolve(match[1]), int(match[2]), match[3]))
                return found

            out = await c.call(env.grep("needle", "g"), "grep")
            _expect_equal(hits(out), {(a, 2, "needle one")}, "grep 'needle' (content mode)")
            out = await c.call(env.grep("needle", "g", GrepOptions(case_insensitive=True)), "grep -i")
            _expect_equal(hits(out), {(a, 2, "needle one"), (b, 1, "x = 'NEEDLE two'")}, "grep, case-insensitive")
            options = GrepOptions(case_insensitive=True, glob_filter="*.py")
            out = await c.call(env.grep("needle", "g", options), "grep with a glob filter")
            _expect_equal(hits(out), {(b, 1, "x = 'NEEDLE two'")}, "grep with glob_filter='*.py'")
            out = await c.call(env.grep("needle", "g/a.txt"), "grep of one file")
            _expect_equal(hits(out), {(a, 2, "needle one")}, "grep of a single file")
            options = GrepOptions(case_insensitive=True, output_mode="files_with_matches")
            out = await c.call(env.grep("needle", "g", options), "grep files_with_matches")
            _expect_equal({env.resolve(p) for p in out.splitlines()}, {a, b}, "files_with_matches")
            out = await c.call(env.grep("a", "g/a.txt", GrepOptions(output_mode="count")), "grep count")
            path, _, number = out.strip().rpartition(":")
            _expect_equal((env.resolve(path), number), (a, "2"), f"count mode ({out!r})")
            out = await c.call(env.grep("no-such-text-anywhere", "g"), "grep without a match")
            _expect_equal(out.strip(), "", "grep without a match")
            await _raises(ValueError, env.grep("unclosed(", "g"), "grep with an invalid regex")

        self._run(grep)

    def test_glob(self) -> None:
        async def glob(c: _Case) -> None:
            env = c.env
            for name in ("gl/old.py", "gl/pkg/new.py", "gl/pkg/notes.txt"):
                await c.write(name, "x")
            touched = await c.run("touch -t 200001010000 gl/old.py")
            _expect_equal(touched.exit_code, 0, f"touch -t failed: {touched.output}")
            old, new = env.resolve("gl/old.py"), env.resolve("gl/pkg/new.py")
            found = await c.call(env.glob("*.py", "gl"), "glob")
            _expect_equal([env.resolve(p) for p in found], [old], "glob('*.py', 'gl')")
            found = await c.call(env.glob("**/*.py", "gl"), "glob **")
            _expect_equal([env.resolve(p) for p in found], [new, old], "glob('**/*.py', 'gl'), newest first")
            found = await c.call(env.glob("gl/pkg/*"), "glob from the working directory")
            _expect_equal(
                sorted(env.resolve(p) for p in found),
                sorted([new, env.resolve("gl/pkg/notes.txt")]),
                "glob('gl/pkg/*')",
            )
            _expect_equal(await c.call(env.glob("*.nothing", "gl"), "glob"), [], "glob without a match")

        self._run(glob)

    # ==========================================================================================
    # commands

    def test_streams_exit_code_and_counts(self) -> None:
        async def basics(c: _Case) -> None:
            result = await c.run("echo out; echo err >&2; echo more; exit 3")
            _expect_equal(result.stdout, "out\nmore\n", "stdout")
            _expect_equal(result.stderr, "err\n", "stderr")
            _expect_equal(result.exit_code, 3, "exit_code")
            _expect(not result.timed_out and not result.aborted, f"a normal exit reported {result!r}")
            _expect_equal(result.total_bytes, len("out\nmore\nerr\n"), "total_bytes")
            _expect(result.duration_ms >= 0, f"duration_ms {result.duration_ms}")
            _expect_equal((await c.run("true")).exit_code, 0, "exit code of true")
            _expect_equal((await c.run("kill -KILL $$")).exit_code, 137, "exit code after SIGKILL (128 + 9)")

        self._run(basics)

    def test_bad_command_arguments_are_value_errors(self) -> None:
        async def bad(c: _Case) -> None:
            await _raises(ValueError, c.env.exec_command(""), "exec_command('')")
            await _raises(ValueError, c.env.exec_command("   "), "exec_command of blanks")
            await _raises(ValueError, c.env.exec_command("true", timeout_ms=0), "exec_command(timeout_ms=0)")
            await _raises(ValueError, c.env.exec_command("true", timeout_ms=-5), "exec_command(timeout_ms=-5)")
            await _raises(
                (FileNotFoundError, NotADirectoryError),
                c.env.exec_command("true", working_dir=f"no-dir-{c.tag}"),
                "exec_command with a missing working_dir",
            )

        self._run(bad)

    def test_stdin_is_empty(self) -> None:
        async def stdin(c: _Case) -> None:
            result = await c.run("cat; echo after", timeout_ms=5000)
            _expect(not result.timed_out, "a command reading stdin waited for input until its timeout")
            _expect_equal(result.stdout, "after\n", "stdout of 'cat; echo after'")

        self._run(stdin)

    def test_env_vars_are_passed_and_host_secrets_are_not(self) -> None:
        async def variables(c: _Case) -> None:
            probes = {f"RA_CONFORMANCE_{c.tag.upper()}_{suffix}": secrets.token_hex(8) for suffix in _SECRET_SUFFIXES}
            with _host_environment(probes):
                dump = await c.run("env")
            leaked = [name for name, value in probes.items() if value in dump.output]
            _expect(not leaked, f"secret-looking variables of the host reached the command: {leaked}")
            given = {"RA_CONFORMANCE_GREETING": "hello, world", "RA_CONFORMANCE_GIVEN_TOKEN": "passed-on-purpose"}
            result = await c.run(
                'printf "%s|%s" "$RA_CONFORMANCE_GREETING" "$RA_CONFORMANCE_GIVEN_TOKEN"', env_vars=given
            )
            _expect_equal(result.stdout, "hello, world|passed-on-purpose", "variables passed in env_vars")

        self._run(variables)

    def test_output_streams_while_the_command_runs(self) -> None:
        async def streaming(c: _Case) -> None:
            seen: list[tuple[float, str, str]] = []
            result = await c.run(
                "echo ready; sleep 0.4; echo done; echo oops >&2",
                on_output=lambda stream, text: seen.append((time.monotonic(), stream, text)),
            )
            finished = time.monotonic()
            _expect_equal("".join(t for _, s, t in seen if s == "stdout"), "ready\ndone\n", "streamed stdout")
            _expect_equal("".join(t for _, s, t in seen if s == "stderr"), "oops\n", "streamed stderr")
            _expect_equal(result.stdout, "ready\ndone\n", "stdout")
            first = next((when for when, _, text in seen if "ready" in text), finished)
            _expect(finished - first > 0.2, "on_output got 'ready' only when the command ended, not while it ran")

            chunks: list[str] = []
            result = await c.run(
                r"printf '\303'; sleep 0.2; printf '\251t\303\251\n'", on_output=lambda s, t: chunks.append(t)
            )
            _expect_equal("".join(chunks), "\u00e9t\u00e9\n", "UTF-8 split across reads, as streamed")
            _expect_equal(result.stdout, "\u00e9t\u00e9\n", "UTF-8 split across reads, in the result")

            def broken(stream: str, text: str) -> None:
                raise RuntimeError("observer bug")

            result = await c.run("echo one; sleep 0.1; echo two", on_output=broken)
            _expect_equal(result.stdout, "one\ntwo\n", "stdout when the on_output callback raises")

        self._run(streaming)

    def test_concurrent_commands_are_independent(self) -> None:
        async def concurrent(c: _Case) -> None:
            results = await asyncio.gather(*(c.run(f"sleep 0.{3 - i}; echo {i}; exit {i}") for i in range(3)))
            _expect_equal([(r.stdout, r.exit_code) for r in results], [(f"{i}\n", i) for i in range(3)], "results")

        self._run(concurrent)

    def test_output_under_the_cap_is_complete(self) -> None:
        async def small(c: _Case) -> None:
            expected = "".join(f"{i}\n" for i in range(1, 2001))
            result = await c.run("seq 1 2000")
            _expect_equal(result.stdout, expected, "the output of seq 1 2000")
            _expect_equal(result.total_bytes, len(expected), "total_bytes")
            if self.output_memory_cap is None or self.output_memory_cap > len(expected):
                _expect(result.full_output_path is None, "a small output was spilled to a file")

        self._run(small)

    def test_output_beyond_the_cap_is_spilled_and_readable(self) -> None:
        cap = self.output_memory_cap
        if cap is None:
            _skip("output_memory_cap is not set on the conformance class")

        async def spill(c: _Case) -> None:
            assert cap is not None
            count, size = 0, 0
            while size <= 4 * cap + 1000:
                count += 1
                size += len(str(count)) + 1
            expected = "".join(f"{i}\n" for i in range(1, count + 1))
            result = await c.run(f"seq 1 {count}", timeout_ms=60_000)
            _expect_equal(result.exit_code, 0, "exit code")
            _expect_equal(result.total_bytes, len(expected), "total_bytes of an output beyond the cap")
            kept = len(result.stdout.encode()) + len(result.stderr.encode())
            _expect(kept <= cap + 4096, f"{kept} bytes of output were kept in memory, cap {cap}")
            _expect(result.stdout.startswith(expected[:64]), "the head of the output was not kept")
            _expect(result.stdout.endswith(expected[-64:]), "the tail of the output was not kept")
            path = result.full_output_path
            _expect(isinstance(path, str) and path, f"full_output_path is {path!r} for an output beyond the cap")
            assert path is not None
            data = await c.call(c.env.read_bytes(path), f"read_bytes({path!r}) through the environment")
            _expect(data == expected.encode(), f"the spill file holds {len(data)} bytes, not the {size} printed")
            middle = count // 2
            shown = await c.call(c.env.read_file(path, middle, 1), "read_file of the spill file")
            _expect_equal(_numbered(shown, "read_file"), [(middle, str(middle))], "read_file of the spill file")
            found = await c.call(c.env.grep(f"^{middle}$", path), "grep of the spill file")
            _expect(f":{middle}:{middle}" in found, f"grep of the spill file did not find line {middle}: {found!r}")

        self._run(spill)

    # ==========================================================================================
    # stopping commands

    def test_timeout_keeps_partial_output_and_sends_sigterm_first(self) -> None:
        async def timeout(c: _Case) -> None:
            script = (
                'trap "echo got-term; T=1" TERM; echo started; while :; do [ -n "$T" ] && echo tick; sleep 0.05; done'
            )
            started = time.monotonic()
            result = await c.run(script, timeout_ms=500)
            elapsed = time.monotonic() - started
            _expect(result.timed_out, f"timed_out is not set after a timeout: {result!r}")
            _expect(not result.aborted, "a timeout reported aborted=True")
            _expect(result.stdout.startswith("started\n"), f"the partial output was lost: {result.stdout!r}")
            _expect("got-term" in result.stdout, "the command never saw SIGTERM before it was killed")
            if c.kill_grace_s >= 0.2:
                _expect("tick" in result.stdout, "SIGKILL came without a grace period after SIGTERM")
            _expect(result.exit_code != 0, "a killed command reported exit code 0")
            _expect(
                elapsed < 0.5 + c.kill_grace_s + 5,
                f"a 500 ms timeout with a {c.kill_grace_s:g} s grace took {elapsed:.1f} s",
            )

        self._run(timeout)

    def test_timeout_stops_the_whole_tree(self) -> None:
        async def tree(c: _Case) -> None:
            await c.require_tool("setsid")
            tickers = c.tickers("group", "setsid", "setsid-ignoring-term")
            result = await c.run(f"{c.start_script(tickers)}\necho started\nsleep 30", timeout_ms=1000)
            _expect("started" in result.stdout, f"the children had not started before the timeout: {result!r}")
            _expect(result.timed_out, "timed_out is not set after a timeout")
            await c.expect_stopped(tickers, "the timeout")

        self._run(tree)

    def _stop_while_running(self, how: str) -> Check:
        async def stop(c: _Case) -> None:
            await c.require_tool("setsid")
            tickers = c.tickers("group", "setsid", "setsid-ignoring-term")
            task = asyncio.ensure_future(c.env.exec_command(f"{c.start_script(tickers)}\nsleep 30", timeout_ms=60_000))
            try:
                await c.wait_ticking(tickers)
                if how == "cancel":
                    task.cancel()
                    await asyncio.wait({task}, timeout=c.kill_grace_s + _CALL_S)
                    _expect(task.done(), "the cancelled exec_command call did not end")
                    _expect(task.cancelled(), f"a cancelled exec_command must raise CancelledError, got {task!r}")
                else:
                    stopper = c.env.terminate_all() if how == "terminate_all" else c.env.cleanup()
                    await _within(stopper, c.kill_grace_s + _CALL_S, f"{how}()")
                    result = await _within(asyncio.shield(task), _CALL_S, f"the command after {how}()")
                    _expect(result.aborted, f"a command stopped by {how}() must report aborted=True: {result!r}")
                    _expect(not result.timed_out, f"a command stopped by {how}() reported timed_out")
                await c.expect_stopped(tickers, f"{how}")
            finally:
                if not task.done():
                    task.cancel()
                    await asyncio.wait({task}, timeout=c.kill_grace_s + _CALL_S)
            if how != "cleanup":
                after = await c.run("echo still usable")
                _expect_equal(after.stdout, "still usable\n", f"a command after {how}")

        stop.__name__ = f"stop_by_{how}"
        return stop

    def test_terminate_all_stops_the_whole_tree(self) -> None:
        self._run(self._stop_while_running("terminate_all"))

    def test_cancelling_the_call_stops_the_whole_tree(self) -> None:
        self._run(self._stop_while_running("cancel"))

    def test_cleanup_stops_running_commands(self) -> None:
        self._run(self._stop_while_running("cleanup"))

    def test_terminate_all_with_nothing_running(self) -> None:
        async def idle(c: _Case) -> None:
            await _within(c.env.terminate_all(), _CALL_S, "terminate_all() with nothing running")
            _expect_equal((await c.run("echo ok")).stdout, "ok\n", "a command after terminate_all()")

        self._run(idle)

    def test_background_children_holding_the_output_do_not_hang_the_call(self) -> None:
        async def background(c: _Case) -> None:
            await c.require_tool("setsid")
            tickers = c.tickers("group", "setsid")
            started = time.monotonic()
            result = await c.run(f"{c.start_script(tickers)}\necho done", timeout_ms=30_000)
            elapsed = time.monotonic() - started
            _expect(not result.timed_out, "the call waited for background children until its timeout")
            _expect_equal((result.exit_code, result.stdout), (0, "done\n"), "exit code and stdout")
            _expect(elapsed < c.kill_grace_s + 10, f"the call took {elapsed:.1f} s after the command exited")
            await c.expect_stopped(tickers, "the command exited with children holding its output")

        self._run(background)

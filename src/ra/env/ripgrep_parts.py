"""ripgrep over a directory in parts, side by side, its output read back in path order.

grep keeps the first ``max_results`` matches in path order, so it asks ripgrep for path order
(``--sort path``), which lets ra stop ripgrep once it has enough. But ripgrep sorts on one thread
only: a search that must read the whole tree (few matches, or every one asked for) used one core
of the machine. A directory is therefore searched here in parts: its entries, in ripgrep's own
order (names compared as bytes), are cut into runs, and each run gets a ripgrep of its own over
the whole directory that skips the other runs' entries (an anchored ``--glob '!/name'`` for each).
Everything else - ignore files, hidden files, the caller's own glob, binary files - applies
exactly as to a single search of the directory, and the parts' outputs, one after the other, are
that search's output.

There is a part a core. A search that keeps more than :data:`FEW_WANTED` results starts them all
at once; a smaller one starts the first, and the others once its first output is not enough (or
:data:`START_OTHERS_AFTER` has passed without any). The part whose turn it is is read as it
comes; those after it are read ahead into memory, up to about :data:`READ_AHEAD` each (past that their
ripgrep waits on a full pipe). A search that has enough stops every ripgrep at once, so the first
matches come as fast as from one sorted search, and a search of everything uses every core.

The entries must be nameable in a glob rule: a directory whose names are not UTF-8 or hold a
control character, or with more than :data:`MAX_ENTRIES` of them, is searched in one part, as
is one reached through a symbolic link. An entry that appears while the parts run has no rule,
so every part would search it: the caller asks :meth:`Split.changed` afterwards and searches
again in one part.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .pipes import PipeReader, make_pipe

__all__ = [
    "FEW_WANTED",
    "MAX_ENTRIES",
    "MAX_PARTS",
    "READ_AHEAD",
    "Output",
    "Split",
    "cores",
    "run_in_order",
    "split_directory",
]

#: A directory with more entries than this is searched in one part (each part's command carries
#: a rule for every entry the others search).
MAX_ENTRIES = 200
#: The most parts, whatever the number of cores.
MAX_PARTS = 8
#: The longest the first part runs alone. A capped search usually has what it wants from the first
#: part's first output (3-4 ms here) and is spared starting the others (1.5 ms each on two
#: cores); the others start as soon as that output is not enough, or after this long without any.
START_OTHERS_AFTER = 0.005
#: The most results for which the first part runs alone at first; a search that keeps more is
#: likely to read past the first part, and starts them all at once.
FEW_WANTED = 1000
#: How much of a later part's output is held in memory before its ripgrep is left to wait.
READ_AHEAD = 8 * 1024 * 1024
#: Characters that mean something in a glob; escaped with a backslash in a rule. A space too:
#: ripgrep reads a glob as a line of a gitignore file, whose trailing spaces are dropped.
_GLOB_SPECIAL = frozenset("\\*?[]{} ")


class Output(Protocol):
    """What reads ripgrep's output: :class:`ra.env.search._RgHeading` and its kin."""

    def feed(self, chunk: bytes) -> bool:
        """Take the next piece; False once nothing more is wanted."""
        ...

    def finish(self) -> None:
        """One process's output has ended."""
        ...


def cores() -> int:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Split:
    """How a search of :attr:`directory` is cut: each part's glob rules (``["--glob", "!/b",
    ...]``, in path order) and the entries they were written for."""

    directory: str
    names: tuple[bytes, ...]
    rules: tuple[tuple[str, ...], ...]

    def changed(self) -> bool:
        """Whether the directory's entries are no longer those the rules were written for: an
        entry that appeared since has no rule, and every part searched it."""
        return _entries(self.directory) != self.names


def split_directory(directory: str, count: int) -> Split | None:
    """The parts, up to ``count``, of a search of ``directory``. None where one search it is:
    ``count`` below 2, fewer than two entries that are not hidden, names that cannot be written
    as a rule, or a directory reached through a symbolic link (ripgrep anchors rules at its
    working directory as the system resolves it, while the paths it prints keep the link)."""
    if count < 2 or os.path.realpath(directory) != directory:
        return None
    names = _entries(directory)
    if names is None:
        return None
    rules = []
    for name in names:
        try:
            text = name.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if not text.isprintable():
            return None
        rules.append("!/" + "".join("\\" + c if c in _GLOB_SPECIAL else c for c in text))
    # Parts of about as many entries each, counting those ripgrep will look into (hidden ones
    # are skipped, unless a glob names them; they go with the entry before them).
    shown = [i for i, name in enumerate(names) if not name.startswith(b".")]
    count = min(count, len(shown))
    if count < 2:
        return None
    starts = [0, *(shown[len(shown) * k // count] for k in range(1, count)), len(names)]
    parts = []
    for start, end in itertools.pairwise(starts):
        others = rules[:start] + rules[end:]
        parts.append(tuple(arg for rule in others for arg in ("--glob", rule)))
    return Split(directory, names, tuple(parts))


def _entries(directory: str) -> tuple[bytes, ...] | None:
    """The directory's entry names in ripgrep's order (as bytes); None past :data:`MAX_ENTRIES`
    or where it cannot be read."""
    names: list[bytes] = []
    try:
        with os.scandir(os.fsencode(directory)) as entries:
            for entry in entries:
                if len(names) == MAX_ENTRIES:
                    return None
                names.append(entry.name)
    except OSError:
        return None
    return tuple(sorted(names))


@dataclass
class _Part:
    """One ripgrep process of the search and what has been read of its output."""

    args: list[str]
    proc: asyncio.subprocess.Process | None = None
    reader: PipeReader | None = None
    stderr: asyncio.Future[bytes] | None = None
    ahead: list[bytes] = field(default_factory=list)
    ahead_bytes: int = 0
    ended: bool = False  # its output has been read to the end
    reading: asyncio.Task[None] | None = None


async def run_in_order(
    commands: Sequence[Sequence[str]], cwd: str, output: Output, *, wanted: int
) -> tuple[bool, list[tuple[int, str]]]:
    """Run ``commands`` (ripgrep over consecutive parts of a tree) side by side and give
    ``output`` their outputs one after the other (``finish`` after each); stop them all once
    ``output`` wants no more. ``wanted``: the most results the search keeps - past
    :data:`FEW_WANTED` every part starts at once. A part that cannot start beside the others (too
    many open files) starts in its turn. Returns whether it stopped them early, and each
    process's exit status and stderr."""
    parts = [_Part(list(args)) for args in commands]
    stopped = False
    done = False
    start_others = asyncio.Event()
    if wanted > FEW_WANTED:
        start_others.set()
    later: asyncio.Task[None] | None = None
    try:
        await _start(parts[0], cwd)
        if len(parts) > 1:
            later = asyncio.ensure_future(_start_later(parts[1:], cwd, start_others))
        for index, part in enumerate(parts):
            if index == 1:
                assert later is not None
                start_others.set()
                await _stop(later, cancel=False)
            if part.reader is None:
                await _start_in_turn(part, parts[:index], cwd)
            assert part.reader is not None
            if part.reading is not None:
                await _stop(part.reading)
            for chunk in part.ahead:
                if not output.feed(chunk):
                    stopped = True
                    break
            part.ahead = []
            while not stopped and not part.ended:
                chunk = await part.reader.read()
                if not chunk:
                    part.ended = True
                    part.reader.close()  # its descriptor free for a part that waits to start
                elif not output.feed(chunk):
                    stopped = True
                elif not index:
                    start_others.set()  # output came, and the search wants more
            if stopped:
                break
            output.finish()
        done = True
    finally:
        results = await _ended(parts, later, kill=stopped or not done)
    return stopped, results


async def _ended(parts: list[_Part], later: asyncio.Task[None] | None, *, kill: bool) -> list[tuple[int, str]]:
    """:func:`_end` after ``later`` (the task starting the other parts) is stopped, carried through
    to the end even when the caller is cancelled meanwhile (the cancellation is raised after):
    every reader closed, every process stopped and waited for."""

    async def end() -> list[tuple[int, str]]:
        if later is not None:
            await _stop(later, quiet=True)
        return await _end(parts, kill=kill)

    ending = asyncio.ensure_future(end())
    cancelled = False
    while not ending.done():
        try:
            await asyncio.wait([ending])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return ending.result()


async def _start_later(parts: list[_Part], cwd: str, start_others: asyncio.Event) -> None:
    """The parts after the first, each read ahead: once the first has given output that was not
    enough, or has ended, or :data:`START_OTHERS_AFTER` has passed. One that cannot start now
    (too many open files) and those after it are left for their turn."""
    # asyncio.wait, not wait_for: Python 3.11's wait_for can return when it is cancelled just as
    # what it waits for is done, and this task would start the parts of a cancelled search.
    waiting = asyncio.ensure_future(start_others.wait())
    try:
        await asyncio.wait([waiting], timeout=START_OTHERS_AFTER)
    finally:
        waiting.cancel()
    for part in parts:
        try:
            await _start(part, cwd)
        except OSError:
            return
        part.reading = asyncio.ensure_future(_read_ahead(part))


async def _start_in_turn(part: _Part, earlier: list[_Part], cwd: str) -> None:
    """Start a part that could not start beside the others. Should the descriptors still be short,
    once more after those of the parts before it are all closed: a pipe is closed by the event
    loop a turn after its end was read."""
    try:
        await _start(part, cwd)
    except OSError:
        ending = [p.stderr for p in earlier if p.stderr is not None]
        if ending:
            await asyncio.wait(ending)
        await asyncio.sleep(0)
        await _start(part, cwd)


async def _stop(task: asyncio.Task[None], *, quiet: bool = False, cancel: bool = True) -> None:
    """Cancel a task of this module (or, ``cancel=False``, let it finish) and wait for it to end -
    with ``asyncio.wait``, never ``await task``: a cancellation of the caller while it awaits a
    task goes to that task, and one that ends anyway (starting a process, say) would lose it. The
    task's own error is raised (unless ``quiet``: the caller is already ending on an error of its
    own)."""
    if not task.done():
        if cancel:
            task.cancel()
        await asyncio.wait([task])
    if task.cancelled():
        return
    error = task.exception()
    if error is not None and not quiet:
        raise error


async def _start(part: _Part, cwd: str) -> None:
    read_fd, write_fd = make_pipe()
    try:
        part.proc = await asyncio.create_subprocess_exec(
            *part.args,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=asyncio.subprocess.PIPE,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    assert part.proc.stderr is not None
    part.stderr = asyncio.ensure_future(part.proc.stderr.read())
    part.reader = PipeReader(read_fd)


async def _read_ahead(part: _Part) -> None:
    """A later part's output into memory until it ends or holds :data:`READ_AHEAD` bytes (and the
    read that crossed it: a read takes up to ``pipes.READ_SIZE``)."""
    assert part.reader is not None
    while part.ahead_bytes < READ_AHEAD:
        chunk = await part.reader.read()
        if not chunk:
            part.ended = True
            part.reader.close()
            return
        part.ahead.append(chunk)
        part.ahead_bytes += len(chunk)


async def _end(parts: list[_Part], *, kill: bool) -> list[tuple[int, str]]:
    """Stop reading, stop the processes (``kill``: at once, as ripgrep is not waited for when
    the search stopped early or failed) and collect how each ended."""
    for part in parts:
        if part.reading is not None:
            await _stop(part.reading, quiet=True)
        if part.reader is not None:
            part.reader.close()
        if kill and part.proc is not None and part.proc.returncode is None:
            # os.kill, not proc.kill(): Popen.send_signal polls first, which can reap the child
            # behind asyncio's child watcher and make it report a bogus exit status.
            with contextlib.suppress(ProcessLookupError):
                os.kill(part.proc.pid, signal.SIGKILL)
    results = []
    for part in parts:
        if part.proc is None:
            continue
        returncode = await part.proc.wait()
        assert part.stderr is not None
        results.append((returncode, (await part.stderr).decode("utf-8", errors="replace").strip()))
    return results

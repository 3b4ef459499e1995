"""The remote side of the SSH environment: the shell scripts it runs there, the channel objects
that receive a command's output, and a line reader for files read over SFTP.

Everything sent to the remote shell is a fixed script plus quoted arguments (``"$1"``...): no
value is ever interpolated into shell code.
"""

from __future__ import annotations

import asyncio
import shlex
import signal
import stat
from collections.abc import Sequence
from typing import Any

from ..base import GrepOptions
from ..local import MAX_LINE_BYTES, MAX_LINE_SKIP_BYTES, _OutputCapture

_CHUNK = 256 * 1024
#: Output of a grep without ripgrep is sorted before it is shown: at most this much is read.
_GREP_FALLBACK_CAP = 64 * 1024 * 1024


class SshConnectionError(ConnectionError):
    """The host cannot be reached, refused us, or the connection broke (an ``OSError``, so the
    tools report it as they report any failed file or command call)."""


def _asyncssh() -> Any:
    try:
        import asyncssh
    except ImportError:
        raise ImportError("the SSH execution environment needs asyncssh: pip install 'ra-agent[ssh]'") from None
    return asyncssh


# ---------------------------------------------------------------------------------------------
# remote scripts (POSIX sh; arguments are passed as "$1"...; nothing is interpolated)

#: Start a command: print the marker and the PID (which sshd made a session and group leader),
#: then replace ourselves with the command under a fresh environment. The variables come on stdin,
#: shell-quoted (``'NAME=value' ...``), not on the command line, which other users of the remote
#: can read in its process table; the command itself then gets an empty stdin.
_LAUNCH = (
    'printf "%s%s\\n" "$1" "$$"; cd -- "$2" || exit 126; shift 2; vars=$(cat); '
    'eval "exec env -i -- $vars \\"\\$@\\"" </dev/null'
)

#: What the environment needs to know about the remote, fields ended by NUL, then ``env -0``.
_PROBE = (
    'printf "%s\\0" "$(uname -s)" "$(uname -r)" "$HOME" "$(command -v bash || command -v sh)" '
    '"$(command -v "$1")" "$(grep -qsP x /dev/null; echo $?)" "$(id -u)" "$(id -G)"; '
    "env -0 2>/dev/null || cat /proc/$$/environ"
)

#: Stop process trees: "$1" is the grace in 50 ms ticks, then pairs of (PGID or "-", cookie). The
#: processes are those of the groups and those whose environment holds a cookie (``/proc``).
_STOP = r"""
ticks=$1; shift; pairs="$*"; groups=""
set -- $pairs
while [ $# -ge 2 ]; do [ "$1" != - ] && groups="$groups $1"; shift 2; done
scan() {
  set -- $pairs
  while [ $# -ge 2 ]; do
    if [ -d /proc/self ]; then
      [ "$1" != - ] && grep -lsE "^[0-9]+ \(.*\) [^ZX] [0-9]+ $1 " /proc/[0-9]*/stat
      grep -lsxzF "RA_PROCESS_COOKIE=$2" /proc/[0-9]*/environ
    elif [ "$1" != - ] && kill -0 -- "-$1" 2>/dev/null; then echo "/proc/$1/"; fi
    shift 2
  done | sed -n 's#^/proc/\([0-9][0-9]*\)/.*#\1#p' | grep -vx "$$" | sort -un | tr '\n' ' '
}
sig() {
  s=$1; shift
  for g in $groups; do kill -s "$s" -- "-$g" 2>/dev/null; done
  [ $# -gt 0 ] && kill -s "$s" "$@" 2>/dev/null
}
seen=""; i=0
sig STOP
while [ $i -lt 20 ]; do now=$(scan); [ "$now" = "$seen" ] && break; sig STOP $now; seen=$now; i=$((i+1)); done
sig TERM $seen; sig CONT $seen
i=0
while [ $i -lt "$ticks" ] && [ -n "$(scan)" ]; do sleep 0.05; i=$((i+1)); done
i=0
while [ $i -lt 40 ]; do now=$(scan); [ -z "$now" ] && break; sig KILL $now; sleep 0.025; i=$((i+1)); done
exit 0
"""

#: Run a program in a directory: "$1" the directory, the rest the program and its arguments.
_IN_DIR = 'cd -- "$1" || exit 126; shift; exec "$@" </dev/null'


def _line(script: str, args: Sequence[str]) -> str:
    """The command line sshd hands to the login shell: our script under /bin/sh, whatever that
    shell is (bash, zsh, fish all accept this much)."""
    return " ".join(["exec /bin/sh -c", shlex.quote(script), "ra", *(shlex.quote(a) for a in args)])


# ---------------------------------------------------------------------------------------------
# channels


class _Run:
    """One command's channel (an asyncssh session): output into the capture, the PID line, the
    exit, and how it is being stopped."""

    def __init__(self, capture: _OutputCapture, cookie: str) -> None:
        self.capture = capture
        self.cookie = cookie
        self.marker = f"ra-pid-{cookie}:".encode()
        self.pending = bytearray()
        self.pid: int | None = None
        self.pid_known = asyncio.Event()
        self.exited = asyncio.Event()
        self.closed = asyncio.Event()
        self.status: int | None = None
        self.signal: str | None = None
        self.lost: Exception | None = None
        self.timed_out = self.aborted = self.background_stopped = False
        self.stop_task: asyncio.Future[None] | None = None
        self.channel: Any = None

    # asyncssh SSHClientSession callbacks
    def connection_made(self, chan: Any) -> None:
        self.channel = chan

    def session_started(self) -> None: ...

    def data_received(self, data: bytes, datatype: int | None) -> None:
        if datatype is not None:
            self.capture.feed(1, data)
        elif self.pid is not None:
            self.capture.feed(0, data)
        else:
            self.pending += data
            start = self.pending.find(self.marker)
            end = self.pending.find(b"\n", start) if start != -1 else -1
            if end == -1:
                if len(self.pending) > 1024 * 1024:  # no marker: keep it all as output
                    self._got_pid(0, bytes(self.pending))
                return
            digits = bytes(self.pending[start + len(self.marker) : end])
            # Anything before the marker was printed by the login shell's start-up files.
            self._got_pid(int(digits) if digits.isdigit() else 0, bytes(self.pending[end + 1 :]))

    def _got_pid(self, pid: int, rest: bytes) -> None:
        self.pid, self.pending = pid, bytearray()
        self.pid_known.set()
        self.capture.feed(0, rest)

    def eof_received(self) -> bool:
        return False

    def pause_writing(self) -> None: ...

    def resume_writing(self) -> None: ...

    def xon_xoff_requested(self, client_can_do: bool) -> None: ...

    def exit_status_received(self, status: int) -> None:
        self.status = status
        self.exited.set()

    def exit_signal_received(self, signal: str, core_dumped: bool, msg: str, lang: str) -> None:
        self.signal = signal
        self.exited.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc
        self.exited.set()
        self.closed.set()
        self.pid_known.set()

    def exit_code(self) -> int:
        if self.status is not None:
            return self.status
        if self.signal is not None:
            try:
                return 128 + signal.Signals[f"SIG{self.signal}"].value
            except KeyError:
                return 255
        return -1


class _Sink(_Run):
    """A channel whose stdout goes to a callback (grep) instead of an output capture."""

    def __init__(self, on_stdout: Any) -> None:
        super().__init__(None, "")  # type: ignore[arg-type]
        self.on_stdout = on_stdout
        self.stderr = bytearray()
        self.pid = 0

    def data_received(self, data: bytes, datatype: int | None) -> None:
        if datatype is not None:
            if len(self.stderr) < 65536:
                self.stderr += data
        elif self.on_stdout(data) is False and self.channel is not None:
            self.channel.close()  # enough results: stop reading (the remote process gets SIGPIPE)


# ---------------------------------------------------------------------------------------------


async def _gather(tasks: list[asyncio.Future[None]]) -> None:
    await asyncio.gather(*(asyncio.shield(t) for t in tasks))


def _may_write(attrs: Any, uid: int, gids: Sequence[int]) -> bool:
    mode = attrs.permissions or 0
    if attrs.uid == uid:
        return bool(mode & stat.S_IWUSR)
    if attrs.gid in gids:
        return bool(mode & stat.S_IWGRP)
    return bool(mode & stat.S_IWOTH)


def _rg_args(
    rg: str, pattern: str, options: GrepOptions, binary: bool, *, json: bool = False, grouped: bool = False
) -> list[str]:
    """ripgrep's arguments, as the local environment passes them (search.grep_ripgrep); ``json``:
    content in ripgrep's JSON, for output the plain reading cannot tell (search.AmbiguousOutput);
    ``grouped``: content without context lines grouped by file (``--heading``, search._RgHeading),
    a third less to carry over the connection."""
    args = [rg, "--no-config", "--color", "never", "--no-messages", "--with-filename"]
    if options.case_insensitive:
        args.append("--ignore-case")
    if options.glob_filter:
        args += ["--glob", options.glob_filter]
    if binary:
        return [*args, "--text", "--null", "--count", "--regexp", pattern, "--"]
    if options.output_mode == "content":
        layout = "--heading" if grouped and not options.context_lines else "--no-heading"
        args += ["--sort", "path", *(["--json"] if json else ["--null", "--line-number", layout])]
        if options.context_lines:
            args += ["--context", str(options.context_lines)]
    else:
        args += ["--null", "--count" if options.output_mode == "count" else "--files-with-matches"]
    return [*args, "--regexp", pattern, "--"]


def _binary_result(path: str, records: list[bytes], mode: str) -> str:
    """What the local environment says for a binary file named on its own (search.binary_file_result)."""
    count = sum(int(r.rpartition(b"\0")[2] or 0) for r in records if b"\0" in r)
    if not count:
        return ""
    if mode == "files_with_matches":
        return path
    if mode == "count":
        return f"{path}:{count}"
    return f"{path}: binary file matches"


class _Lines:
    """Lines of a remote file read in chunks: ``readline(limit)`` as a binary file has it."""

    def __init__(self, fh: Any) -> None:
        self.fh, self.buf, self.pos, self.eof = fh, b"", 0, False

    async def _fill(self) -> bool:
        if self.eof:
            return False
        chunk = await self.fh.read(_CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.buf, self.pos = self.buf[self.pos :] + chunk, 0
        return True

    async def peek(self, size: int) -> bytes:
        while len(self.buf) - self.pos < size and await self._fill():
            pass
        return self.buf[self.pos : self.pos + size]

    async def readline(self, limit: int) -> bytes:
        while True:
            end = self.buf.find(b"\n", self.pos, self.pos + limit)
            if end != -1:
                line, self.pos = self.buf[self.pos : end + 1], end + 1
                return line
            if len(self.buf) - self.pos >= limit:
                line, self.pos = self.buf[self.pos : self.pos + limit], self.pos + limit
                return line
            if not await self._fill():
                line, self.pos = self.buf[self.pos :], len(self.buf)
                return line

    async def bounded(self) -> Any:
        """Each line as (its first MAX_LINE_BYTES bytes, bytes cut), as local's ``_bounded_lines``."""
        while True:
            raw = await self.readline(MAX_LINE_BYTES)
            if not raw:
                return
            if raw.endswith(b"\n") or len(raw) < MAX_LINE_BYTES:
                yield raw, 0
                continue
            cut = 0
            while True:
                rest = await self.readline(MAX_LINE_BYTES)
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

"""``SshExecutionEnvironment``: the ``ExecutionEnvironment`` protocol over one SSH connection
(the package docstring, :mod:`ra.env.ssh`, says what it guarantees and what differs from local)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import posixpath
import secrets
import shlex
import stat
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..base import DirEntry, ExecResult, GrepOptions, OutputCallback
from ..envvars import EnvPolicy, build_environment, parse_policy
from ..local import (
    _BACKGROUND_NOTE,
    BINARY_CHECK_BYTES,
    DEFAULT_READ_LIMIT,
    _append_note,
    _not_regular,
    _OutputCapture,
    _SpillDir,
    _wait_event,
    format_numbered,
    timeout_message,
)
from ..proctree import COOKIE_VAR, new_cookie
from ..search import (
    BINARY_SNIFF_BYTES,
    AmbiguousOutput,
    HeadingUnreadable,
    _Collector,
    _collector,
    _feed_rg_records,
    _rejoin,
    _RgHeading,
    _RgJson,
    _RgText,
    count_byte,
    decide_by_files,
    expand_braces,
    translate_glob,
    validate_options,
)
from ..timeouts import effective_timeout_ms
from .remote import (
    _GREP_FALLBACK_CAP,
    _IN_DIR,
    _LAUNCH,
    _PROBE,
    _STOP,
    SshConnectionError,
    _asyncssh,
    _binary_result,
    _gather,
    _line,
    _Lines,
    _may_write,
    _rg_args,
    _Run,
    _Sink,
)

__all__ = ["SshExecutionEnvironment"]

logger = logging.getLogger(__name__)


def _record_path(record: bytes) -> bytes:
    """The sort key of a record of grep's fallback (``path\0...``): its path only, with "/" made
    the lowest byte, so that paths sort component by component as ``rg --sort path`` sorts them
    (``sub/x`` before ``sub-x``) and a file's lines keep their order in the stable sort."""
    path = record.rpartition(b"\0")[0] if b"\0" in record else record
    return path.replace(b"/", b"\x00")


def _cannot_tell(note_path: bytes, name_path: bytes) -> bool | None:
    """A directory's note-shaped line followed by a record, read remotely: not decided here."""
    return None


class _Feed:
    """A stream's stdout callback that feeds a reader of ripgrep's output (search._RgText and its
    kin) and ends the stream once the reader has enough (:attr:`stopped`) or raises
    ``unreadable_error`` (:attr:`unreadable`: the output must be read another way)."""

    def __init__(self, reader: _RgText | _RgHeading, unreadable_error: type[Exception]) -> None:
        self.reader = reader
        self.unreadable_error = unreadable_error
        self.stopped = self.unreadable = False

    def __call__(self, chunk: bytes) -> bool:
        try:
            self.stopped = not self.reader.feed(chunk)
        except self.unreadable_error:
            self.unreadable = True
        return not (self.stopped or self.unreadable)


class SshExecutionEnvironment:
    """Runs tools against a remote host over SSH (see the module docstring for the contract).

    ``known_hosts``: a known_hosts file (or several) holding the host's key; ``None`` uses what
    ``ssh`` uses (``~/.ssh/known_hosts``, or ``UserKnownHostsFile`` from ``~/.ssh/config``).
    Host-key checking cannot be turned off: an unknown or changed key is refused. ``client_keys``:
    private key files (``None``: the SSH agent and the default ``~/.ssh/id_*``).
    ``working_directory``: absolute, or relative to the remote user's home (``"~"``, the default).
    ``env_policy``, ``exclude_secrets``, ``extra_env`` and the timeouts mean what they mean for
    :class:`~ra.env.local.LocalExecutionEnvironment`. ``ripgrep``: the remote ``rg`` command
    (``None``: always use ``grep``). ``max_sessions``: sshd's ``MaxSessions`` (10 by default);
    that many channels are used at most, so further commands wait for a free one.
    """

    #: Its paths are the remote host's: rules naming files cannot be checked here (see
    #: :func:`ra.env.base.local_paths`).
    local_paths = False

    def __init__(
        self,
        host: str,
        *,
        port: int = 22,
        username: str | None = None,
        client_keys: Sequence[str | os.PathLike[str]] | None = None,
        known_hosts: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        working_directory: str = "~",
        env_policy: EnvPolicy | str = EnvPolicy.INHERIT_ALL,
        exclude_secrets: bool = True,
        extra_env: Mapping[str, str] | None = None,
        default_timeout_ms: int = 10_000,
        max_command_timeout_ms: int = 600_000,
        output_memory_cap: int = 8 * 1024 * 1024,
        kill_grace_ms: int = 2000,
        background_grace_ms: int = 500,
        connect_timeout_s: float = 15.0,
        keepalive_interval_s: float = 15.0,
        ripgrep: str | None = "rg",
        max_sessions: int = 10,
        ssh_config: Sequence[str | os.PathLike[str]] | None = None,
    ) -> None:
        _asyncssh()  # a missing extra is an error now, not at the first call
        if not host or not isinstance(host, str):
            raise ValueError("host must be a non-empty string")
        if known_hosts is not None:
            files = [known_hosts] if isinstance(known_hosts, str | os.PathLike) else list(known_hosts)
            files = [os.path.expanduser(os.fspath(f)) for f in files]
            missing = [f for f in files if not os.path.isfile(f)]
            if missing or not files:
                raise FileNotFoundError(f"known_hosts file not found: {', '.join(missing) or '(none given)'}")
            known_hosts = files
        if default_timeout_ms < 1 or max_command_timeout_ms < 1:
            raise ValueError("command timeouts must be positive")
        if output_memory_cap < 1024:
            raise ValueError(f"output_memory_cap must be at least 1024 bytes, got {output_memory_cap}")
        if max_sessions < 4:
            raise ValueError(f"max_sessions must be at least 4 (SFTP, control and commands), got {max_sessions}")
        self._host, self._port, self._username = host, port, username
        self._client_keys = None if client_keys is None else [os.path.expanduser(os.fspath(k)) for k in client_keys]
        self._known_hosts = known_hosts
        self._ssh_config: Any = () if ssh_config is None else [os.fspath(p) for p in ssh_config]
        self._wd_setting = working_directory
        self._root: str | None = working_directory if posixpath.isabs(working_directory) else None
        self._env_policy = parse_policy(env_policy)
        self._exclude_secrets = exclude_secrets
        self._extra_env = dict(extra_env or {})
        build_environment(EnvPolicy.NONE, extra=self._extra_env)  # validates names and values now
        self.max_command_timeout_ms = max_command_timeout_ms
        self.default_timeout_ms = min(default_timeout_ms, max_command_timeout_ms)
        self._memory_cap = output_memory_cap
        self._kill_grace_s = kill_grace_ms / 1000
        self._background_grace_s = background_grace_ms / 1000
        self._connect_timeout_s = connect_timeout_s
        self._keepalive_s = keepalive_interval_s
        self._ripgrep = ripgrep
        self._max_sessions = max_sessions
        self._conn: Any = None
        self._sftp_client: Any = None
        self._connect_lock = asyncio.Lock()
        self._slots: asyncio.Semaphore | None = None
        self._control_slots: asyncio.Semaphore | None = None
        self._remote: dict[str, Any] = {}
        self._running: set[_Run] = set()
        self._starting: set[asyncio.Future[None]] = set()
        self._active = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._orphans: list[tuple[int | None, str]] = []
        self._spill_dir = _SpillDir()
        self._remote_spill: str | None = None

    def __repr__(self) -> str:
        return f"SshExecutionEnvironment({self._where()!r})"

    @property
    def ssh_destination(self) -> str:
        """``user@host:port``: where the tools run (a session record's header names it as ``ssh``)."""
        return self._where()

    def _where(self) -> str:
        return f"{self._username + '@' if self._username else ''}{self._host}:{self._port}"

    # -- connection ----------------------------------------------------------------------------

    async def _connection(self) -> Any:
        conn = self._conn
        if conn is not None and not conn.is_closed():
            return conn
        async with self._connect_lock:
            if self._conn is None or self._conn.is_closed():
                if self._conn is not None:
                    logger.warning("SSH connection to %s was lost; reconnecting", self._where())
                await self._open()
                if self._orphans:
                    orphans, self._orphans = self._orphans, []
                    with contextlib.suppress(Exception):
                        await self._kill(orphans, 0)
        return self._conn

    async def _open(self) -> None:
        asyncssh = _asyncssh()
        where = self._where()
        self._conn = self._sftp_client = None
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                conn = await asyncssh.connect(
                    self._host,
                    port=self._port,
                    username=self._username if self._username is not None else (),
                    client_keys=self._client_keys if self._client_keys is not None else (),
                    known_hosts=self._known_hosts if self._known_hosts is not None else (),
                    config=self._ssh_config,
                    send_env=None,  # nothing of this process's environment is sent, whatever ~/.ssh/config says
                    env=None,
                    agent_forwarding=False,
                    x11_forwarding=False,
                    request_pty=False,
                    connect_timeout=self._connect_timeout_s,
                    keepalive_interval=self._keepalive_s,
                    keepalive_count_max=3,
                )
                try:
                    self._slots = asyncio.Semaphore(self._max_sessions - 3)
                    self._control_slots = asyncio.Semaphore(2)
                    await self._probe(conn)
                    sftp = await conn.start_sftp_client(path_errors="surrogateescape")
                except BaseException:
                    conn.close()
                    raise
        except TimeoutError:
            raise SshConnectionError(f"could not connect to {where} within {self._connect_timeout_s:g} s") from None
        except asyncssh.HostKeyNotVerifiable as exc:
            raise SshConnectionError(
                f"the host key of {where} is not trusted ({exc.reason}): refusing to connect. Check the key's "
                "fingerprint with the host's owner, then add it to known_hosts"
            ) from None
        except asyncssh.PermissionDenied as exc:
            raise SshConnectionError(f"authentication to {where} failed: {exc.reason}") from None
        except asyncssh.Error as exc:
            raise SshConnectionError(f"SSH connection to {where} failed: {exc.reason}") from None
        except OSError as exc:
            if isinstance(exc, SshConnectionError):
                raise
            raise SshConnectionError(f"cannot connect to {where}: {exc.strerror or exc}") from None
        self._conn, self._sftp_client = conn, sftp
        root = self._root or self._absolute(self._wd_setting)
        attrs = await self._stat(root)
        if attrs is None or not stat.S_ISDIR(attrs.permissions or 0):
            conn.close()
            self._conn = None
            raise NotADirectoryError(f"working directory does not exist or is not a directory on {where}: {root}")
        self._root = root

    async def _probe(self, conn: Any) -> None:
        status, out, err = await self._control(conn, _PROBE, [self._ripgrep or "rg"], self._connect_timeout_s)
        fields = out.split(b"\0")
        if status != 0 or len(fields) < 8:
            raise SshConnectionError(f"{self._where()}: the remote shell did not answer as expected: {err[:500]!r}")
        text = [f.decode("utf-8", "surrogateescape") for f in fields]
        env = dict(item.partition("=")[::2] for item in text[8:] if "=" in item)
        # SHLVL stays: without it bash, seeing SSH_CLIENT, would source ~/.bashrc for every command.
        for name in ("_", "PWD", "OLDPWD"):
            env.pop(name, None)
        self._remote = {
            "system": text[0] or "unknown",
            "release": text[1],
            "home": text[2] or "/",
            "shell": text[3] or "/bin/sh",
            "rg": text[4] if self._ripgrep else "",
            "pcre": text[5] == "1",  # grep -P ran and found no match: PCRE is there
            "uid": int(text[6]) if text[6].isdigit() else -1,
            "gids": tuple(int(g) for g in text[7].split() if g.isdigit()),
            "env": env,
        }

    async def _control(
        self, conn: Any, script: str, args: Sequence[str], timeout: float
    ) -> tuple[int | None, bytes, bytes]:
        """Run one of our scripts to completion on its own channel."""
        assert self._control_slots is not None
        async with self._control_slots, asyncio.timeout(timeout):
            result = await conn.run(_line(script, args), check=False, encoding=None)
        return result.exit_status, result.stdout or b"", result.stderr or b""

    async def _sftp(self) -> Any:
        await self._connection()
        return self._sftp_client

    def _lost(self, exc: BaseException, doing: str) -> SshConnectionError:
        return SshConnectionError(f"the SSH connection to {self._where()} was lost {doing}: {exc}")

    @contextlib.contextmanager
    def _mapped(self, path: str, what: str = "File") -> Iterator[None]:
        """SFTP errors as the exceptions the local environment raises."""
        a = _asyncssh()
        try:
            yield
        except (a.SFTPNoSuchFile, a.SFTPNoSuchPath):
            raise FileNotFoundError(f"{what} not found: {path}") from None
        except (a.SFTPPermissionDenied, a.SFTPWriteProtect):
            raise PermissionError(f"Permission denied: {path}") from None
        except a.SFTPFileIsADirectory:
            raise IsADirectoryError(f"Is a directory: {path}") from None
        except a.SFTPNotADirectory:
            raise NotADirectoryError(f"Not a directory: {path}") from None
        except (
            a.SFTPConnectionLost,
            a.SFTPNoConnection,
            a.DisconnectError,
            a.ChannelOpenError,
            BrokenPipeError,
        ) as exc:
            raise self._lost(exc, f"at {path}") from None
        except a.SFTPError as exc:
            raise OSError(f"{path}: {exc.reason}") from None

    # -- lifecycle and metadata ----------------------------------------------------------------

    async def initialize(self) -> None:
        """Connect (bounded by ``connect_timeout_s``), learn the remote's system, home, shell and
        environment, and check the working directory. Other calls connect on first use too."""
        await self._connection()

    async def __aenter__(self) -> SshExecutionEnvironment:
        await self.initialize()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cleanup()

    async def cleanup(self) -> None:
        """Stop running commands, delete spill files (here and there), close the connection."""
        await self.terminate_all()
        await _wait_event(self._idle, 10.0)  # the calls stopped above return their results
        if self._orphans:  # commands a lost connection left running: one try to stop them
            with contextlib.suppress(Exception):
                await self._connection()
        self._spill_dir.remove()
        conn, sftp, self._conn, self._sftp_client = self._conn, self._sftp_client, None, None
        if conn is None:
            return
        if self._remote_spill is not None and sftp is not None and not conn.is_closed():
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    await sftp.rmtree(self._remote_spill)
        self._remote_spill = None
        if sftp is not None:
            sftp.exit()
        conn.close()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await conn.wait_closed()

    def working_directory(self) -> str:
        if self._root is None:
            raise RuntimeError(f"{self!r}: call 'await env.initialize()' first (the home directory is not known yet)")
        return self._root

    def _absolute(self, path: str) -> str:
        if path == "~" or path.startswith("~/"):
            path = self._remote.get("home", "/") + path[1:]
        elif not posixpath.isabs(path):
            base = self._root if self._root is not None else self._remote.get("home", "/")
            path = posixpath.join(base, path)
        return posixpath.normpath(path)

    def resolve(self, path: str) -> str:
        if not isinstance(path, str):
            raise TypeError(f"path must be a string, got {type(path).__name__}")
        if not path:
            raise ValueError("path must not be empty")
        if "\0" in path:
            raise ValueError(f"path contains a NUL byte: {path!r}")
        if self._root is None and not posixpath.isabs(path):
            self.working_directory()  # raises: relative paths need the working directory
        return self._absolute(path)

    def platform(self) -> str:
        self.working_directory()
        return self._remote["system"].lower()

    def os_version(self) -> str:
        self.working_directory()
        return f"{self._remote['system']} {self._remote['release']}".strip()

    # -- files ---------------------------------------------------------------------------------

    async def _stat(self, full: str, *, follow: bool = True) -> Any:
        """The SFTP attributes of ``full``, or None when nothing is there."""
        sftp = await self._sftp()
        a = _asyncssh()
        with self._mapped(full):
            try:
                return await (sftp.stat(full) if follow else sftp.lstat(full))
            except (a.SFTPNoSuchFile, a.SFTPNoSuchPath):
                return None

    async def _stat_file(self, full: str) -> Any:
        attrs = await self._stat(full)
        if attrs is None:
            raise FileNotFoundError(f"File not found: {full}")
        mode = attrs.permissions or 0
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(f"Is a directory, not a file: {full}")
        if not stat.S_ISREG(mode):
            raise _not_regular(full, mode)
        return attrs

    async def _require_dir(self, full: str, what: str) -> None:
        attrs = await self._stat(full)
        if attrs is None:
            raise FileNotFoundError(f"{what} not found: {full}")
        if not stat.S_ISDIR(attrs.permissions or 0):
            raise NotADirectoryError(f"{what} is not a directory: {full}")

    async def read_file(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        full = self.resolve(path)
        if offset is not None and offset < 1:
            raise ValueError(f"offset is a 1-based line number, got {offset}")
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        await self._stat_file(full)
        start, count = offset or 1, limit or DEFAULT_READ_LIMIT
        sftp = await self._sftp()
        with self._mapped(full):
            async with sftp.open(full, "rb") as fh:
                reader = _Lines(fh)
                if b"\0" in await reader.peek(BINARY_CHECK_BYTES):
                    raise ValueError(f"{full} is a binary file; it cannot be shown as text")
                picked: list[tuple[int, bytes, int]] = []
                seen = 0
                async for raw, cut in reader.bounded():
                    seen += 1
                    if seen >= start + count:
                        break
                    if seen >= start:
                        picked.append((seen, raw, cut))
        return format_numbered(full, picked, seen, start)

    async def file_size(self, path: str) -> int:
        """The size of a regular file in bytes (for tools that bound what they read whole)."""
        return int((await self._stat_file(self.resolve(path))).size or 0)

    async def read_bytes(self, path: str) -> bytes:
        full = self.resolve(path)
        await self._stat_file(full)
        sftp = await self._sftp()
        with self._mapped(full):
            async with sftp.open(full, "rb") as fh:
                return bytes(await fh.read())

    async def write_file(self, path: str, content: str | bytes) -> None:
        """Written to a temporary file beside the target and renamed over it (a broken connection
        leaves the old content whole), keeping its mode and owner; new files, symlinks and files
        owned by another user (when not root) are written in place."""
        full = self.resolve(path)
        if isinstance(content, str):
            data = content.encode("utf-8")
        elif isinstance(content, bytes | bytearray | memoryview):
            data = bytes(content)
        else:
            raise TypeError(f"content must be str or bytes, got {type(content).__name__}")
        attrs = await self._stat(full)
        if attrs is not None:
            if stat.S_ISDIR(attrs.permissions or 0):
                raise IsADirectoryError(f"Is a directory, cannot write a file there: {full}")
            if not stat.S_ISREG(attrs.permissions or 0):
                raise _not_regular(full, attrs.permissions or 0)
        sftp = await self._sftp()
        await self._make_parents(sftp, full)
        link = attrs is not None and stat.S_ISLNK((await self._stat(full, follow=False)).permissions or 0)
        uid = int(self._remote.get("uid", -1))
        if attrs is None or link or (uid != 0 and attrs.uid != uid):
            with self._mapped(full):
                try:
                    async with sftp.open(full, "wb") as fh:
                        await fh.write(data)
                except BaseException:
                    if attrs is None:  # a new file that could not be written whole is removed again
                        with contextlib.suppress(Exception):
                            await asyncio.shield(sftp.remove(full))
                    raise
            return
        if uid != 0 and not _may_write(attrs, uid, self._remote.get("gids", ())):
            raise PermissionError(f"Permission denied: {full}")
        directory, name = posixpath.split(full)
        temp = posixpath.join(directory, f".{name[:100]}.{secrets.token_hex(4)}.ra-tmp")
        a = _asyncssh()
        with self._mapped(full):
            try:
                async with sftp.open(temp, "xb") as fh:
                    await fh.write(data)
                if uid == 0 and (attrs.uid, attrs.gid) != (0, 0):
                    await sftp.chown(temp, attrs.uid, attrs.gid)  # first: a chown clears setuid bits
                await sftp.chmod(temp, stat.S_IMODE(attrs.permissions or 0o644))
                try:
                    await sftp.posix_rename(temp, full)
                except a.SFTPOpUnsupported:  # no posix-rename@openssh.com: write in place
                    async with sftp.open(full, "wb") as fh:
                        await fh.write(data)
                    await sftp.remove(temp)
            except BaseException:
                with contextlib.suppress(Exception):
                    await asyncio.shield(sftp.remove(temp))
                raise

    async def _make_parents(self, sftp: Any, full: str) -> None:
        parent = posixpath.dirname(full)
        a = _asyncssh()
        with self._mapped(parent, "Directory"):
            try:
                await sftp.makedirs(parent, exist_ok=True)
            except (a.SFTPFailure, a.SFTPNoSuchFile, a.SFTPNotADirectory, a.SFTPFileAlreadyExists):
                raise NotADirectoryError(f"Cannot create {full}: a parent path is an existing file") from None

    async def delete_file(self, path: str) -> None:
        full = self.resolve(path)
        attrs = await self._stat(full, follow=False)
        if attrs is None:
            raise FileNotFoundError(f"File not found: {full}")
        if stat.S_ISDIR(attrs.permissions or 0):
            raise IsADirectoryError(f"Is a directory, not a file: {full}")
        sftp = await self._sftp()
        with self._mapped(full):
            await sftp.remove(full)

    async def move_file(self, source: str, destination: str) -> None:
        src, dst = self.resolve(source), self.resolve(destination)
        if await self._stat(src, follow=False) is None:
            raise FileNotFoundError(f"File not found: {src}")
        target = await self._stat(dst)
        if target is not None and stat.S_ISDIR(target.permissions or 0):
            raise IsADirectoryError(f"Destination is an existing directory: {dst}")
        sftp = await self._sftp()
        await self._make_parents(sftp, dst)
        a = _asyncssh()
        with self._mapped(src):
            try:
                await sftp.posix_rename(src, dst)
                return
            except (a.SFTPFailure, a.SFTPOpUnsupported):
                pass  # another file system (EXDEV), or no posix-rename: mv copies
        status, _, err = await self._control(await self._connection(), 'exec mv -f -- "$1" "$2"', [src, dst], 600)
        if status != 0:
            raise OSError(f"cannot move {src} to {dst}: {err.decode(errors='replace').strip()}")

    async def file_exists(self, path: str) -> bool:
        return await self._stat(self.resolve(path)) is not None

    async def is_directory(self, path: str) -> bool:
        attrs = await self._stat(self.resolve(path))
        return attrs is not None and stat.S_ISDIR(attrs.permissions or 0)

    async def list_directory(self, path: str, depth: int = 1) -> list[DirEntry]:
        full = self.resolve(path)
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        await self._require_dir(full, "directory")
        return [DirEntry(rel, is_dir, size) for rel, _, is_dir, size, _ in await self._walk(full, depth, True)]

    async def _walk(
        self, root: str, max_depth: int | None, hidden: bool
    ) -> list[tuple[str, str, bool, int | None, float]]:
        """(relative name, full path, is a directory, size, mtime) under ``root`` in name order,
        depth first, as the local listing walks: ``.git`` skipped, symlinks followed for the kind
        and size but not descended into. Directories are read concurrently (16 at a time)."""
        sftp = await self._sftp()
        gate = asyncio.Semaphore(16)

        async def visit(directory: str, prefix: str, level: int) -> list[tuple[str, str, bool, int | None, float]]:
            async with gate:
                try:
                    with self._mapped(directory, "Directory"):
                        names = await sftp.readdir(directory)
                except (FileNotFoundError, PermissionError, NotADirectoryError, OSError) as exc:
                    if isinstance(exc, SshConnectionError):
                        raise
                    return []
            names = sorted(
                (n for n in names if n.filename not in (".", "..", ".git") and (hidden or n.filename[:1] != ".")),
                key=lambda n: n.filename,
            )
            rows, below = [], []
            for n in names:
                mode = n.attrs.permissions or 0
                full, rel = posixpath.join(directory, n.filename), prefix + n.filename
                attrs = n.attrs
                if stat.S_ISLNK(mode):
                    attrs = await self._stat(full) or n.attrs
                kind = attrs.permissions or 0
                is_dir = stat.S_ISDIR(kind)
                rows.append((rel, full, is_dir, None if is_dir else attrs.size, float(attrs.mtime or 0), kind))
                descend = stat.S_ISDIR(mode) and (max_depth is None or level < max_depth)
                below.append(visit(full, rel + "/", level + 1) if descend else None)
            children = await asyncio.gather(*(b for b in below if b is not None))
            out, it = [], iter(children)
            for row, sub in zip(rows, below, strict=True):
                out.append(row[:5])
                if sub is not None:
                    out.extend(next(it))
            return out

        return await visit(root, "", 1)

    # -- search --------------------------------------------------------------------------------

    async def glob(self, pattern: str, path: str | None = None) -> list[str]:
        base = self.resolve(path or ".")
        await self._require_dir(base, "directory")
        if not pattern or "\0" in pattern:
            raise ValueError("glob pattern must be a non-empty string")
        segments = pattern.split("/")
        literal: list[str] = []
        for segment in segments[:-1]:
            if any(ch in "*?[{" for ch in segment):
                break
            literal.append(segment)
        root = posixpath.normpath(posixpath.join("/" if pattern.startswith("/") else base, *literal))
        rest = "/".join(segments[len(literal) :]).lstrip("/")
        if not any(ch in "*?[{" for ch in rest):
            candidate = posixpath.join(root, rest)
            attrs = await self._stat(candidate)
            return [candidate] if attrs is not None and stat.S_ISREG(attrs.permissions or 0) else []
        matcher = translate_glob(rest, dot_special=True)
        if not await self.is_directory(root):
            return []
        expanded = expand_braces(rest)
        hidden = any(seg.startswith(".") for alt in expanded for seg in alt.split("/"))
        recursive = any("**" in alt for alt in expanded)
        depth = None if recursive else max(len([s for s in alt.split("/") if s]) for alt in expanded)
        found = [
            (mtime, full)
            for rel, full, is_dir, _, mtime in await self._walk(root, depth, hidden)
            if not is_dir and matcher.match(rel)
        ]
        found.sort(key=lambda item: (-item[0], item[1]))
        return [full for _, full in found]

    async def grep(self, pattern: str, path: str | None = None, options: GrepOptions | None = None) -> str:
        options = options or GrepOptions()
        validate_options(options)
        if not pattern:
            raise ValueError("pattern must not be empty")
        target = self.resolve(path or ".")
        attrs = await self._stat(target)
        if attrs is None:
            raise FileNotFoundError(f"Path not found: {target}")
        mode = attrs.permissions or 0
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            raise _not_regular(target, mode)
        is_dir = stat.S_ISDIR(mode)
        rg = self._remote.get("rg") or None
        binary = not is_dir and await self._sniff_binary(target)
        argv = _rg_args(rg, pattern, options, binary) if rg else self._grep_args(pattern, options, is_dir, binary)
        collector = _collector(options)
        streaming = bool(rg) and options.output_mode == "content" and not binary
        cwd = target if is_dir else posixpath.dirname(target)
        grouped = None
        if streaming and is_dir and not options.context_lines:
            assert rg is not None
            grouped = await self._grep_grouped(_rg_args(rg, pattern, options, binary, grouped=True), target, options)
        if grouped is not None:
            collector, sink, stopped = grouped
        elif streaming:
            # ripgrep's notes about binary data against names made to look like them: a file
            # named on its own is the only path in the output, so the text tells; in a directory
            # the remote file system would, out of reach here, so a note followed by more output
            # sends the search to ripgrep's JSON (search._rejoin).
            reader = _RgText(collector, decide_by_files(target, False) if not is_dir else _cannot_tell)
            feed = _Feed(reader, AmbiguousOutput)
            sink = await self._stream([*argv, target], cwd, feed)
            stopped, ambiguous = feed.stopped, feed.unreadable
            if not (stopped or ambiguous):
                try:
                    reader.finish()
                except AmbiguousOutput:
                    ambiguous = True
            if ambiguous:
                assert rg is not None
                json_argv = _rg_args(rg, pattern, options, binary, json=True)
                return await self._grep_json([*json_argv, target], cwd, options)
        else:
            # GNU grep (no path order of its own), counts and file lists: gathered up to a cap,
            # then put in path order here.
            delimiter = b"\n" if options.output_mode in ("content", "count") else b"\0"
            state = {"pending": b"", "carry": b"", "records": [], "size": 0}

            def records(chunk: bytes, final: bool) -> list[bytes]:
                data = state["pending"] + chunk
                *whole, state["pending"] = data.split(delimiter)
                if final and state["pending"]:
                    whole.append(state["pending"])
                    state["pending"] = b""
                if delimiter == b"\n":  # the NULs of whole records: _rejoin's fast path needs them
                    nuls = count_byte(data[: len(data) - len(state["pending"])], b"\0")
                    ctx = bool(options.context_lines)
                    whole, state["carry"] = _rejoin(whole, state["carry"], ctx, nuls, None, final=final)
                return whole

            def on_output(chunk: bytes) -> bool:
                state["records"].extend(records(chunk, False))
                state["size"] += len(chunk)
                return state["size"] < _GREP_FALLBACK_CAP

            sink = await self._stream([*argv, target], cwd, on_output)
            got = [r for r in state["records"] + records(b"", True) if r and r != b"--"]
            got.sort(key=_record_path)  # stable: a file's lines stay in order
            if binary:
                return _binary_result(target, got, options.output_mode)
            _feed_rg_records(collector, got, options.output_mode)
            stopped = False
        stderr = sink.stderr.decode("utf-8", "replace").strip()
        if sink.exit_code() == 2 and not collector.lines and not stopped:
            if "glob" in stderr and options.glob_filter:
                raise ValueError(f"Invalid glob_filter {options.glob_filter!r}: {stderr}")
            if stderr:
                raise ValueError(f"Invalid regex {pattern!r}: {stderr}")
        return collector.text()

    async def _grep_grouped(
        self, argv: list[str], target: str, options: GrepOptions
    ) -> tuple[_Collector, Any, bool] | None:
        """Content from ripgrep's output grouped by file (search._RgHeading: each path once, a
        note about binary data read unambiguously) in the directory ``target``: the collector, the
        stream and whether it stopped early; None where a path holds a newline (then the
        per-line reading)."""
        reader = _RgHeading(_collector(options))
        feed = _Feed(reader, HeadingUnreadable)
        sink = await self._stream([*argv, target], target, feed)
        if feed.unreadable:
            return None
        if not feed.stopped:
            reader.finish()
        return reader.collector, sink, feed.stopped

    async def _grep_json(self, argv: list[str], cwd: str, options: GrepOptions) -> str:
        """Content from ripgrep's JSON: the search again, where its plain output could not be read."""
        reader = _RgJson(_collector(options))
        stopped = False

        def on_stdout(chunk: bytes) -> bool:
            nonlocal stopped
            stopped = stopped or not reader.feed(chunk)
            return not stopped

        await self._stream(argv, cwd, on_stdout)
        if not stopped:
            reader.finish()
        return reader.collector.text()

    def _grep_args(self, pattern: str, options: GrepOptions, is_dir: bool, binary: bool) -> list[str]:
        """GNU grep in ripgrep's output shape (``--null``): no ignore files, hidden files skipped."""
        args = ["env", "LC_ALL=C", "grep", "-r", "-s", "-H", "--null", "--color=never", "-D", "skip"]
        args.append("-P" if self._remote.get("pcre") else "-E")
        args.append("-a" if binary else "-I")
        if options.case_insensitive:
            args.append("-i")
        if options.glob_filter:  # first: with an --include first, what matches no option is left out
            flag = "--exclude" if options.glob_filter.startswith("!") else "--include"
            args.append(f"{flag}={options.glob_filter.lstrip('!')}")
        if is_dir:
            args += ["--exclude=.*", "--exclude-dir=.*"]
        if binary or options.output_mode == "count":
            args.append("-c")
        elif options.output_mode == "files_with_matches":
            args.append("-l")
        else:
            args.append("-n")
            if options.context_lines:
                args += ["-C", str(options.context_lines)]
        return [*args, "-e", pattern, "--"]

    async def _sniff_binary(self, full: str) -> bool:
        sftp = await self._sftp()
        with self._mapped(full):
            async with sftp.open(full, "rb") as fh:
                return b"\0" in await fh.read(BINARY_SNIFF_BYTES)

    async def _stream(self, argv: list[str], cwd: str, on_stdout: Any) -> _Sink:
        """Run ``argv`` in ``cwd`` remotely, stdout to ``on_stdout`` (False: stop reading)."""
        conn = await self._connection()
        sink = _Sink(on_stdout)
        assert self._slots is not None
        async with self._slots:
            try:
                chan, _ = await conn.create_session(lambda: sink, _line(_IN_DIR, [cwd, *argv]), encoding=None)
                chan.write_eof()
                await chan.wait_closed()
            except asyncio.CancelledError:
                if sink.channel is not None:
                    sink.channel.close()
                raise
            except _asyncssh().Error as exc:
                raise self._channel_error(exc, "while searching") from None
        if sink.lost is not None:
            raise self._lost(sink.lost, "while searching")
        return sink

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
        conn = await self._connection()
        cwd = self.working_directory() if working_dir is None else self.resolve(working_dir)
        await self._require_dir(cwd, "working_dir")
        cookie = new_cookie()
        env = build_environment(
            self._env_policy,
            exclude_secrets=self._exclude_secrets,
            base=self._remote["env"],
            extra={**self._extra_env, **(env_vars or {}), COOKIE_VAR: cookie},
        )
        launch = [f"ra-pid-{cookie}:", cwd, self._remote["shell"], "-c", command]
        variables = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items()).encode("utf-8", "surrogateescape")
        capture = _OutputCapture(self._memory_cap, self._spill_dir, on_output)
        run = _Run(capture, cookie)
        assert self._slots is not None
        self._active += 1
        self._idle.clear()
        try:
            async with self._slots:
                started = time.monotonic()
                await self._start(conn, run, _line(_LAUNCH, launch), variables)
                await self._supervise(run, timeout)
            duration_ms = int((time.monotonic() - started) * 1000)
            if run.lost is not None and not run.aborted:
                self._orphans.append((run.pid or None, cookie))
                raise self._lost(run.lost, "while the command ran (it is stopped when ra reconnects)")
            capture.close()  # flushes the spill file
            if capture.spill_path is not None:
                await self._upload_spill(capture)
        finally:
            capture.close()
            self._active -= 1
            if not self._active:
                self._idle.set()
        stdout, stderr = capture.text(0), capture.text(1)
        if run.timed_out:
            stdout = _append_note(stdout, timeout_message(timeout))
        if run.background_stopped:
            stderr = _append_note(stderr, _BACKGROUND_NOTE)
        return ExecResult(
            stdout=stdout,
            stderr=stderr,
            exit_code=run.exit_code(),
            timed_out=run.timed_out,
            duration_ms=duration_ms,
            full_output_path=capture.spill_path,
            total_bytes=capture.total,
            aborted=run.aborted,
        )

    async def _start(self, conn: Any, run: _Run, line: str, stdin: bytes) -> None:
        """Open the channel and register the run (so terminate_all() reaches it). The start is a
        task of its own: cancelled midway, the command (if it began) is still stopped."""

        async def open_channel() -> None:
            await conn.create_session(lambda: run, line, encoding=None)
            run.channel.write(stdin)  # the variables, read by the launcher (the command's stdin is empty)
            run.channel.write_eof()
            self._running.add(run)

        starting = asyncio.ensure_future(open_channel())
        self._starting.add(starting)
        starting.add_done_callback(self._starting.discard)
        try:
            await asyncio.shield(starting)
        except asyncio.CancelledError:
            await asyncio.wait({starting}, timeout=5.0)
            if starting.done() and not starting.cancelled() and starting.exception() is None:
                await self._kill_now(run)
                self._running.discard(run)
                run.channel.close()
            else:
                starting.cancel()
            raise
        except _asyncssh().Error as exc:
            raise self._channel_error(exc, "starting the command") from None

    def _channel_error(self, exc: BaseException, doing: str) -> SshConnectionError:
        if isinstance(exc, _asyncssh().ChannelOpenError):
            return SshConnectionError(
                f"{self._where()} refused a new channel {doing}: {exc} (is sshd's MaxSessions below max_sessions?)"
            )
        return self._lost(exc, doing)

    async def _supervise(self, run: _Run, timeout_ms: int) -> None:
        try:
            if not await _wait_event(run.exited, timeout_ms / 1000) and not run.aborted:
                run.timed_out = True
                await self._stop([run], self._kill_grace_s)
            if run.stop_task is not None:
                await asyncio.shield(run.stop_task)  # a stop terminate_all began
            await _wait_event(run.exited, 5.0)
            if not await _wait_event(run.closed, self._background_grace_s):
                if run.stop_task is None:
                    run.background_stopped = True
                    await self._stop([run], self._kill_grace_s)
                if not await _wait_event(run.closed, 0.5):
                    run.channel.close()  # what still holds the output escaped even the cookie
                    await _wait_event(run.closed, 1.0)
        except BaseException:
            await self._kill_now(run)
            run.channel.close()
            raise
        finally:
            self._running.discard(run)

    async def _kill_now(self, run: _Run) -> None:
        with contextlib.suppress(BaseException):
            await asyncio.shield(asyncio.ensure_future(self._stop_after_pid([run], 0)))

    def _stop(self, runs: list[_Run], grace_s: float) -> asyncio.Future[None]:
        """Stop ``runs`` (one remote script for all of them); idempotent per run."""
        fresh = [r for r in runs if r.stop_task is None]
        if fresh:
            task = asyncio.ensure_future(self._stop_after_pid(fresh, grace_s))
            for r in fresh:
                r.stop_task = task
        return asyncio.ensure_future(_gather([r.stop_task for r in runs if r.stop_task is not None]))

    async def _stop_after_pid(self, runs: list[_Run], grace_s: float) -> None:
        for r in runs:
            await _wait_event(r.pid_known, 5.0)
        try:
            await self._kill([(r.pid or None, r.cookie) for r in runs], grace_s)
        except Exception as exc:  # the connection is gone: stopped on reconnect
            logger.warning("could not stop remote commands on %s: %s", self._where(), exc)
            self._orphans.extend((r.pid or None, r.cookie) for r in runs)

    async def _kill(self, targets: list[tuple[int | None, str]], grace_s: float) -> None:
        args = [str(round(grace_s / 0.05))]
        for pid, cookie in targets:
            args += [str(pid) if pid else "-", cookie]
        conn = self._conn
        if conn is None or conn.is_closed():
            raise SshConnectionError(f"not connected to {self._where()}")
        await self._control(conn, _STOP, args, grace_s + 15)

    async def terminate_all(self) -> None:
        if self._starting:
            await asyncio.wait(set(self._starting), timeout=5.0)
        runs = list(self._running)
        for run in runs:
            run.aborted = True
        if runs:
            await self._stop(runs, self._kill_grace_s)

    async def _upload_spill(self, capture: _OutputCapture) -> None:
        """Copy the spill file to the remote, where the file tools will look for it."""
        local = capture.spill_path
        assert local is not None
        try:
            sftp = await self._sftp()
            if self._remote_spill is None:
                tmp = self._remote["env"].get("TMPDIR") or "/tmp"
                folder = posixpath.join(tmp, f"ra-output-{secrets.token_hex(6)}")
                await sftp.mkdir(folder, _asyncssh().SFTPAttrs(permissions=0o700))
                self._remote_spill = folder
            remote = posixpath.join(self._remote_spill, os.path.basename(local))
            await sftp.put(local, remote)
            capture.spill_path = remote
        except Exception as exc:
            capture.spill_path, capture.spill_error = None, f"copying it to {self._host} failed: {exc}"
        finally:
            with contextlib.suppress(OSError):
                os.unlink(local)

"""``results.jsonl``: one line per finished task attempt, written by the coordinator alone.

Each line goes out in one ``write`` on a file opened for appending, then ``fsync``: a batch killed
mid-write leaves at most a cut last line, which the next run drops (that task runs again) before
it appends. The latest line of an id is its result. A lock file keeps a second batch off the
same directory: two coordinators would run the same tasks twice and interleave their lines.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["FINAL_STATUSES", "STATUSES", "OutDirError", "OutDirInUseError", "ResultsFile", "ResultsFormatError"]

#: Every status a result line can have.
STATUSES = ("passed", "failed", "error", "timeout", "crashed", "interrupted")
#: Statuses that finish a task: a re-run skips it (``retry_failed`` re-runs all but ``passed``).
FINAL_STATUSES = ("passed", "failed", "error", "timeout", "crashed")


class OutDirError(RuntimeError):
    """The output directory cannot be used (not creatable, not writable)."""


class OutDirInUseError(OutDirError):
    """Another batch holds the output directory."""


class ResultsFormatError(ValueError):
    """A line of ``results.jsonl`` (other than a cut last one) is not a result."""


class ResultsFile:
    """The results of a batch's output directory; :meth:`open` locks it for this process."""

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / "results.jsonl"
        self._lock_fd: int | None = None
        self._fd: int | None = None

    def open(self) -> dict[str, dict[str, Any]]:
        """Lock the directory and read the results so far: the latest line of each id."""
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            lock = os.open(self.out_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutDirError(f"cannot use {self.out_dir} as the output directory: {exc.strerror or exc}") from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(lock, 64).decode(errors="replace").strip() or "?"
            os.close(lock)
            raise OutDirInUseError(f"{self.out_dir} is in use by another batch (pid {holder})") from None
        os.ftruncate(lock, 0)
        os.pwrite(lock, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = lock
        try:
            latest = self._read()
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            self.close()
            raise OutDirError(f"cannot use {self.path}: {exc.strerror or exc}") from None
        except BaseException:
            self.close()
            raise
        return latest

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        if data and not data.endswith(b"\n"):
            # A line cut by a crash mid-write: drop it (its task runs again).
            cut = data.rfind(b"\n") + 1
            with open(self.path, "r+b") as fh:
                fh.truncate(cut)
            data = data[:cut]
        latest: dict[str, dict[str, Any]] = {}
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict) or not isinstance(record.get("id"), str) or "status" not in record:
                raise ResultsFormatError(
                    f"{self.path} line {number} is not a result line (a JSON object with id and status); "
                    "fix or remove it, or use another output directory"
                )
            latest[record["id"]] = record
        return latest

    def append(self, record: dict[str, Any]) -> None:
        """Write one result line (one ``write`` call, then ``fsync``)."""
        assert self._fd is not None, "open() first"
        data = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)

    def close(self) -> None:
        for name in ("_fd", "_lock_fd"):
            fd = getattr(self, name)
            if fd is not None:
                setattr(self, name, None)
                with contextlib.suppress(OSError):
                    os.close(fd)

    def __enter__(self) -> ResultsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

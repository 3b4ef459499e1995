"""A minimal file-only execution environment over a real directory, for the editing-tool tests.

It implements just the file methods that ``apply_patch`` and ``edit_file`` use, with the semantics
the ``ExecutionEnvironment`` protocol documents (relative paths resolve against the root; writes
create parent directories; moves replace the destination). ``fail_on`` makes the write (or delete,
or move) of a chosen path fail with ENOSPC, to exercise rollback; ``writes`` records what was written.
"""

from __future__ import annotations

import os
from pathlib import Path


def _read(key: str) -> bytes:
    with open(key, "rb") as fh:
        return fh.read()


def _write(key: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(key), exist_ok=True)
    with open(key, "wb") as fh:
        fh.write(data)


def _move(src: str, dst: str) -> None:
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.replace(src, dst)


class DirEnv:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.fail_on: set[str] = set()
        self.writes: list[str] = []

    def resolve(self, path: str) -> str:
        return os.path.normpath(os.path.join(self.root, path))

    def working_directory(self) -> str:
        return str(self.root)

    def _check(self, key: str) -> None:
        if key in self.fail_on:
            raise OSError(28, "No space left on device", key)

    async def read_bytes(self, path: str) -> bytes:
        return _read(self.resolve(path))

    async def write_file(self, path: str, content: str | bytes) -> None:
        key = self.resolve(path)
        self._check(key)
        _write(key, content.encode("utf-8") if isinstance(content, str) else content)
        self.writes.append(key)

    async def delete_file(self, path: str) -> None:
        key = self.resolve(path)
        self._check(key)
        os.unlink(key)
        self.writes.append(key)

    async def move_file(self, source: str, destination: str) -> None:
        src, dst = self.resolve(source), self.resolve(destination)
        self._check(dst)
        _move(src, dst)
        self.writes.append(dst)

    async def file_exists(self, path: str) -> bool:
        return _exists(self.resolve(path))

    async def is_directory(self, path: str) -> bool:
        return _isdir(self.resolve(path))


_exists = os.path.exists
_isdir = os.path.isdir


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every directory (None) and regular file (bytes) under ``root``, by relative path."""
    out: dict[str, bytes | None] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for d in dirnames:
            out[os.path.normpath(os.path.join(rel, d))] = None
        for f in filenames:
            full = os.path.join(dirpath, f)
            if os.path.isfile(full) and not os.path.islink(full):
                out[os.path.normpath(os.path.join(rel, f))] = _read(full)
    return out

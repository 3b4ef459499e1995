"""An in-memory stand-in for the file methods of ``ExecutionEnvironment``, shared by the benches
that time the patch and edit engines without disk I/O."""

from __future__ import annotations

import posixpath


class MemEnv:
    """Files in a dict; the file methods of ExecutionEnvironment, nothing else."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = {self.resolve(k): v for k, v in files.items()}

    def resolve(self, path: str) -> str:
        return posixpath.normpath(posixpath.join("/mem", path))

    async def read_bytes(self, path: str) -> bytes:
        return self.files[self.resolve(path)]

    async def write_file(self, path: str, content: str | bytes) -> None:
        self.files[self.resolve(path)] = content.encode() if isinstance(content, str) else content

    async def delete_file(self, path: str) -> None:
        del self.files[self.resolve(path)]

    async def move_file(self, source: str, destination: str) -> None:
        self.files[self.resolve(destination)] = self.files.pop(self.resolve(source))

    async def file_exists(self, path: str) -> bool:
        return self.resolve(path) in self.files

    async def is_directory(self, path: str) -> bool:
        return self.resolve(path) == "/mem"

"""The execution environment contract (coding-agent-loop-spec 4.1).

Tools reach the world only through an ``ExecutionEnvironment``: swap the implementation to run the
same tools in a container, over SSH, or in memory. Every method is async, because a remote
environment does I/O on every call and the agent loop must stay responsive (to abort, to steering)
while a command runs. Paths may be relative; they resolve against ``working_directory()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["DirEntry", "ExecResult", "ExecutionEnvironment", "GrepOptions", "OutputCallback"]

#: Receives output as it is produced: (stream name "stdout" | "stderr", text chunk).
OutputCallback = Callable[[str, str], None]


@dataclass(slots=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    duration_ms: int = 0
    #: Set when the output exceeded the in-memory cap: the full output was spilled to this file.
    full_output_path: str | None = None
    #: Total bytes the command wrote to stdout and stderr, including what was not kept in memory.
    total_bytes: int = 0
    #: True when the command was killed because the session was aborted.
    aborted: bool = False

    @property
    def output(self) -> str:
        """stdout and stderr combined, stdout first (the spec's "combine for the result")."""
        if self.stdout and self.stderr:
            sep = "" if self.stdout.endswith("\n") else "\n"
            return f"{self.stdout}{sep}{self.stderr}"
        return self.stdout or self.stderr


@dataclass(slots=True)
class DirEntry:
    name: str  # path relative to the listed directory, "/" separated
    is_dir: bool
    size: int | None = None


@dataclass(slots=True)
class GrepOptions:
    glob_filter: str | None = None  # e.g. "*.py"
    case_insensitive: bool = False
    max_results: int = 100
    output_mode: str = "content"  # content | files_with_matches | count
    context_lines: int = 0
    extra: dict[str, object] = field(default_factory=dict)


def local_paths(env: object) -> bool:
    """Whether ``env``'s paths are this machine's (its optional ``local_paths`` attribute; True
    without one). Permission rules that name files resolve links with this machine's file system,
    so they hold only where they are: an SSH environment says False."""
    return bool(getattr(env, "local_paths", True))


@runtime_checkable
class ExecutionEnvironment(Protocol):
    # -- files ---------------------------------------------------------------------------------
    async def read_file(self, path: str, offset: int | None = None, limit: int | None = None) -> str:
        """Text with ``NNN | `` line numbers; ``offset`` is 1-based, ``limit`` a line count.
        Raises FileNotFoundError, IsADirectoryError, PermissionError, or ValueError for binary."""
        ...

    async def read_bytes(self, path: str) -> bytes:
        """The raw content, for editing tools that must keep encodings and line endings."""
        ...

    async def write_file(self, path: str, content: str | bytes) -> None:
        """Create or replace the file, creating parent directories."""
        ...

    async def delete_file(self, path: str) -> None: ...

    async def move_file(self, source: str, destination: str) -> None:
        """Rename, creating the destination's parent directories; replaces an existing file."""
        ...

    async def file_exists(self, path: str) -> bool: ...

    async def is_directory(self, path: str) -> bool: ...

    async def list_directory(self, path: str, depth: int = 1) -> list[DirEntry]: ...

    # -- commands ------------------------------------------------------------------------------
    async def exec_command(
        self,
        command: str,
        timeout_ms: int | None = None,
        working_dir: str | None = None,
        env_vars: dict[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult: ...

    async def terminate_all(self) -> None:
        """Stop every running command (SIGTERM, 2 s, SIGKILL to each process group): abort."""
        ...

    # -- search --------------------------------------------------------------------------------
    async def grep(self, pattern: str, path: str | None = None, options: GrepOptions | None = None) -> str: ...

    async def glob(self, pattern: str, path: str | None = None) -> list[str]:
        """Matching paths, newest modification time first."""
        ...

    # -- lifecycle and metadata ----------------------------------------------------------------
    async def initialize(self) -> None: ...

    async def cleanup(self) -> None: ...

    def working_directory(self) -> str: ...

    def resolve(self, path: str) -> str:
        """The absolute form of ``path`` as this environment sees it."""
        ...

    def platform(self) -> str: ...

    def os_version(self) -> str: ...

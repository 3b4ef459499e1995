"""An execution environment that does nothing, shared by the benches that time the loop itself
(no tool touches it: the benches' tools are in-process no-ops)."""

from __future__ import annotations


class NullEnv:
    """What the loop and the system prompt ask of an environment, answered without I/O."""

    def working_directory(self) -> str:
        return "/tmp"

    def platform(self) -> str:
        return "linux"

    def os_version(self) -> str:
        return "bench"

    async def terminate_all(self) -> None:
        return None

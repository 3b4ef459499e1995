"""The conformance kit (``ra.env.testing``) against ``SshExecutionEnvironment`` and a real sshd.

The "remote" is this machine, reached over SSH on 127.0.0.1: every file goes over SFTP and every
command over an SSH channel, so the kit tests the environment as it is used against a real host.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ra.env import ExecutionEnvironment
from ra.env.testing import EnvironmentConformance

from .support import SshServer

GRACE_MS = 200
CAP = 64 * 1024


class TestSshEnvironment(EnvironmentConformance):
    kill_grace_s = GRACE_MS / 1000
    output_memory_cap = CAP
    check_timeout_s = 30.0

    @pytest.fixture(autouse=True)
    def _server(self, sshd: SshServer) -> None:
        self.server = sshd

    async def make_environment(self, root: Path) -> ExecutionEnvironment:
        from ra.env.ssh import SshExecutionEnvironment

        return SshExecutionEnvironment(
            **self.server.environment_kwargs(),  # type: ignore[arg-type]
            working_directory=str(root),
            kill_grace_ms=GRACE_MS,
            background_grace_ms=200,
            output_memory_cap=CAP,
        )

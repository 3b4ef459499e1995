"""The conformance kit (``ra.env.testing``) against ``SshExecutionEnvironment`` and a real sshd.

The "remote" is this machine, reached over SSH on 127.0.0.1: every file goes over SFTP and every
command over an SSH channel, so the kit tests the environment as it is used against a real host.
Twice: searching with GNU grep (sshd's PATH has no ``rg`` here), and with ripgrep (the venv's
``rg``, named by its path). About 15 s each, so in the slow lane; ``test_ssh.py`` keeps a smoke
test and the SSH-specific checks in the default run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ra.env import ExecutionEnvironment
from ra.env.search import find_ripgrep
from ra.env.testing import EnvironmentConformance

from .support import SshServer

GRACE_MS = 200
CAP = 64 * 1024


@pytest.mark.slow
class TestSshEnvironment(EnvironmentConformance):
    kill_grace_s = GRACE_MS / 1000
    output_memory_cap = CAP
    check_timeout_s = 30.0

    @pytest.fixture(autouse=True)
    def _server(self, sshd: SshServer) -> None:
        self.server = sshd

    ripgrep: str | None = None

    async def make_environment(self, root: Path) -> ExecutionEnvironment:
        from ra.env.ssh import SshExecutionEnvironment

        return SshExecutionEnvironment(
            **self.server.environment_kwargs(),  # type: ignore[arg-type]
            working_directory=str(root),
            kill_grace_ms=GRACE_MS,
            background_grace_ms=200,
            output_memory_cap=CAP,
            ripgrep=self.ripgrep,
        )


@pytest.mark.slow
class TestSshEnvironmentWithRipgrep(TestSshEnvironment):
    @pytest.fixture(autouse=True)
    def _ripgrep(self) -> None:
        rg = find_ripgrep()
        if rg is None:
            pytest.skip("no rg on this machine (the ripgrep wheel of the test extra provides one)")
        self.ripgrep = rg

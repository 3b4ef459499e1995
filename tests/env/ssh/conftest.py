from __future__ import annotations

from collections.abc import Iterator

import pytest

from .support import SshServer, require_sshd


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """One real sshd for the tests that do not stop it (those make their own)."""
    require_sshd()
    server = SshServer(tmp_path_factory.mktemp("sshd")).start()
    try:
        yield server
    finally:
        server.stop()

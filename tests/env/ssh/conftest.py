from __future__ import annotations

from collections.abc import Iterator

import pytest

from .support import SshServer, running_sshd


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """One real sshd for the tests that do not stop it (those make their own)."""
    with running_sshd(tmp_path_factory) as server:
        yield server

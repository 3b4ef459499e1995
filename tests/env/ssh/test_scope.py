"""A scope (``spawn_agent``'s ``working_dir``) is checked against this machine's files, so it
refuses an SSH environment, also behind other wrappers, instead of confining the wrong tree.
No connection is made: the refusal comes before any path is looked at."""

from __future__ import annotations

from pathlib import Path

import pytest

from ra.env.wrappers import ChildExecutionEnvironment, ScopedExecutionEnvironment, ssh_destination_of

pytest.importorskip("asyncssh")


def test_a_scope_over_ssh_is_refused(tmp_path: Path) -> None:
    from ra.env.ssh import SshExecutionEnvironment

    env = SshExecutionEnvironment("127.0.0.1", port=2222, username="dev", working_directory=str(tmp_path))
    for inner in (env, ChildExecutionEnvironment(env), ChildExecutionEnvironment(ChildExecutionEnvironment(env))):
        assert ssh_destination_of(inner) == "dev@127.0.0.1:2222"
        with pytest.raises(ValueError, match=r"the files are on dev@127\.0\.0\.1:2222"):
            ScopedExecutionEnvironment(inner, str(tmp_path))  # a directory that exists here, too


def test_a_local_scope_still_works(tmp_path: Path) -> None:
    from ra.env.local import LocalExecutionEnvironment

    local = LocalExecutionEnvironment(str(tmp_path))
    assert ssh_destination_of(ChildExecutionEnvironment(local)) is None
    assert ScopedExecutionEnvironment(local, str(tmp_path)).working_directory() == str(tmp_path.resolve())

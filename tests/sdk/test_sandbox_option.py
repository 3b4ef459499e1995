"""``QueryOptions(sandbox=...)``: the query's local environment runs its commands under bwrap."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from ra.env import LocalExecutionEnvironment
from ra.sdk import QueryOptions
from tests.env.sandbox.support import outside_dir, require_bwrap


def test_the_sandbox_option_confines_the_query_environment(tmp_path: Path) -> None:
    require_bwrap()
    env = QueryOptions(cwd=tmp_path, sandbox="read-only").build_env()
    result = asyncio.run(env.exec_command("touch f || echo refused"))
    assert result.stdout == "refused\n" and not (tmp_path / "f").exists()
    with pytest.raises(PermissionError, match="sandbox \\(read-only\\)"):
        asyncio.run(env.write_file("f", "x"))


def test_the_sandbox_option_is_refused_with_an_environment_of_ones_own(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="wrap your own env"):
        QueryOptions(env=LocalExecutionEnvironment(tmp_path), sandbox="read-only").build_env()
    with pytest.raises(ValueError, match="unknown sandbox mode"):
        QueryOptions(cwd=tmp_path, sandbox="off").build_env()


def test_additional_directories_are_writable_in_workspace_write(tmp_path: Path) -> None:
    require_bwrap()
    (tmp_path / "ws").mkdir()
    extra = outside_dir()
    try:
        (extra / "more").mkdir()
        options = QueryOptions(
            cwd=tmp_path / "ws", sandbox="workspace-write", additional_directories=[str(extra / "more")]
        )
        env = options.build_env()
        result = asyncio.run(env.exec_command(f"touch {extra}/more/ok && touch {extra}/not-ok; echo done"))
        assert "done" in result.stdout
        assert (extra / "more" / "ok").exists() and not (extra / "not-ok").exists()
    finally:
        shutil.rmtree(extra, ignore_errors=True)

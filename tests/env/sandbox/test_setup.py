"""Policies that cannot take effect are refused; a missing bwrap or missing user namespaces are
clear errors (checked with real processes: a path with no bwrap, a script that fails as bwrap
does, and the real bwrap run where user namespaces are forbidden)."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from ra.env import LocalExecutionEnvironment
from ra.env.sandbox import SandboxedExecutionEnvironment, SandboxPolicy, SandboxUnavailable, check_sandbox

from .support import require_bwrap


def test_modes_are_codex_spellings_only() -> None:
    for mode in ("read-only", "workspace-write", "danger-full-access"):
        assert SandboxPolicy(mode).mode == mode
    for bad in ("off", "readonly", "workspace_write", "full", ""):
        with pytest.raises(ValueError, match="read-only, workspace-write, danger-full-access"):
            SandboxPolicy(bad)


def test_settings_that_cannot_take_effect_are_refused() -> None:
    with pytest.raises(ValueError, match="only to the workspace-write"):
        SandboxPolicy("read-only", writable_roots=("/srv",))
    with pytest.raises(ValueError, match="confined sandbox mode"):
        SandboxPolicy("danger-full-access", network=False)
    with pytest.raises(ValueError, match="list of directories"):
        SandboxPolicy("workspace-write", writable_roots="/srv")  # type: ignore[arg-type]
    assert SandboxPolicy("read-only").network_allowed is False
    assert SandboxPolicy("danger-full-access").network_allowed is True


def test_a_missing_writable_root_is_refused(tmp_path: Path) -> None:
    require_bwrap()
    with pytest.raises(ValueError, match="not an existing directory"):
        policy = SandboxPolicy("workspace-write", writable_roots=(str(tmp_path / "no"),))
        SandboxedExecutionEnvironment(LocalExecutionEnvironment(tmp_path), policy)


def test_a_missing_bwrap_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SandboxUnavailable, match="install the bubblewrap package"):
        check_sandbox(SandboxPolicy("read-only"), bwrap=str(tmp_path / "bwrap"))
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    monkeypatch.setattr("os.access", lambda *_: False)  # and no /usr/bin/bwrap either
    with pytest.raises(SandboxUnavailable, match="not installed: install the bubblewrap package"):
        SandboxedExecutionEnvironment(LocalExecutionEnvironment(tmp_path), "workspace-write")
    check_sandbox(SandboxPolicy("danger-full-access"))  # needs nothing


def _script(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_user_namespaces_off_names_the_sysctls(tmp_path: Path) -> None:
    """A bwrap that fails as the real one does on Debian with unprivileged user namespaces off."""
    fake = _script(
        tmp_path / "bwrap",
        'echo "bwrap: No permissions to creating new namespace, likely because the kernel does not allow '
        "non-privileged user namespaces. On e.g. debian this can be enabled with 'sysctl "
        "kernel.unprivileged_userns_clone=1'.\" >&2; exit 1",
    )
    with pytest.raises(SandboxUnavailable, match=r"user\.max_user_namespaces") as caught:
        SandboxedExecutionEnvironment(LocalExecutionEnvironment(tmp_path), "read-only", bwrap=fake)
    assert "kernel.apparmor_restrict_unprivileged_userns" in str(caught.value)
    assert "No permissions to creating new namespace" in str(caught.value)


def test_the_real_bwrap_where_user_namespaces_are_forbidden(tmp_path: Path) -> None:
    """The real bwrap, started inside a sandbox that forbids further user namespaces: its own
    error (ENOSPC from the kernel) becomes the same clear message."""
    real = require_bwrap()
    fake = _script(
        tmp_path / "bwrap",
        f'exec {real} --unshare-user --unshare-pid --disable-userns --ro-bind / / --dev /dev --proc /proc {real} "$@"',
    )
    with pytest.raises(SandboxUnavailable, match="user namespaces are not available") as caught:
        check_sandbox(SandboxPolicy("workspace-write"), bwrap=fake)
    assert "Creating new namespace failed" in str(caught.value)


def test_another_bwrap_failure_is_reported_as_it_is(tmp_path: Path) -> None:
    fake = _script(tmp_path / "bwrap", "echo 'bwrap: something else broke' >&2; exit 1")
    with pytest.raises(SandboxUnavailable, match="failed its self-test: bwrap: something else broke"):
        check_sandbox(SandboxPolicy("read-only"), bwrap=fake)


def test_only_a_local_environment_can_be_sandboxed_and_only_once(tmp_path: Path) -> None:
    require_bwrap()
    inner = LocalExecutionEnvironment(tmp_path)
    SandboxedExecutionEnvironment(inner, "read-only")
    with pytest.raises(ValueError, match="already wrapped"):
        SandboxedExecutionEnvironment(inner, "workspace-write")
    with pytest.raises(TypeError, match="LocalExecutionEnvironment"):
        SandboxedExecutionEnvironment(object(), "read-only")  # type: ignore[arg-type]


def test_the_inner_environment_is_confined_too(tmp_path: Path) -> None:
    """Whoever holds the wrapped environment (a subagent's, a tool's) runs its commands sandboxed."""
    require_bwrap()
    inner = LocalExecutionEnvironment(tmp_path)
    SandboxedExecutionEnvironment(inner, "read-only")
    result = asyncio.run(inner.exec_command("touch f || echo refused"))
    assert "refused" in result.stdout and not (tmp_path / "f").exists()


def test_tmpdir_is_writable_unless_it_opens_up_too_much(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_bwrap()
    (tmp_path / "ws").mkdir()
    (tmp_path / "tmpdir").mkdir()

    def roots(tmpdir: str) -> tuple[str, ...]:
        monkeypatch.setenv("TMPDIR", tmpdir)
        env = SandboxedExecutionEnvironment(LocalExecutionEnvironment(tmp_path / "ws"), "workspace-write")
        return env.writable_roots

    assert str((tmp_path / "tmpdir").resolve()) in roots(str(tmp_path / "tmpdir"))
    assert "/" not in roots("/")
    home = Path.home().resolve()
    assert str(home) not in roots(str(home)) and str(home.parent) not in roots(str(home.parent))


def test_the_cli_turns_an_unavailable_sandbox_into_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ra.cli.config import ConfigError, Flags, resolve
    from ra.cli.runner import confine

    def missing(path: str | None = None) -> str:
        raise SandboxUnavailable("the sandbox needs bubblewrap (bwrap), which is not installed: install ...")

    monkeypatch.setattr("ra.env.sandbox.environment.find_bwrap", missing)
    settings = resolve(Flags(cwd=str(tmp_path), sandbox="read-only", base_url="http://127.0.0.1:9/v1"), {})
    with pytest.raises(ConfigError, match="--sandbox read-only: the sandbox needs bubblewrap"):
        confine(settings.sandbox, LocalExecutionEnvironment(tmp_path))


def test_a_missing_bwrap_skips_the_tests_here_and_fails_them_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.delenv("RA_TEST_REQUIRE_PROGRAMS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="bwrap"):
        require_bwrap()
    monkeypatch.setenv("RA_TEST_REQUIRE_PROGRAMS", "1")
    with pytest.raises(pytest.fail.Exception, match="RA_TEST_REQUIRE_PROGRAMS"):
        require_bwrap()

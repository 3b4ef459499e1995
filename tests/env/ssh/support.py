"""A real OpenSSH server on 127.0.0.1 for the SSH environment's tests.

Each ``SshServer`` has its own throwaway host key, client key, ``authorized_keys`` and
``known_hosts`` in a temporary directory, and runs ``/usr/sbin/sshd -D -e`` on a free port with key
login only (the tests run as root, as CI does). The "remote" is this machine, so a test can look
at the remote side's processes and files directly.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"
SFTP_SERVER_CANDIDATES = (
    "/usr/lib/openssh/sftp-server",
    "/usr/libexec/openssh/sftp-server",
    "/usr/libexec/sftp-server",
)


def require_sshd() -> None:
    """Skip (or, in CI, fail) when the programs the real-server tests need are missing.

    CI installs openssh-server and sets ``RA_TEST_REQUIRE_PROGRAMS=1``: there a missing program is
    a broken setup, not a reason to skip."""
    missing = [p for p in (SSHD, shutil.which("ssh-keygen")) if p is None or not os.access(p, os.X_OK)]
    reason = ""
    if missing:
        reason = "sshd or ssh-keygen is not installed (Debian: openssh-server, openssh-client)"
    elif os.geteuid() != 0:
        reason = "the real-sshd tests log in as root with a throwaway key, so they must run as root"
    else:
        try:
            import asyncssh  # noqa: F401
        except ImportError:
            reason = "asyncssh is not installed (pip install 'ra-agent[ssh]')"
    if not reason:
        return
    if os.environ.get("RA_TEST_REQUIRE_PROGRAMS"):
        pytest.fail(f"RA_TEST_REQUIRE_PROGRAMS is set but {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ra-test", "-f", str(path)],
        check=True,
        capture_output=True,
        timeout=30,
    )


class SshServer:
    """One sshd with its keys. ``start()`` waits (bounded) until it accepts connections."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.host_key = self.dir / "host_ed25519"
        self.client_key = self.dir / "client_ed25519"
        _keygen(self.host_key)
        _keygen(self.client_key)
        (self.dir / "authorized_keys").write_text(self.client_key.with_suffix(".pub").read_text())
        self.port = _free_port()
        self.known_hosts = self.dir / "known_hosts"
        host_pub = self.host_key.with_suffix(".pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.dir / "sshd.log"

    def config(self) -> Path:
        sftp = next((p for p in SFTP_SERVER_CANDIDATES if os.path.exists(p)), "internal-sftp")
        path = self.dir / "sshd_config"
        path.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key}",
                    f"AuthorizedKeysFile {self.dir / 'authorized_keys'}",
                    f"PidFile {self.dir / 'sshd.pid'}",
                    "PermitRootLogin prohibit-password",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",
                    # Like a real host: no variables are accepted from the client (AcceptEnv unset).
                    # bash sources ~/.bashrc for commands run by sshd unless SHLVL says it is nested;
                    # this machine's ~/.bashrc takes ~0.3 s (pyenv), which every command would pay.
                    "SetEnv SHLVL=1",
                    f"Subsystem sftp {sftp}",
                    "LogLevel ERROR",
                    "",
                ]
            )
        )
        return path

    def start(self, timeout_s: float = 10.0) -> SshServer:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # the privilege separation directory
        config = self.config()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=log, start_new_session=True
            )
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"sshd did not listen on port {self.port} within {timeout_s} s")
            time.sleep(0.05)

    def sshd_pids(self) -> list[int]:
        """The listener and every sshd process under it (one per connection): not the users'
        commands, which run under them."""
        if self.proc is None:
            return []
        children: dict[int, list[int]] = {}
        names: dict[int, str] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            comm = data[data.index(b"(") + 1 : data.rindex(b")")].decode(errors="replace")
            ppid = int(data.rpartition(b")")[2].split()[1])
            children.setdefault(ppid, []).append(int(name))
            names[int(name)] = comm
        found, stack = [], [self.proc.pid]
        while stack:
            pid = stack.pop()
            if pid == self.proc.pid or names.get(pid, "").startswith("sshd"):
                found.append(pid)
                stack.extend(children.get(pid, []))
        return found

    def kill(self) -> None:
        """SIGKILL the listener and every connection's sshd: connections drop at once."""
        for pid in self.sshd_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)

    def stop(self) -> None:
        self.kill()
        self.proc = None

    def environment_kwargs(self) -> dict[str, object]:
        """What ``SshExecutionEnvironment`` needs to reach this server."""
        return {
            "host": "127.0.0.1",
            "port": self.port,
            "username": "root",
            "client_keys": [str(self.client_key)],
            "known_hosts": str(self.known_hosts),
        }


@contextlib.contextmanager
def running_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """A real sshd (required: see :func:`require_sshd`) in a fresh directory, stopped afterwards."""
    require_sshd()
    server = SshServer(tmp_path_factory.mktemp("sshd")).start()
    try:
        yield server
    finally:
        server.stop()

"""Shared by the sandbox tests: bwrap or a skip (a failure in CI), and environments to test."""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ra.env import LocalExecutionEnvironment
from ra.env.sandbox import SandboxedExecutionEnvironment, SandboxPolicy

GRACE_MS = 200
CAP = 64 * 1024


def require_bwrap() -> str:
    """The bwrap executable. Missing: skip, unless RA_TEST_REQUIRE_PROGRAMS is set (CI installs
    bubblewrap and sets it), where a missing bwrap must fail rather than quietly skip."""
    found = shutil.which("bwrap")
    if found is None:
        if os.environ.get("RA_TEST_REQUIRE_PROGRAMS"):
            pytest.fail("bwrap is not installed but RA_TEST_REQUIRE_PROGRAMS is set (install bubblewrap)")
        pytest.skip("bwrap (bubblewrap) is not installed")
    return found


def sandboxed(root: Path | str, mode: str = "workspace-write", **policy: object) -> SandboxedExecutionEnvironment:
    require_bwrap()
    inner = LocalExecutionEnvironment(root, kill_grace_ms=GRACE_MS, background_grace_ms=200, output_memory_cap=CAP)
    return SandboxedExecutionEnvironment(inner, SandboxPolicy(mode, **policy))  # type: ignore[arg-type]


def outside_dir() -> Path:
    """A fresh directory on the host that no sandbox here may write: not under /tmp, $TMPDIR or
    a test's workspace (/var/tmp, else the home directory). The caller removes it."""
    import tempfile

    for base in ("/var/tmp", os.path.expanduser("~")):
        if os.path.isdir(base) and os.access(base, os.W_OK):
            real = os.path.realpath(base)
            tmpdir = os.path.realpath(os.environ.get("TMPDIR") or "/tmp")
            if not (real == tmpdir or real.startswith(tmpdir + os.sep) or real.startswith("/tmp")):
                return Path(tempfile.mkdtemp(prefix="ra-sandbox-outside-", dir=real))
    pytest.skip("no writable directory outside /tmp and $TMPDIR to aim at")


@contextlib.contextmanager
def outside_tree() -> Iterator[Path]:
    """:func:`outside_dir` (bwrap required first), removed afterwards: the ``outside`` fixtures."""
    require_bwrap()
    path = outside_dir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class HostServer(http.server.ThreadingHTTPServer):
    """An HTTP server on the host's 127.0.0.1 that a sandboxed command must not reach: it answers
    every GET with ``body`` and counts the requests that got through (``hits``)."""

    hits = 0
    body = b"from-the-host"


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        server: HostServer = self.server  # type: ignore[assignment]
        server.hits += 1
        self.send_response(200)
        self.send_header("Content-Length", str(len(server.body)))
        self.end_headers()
        self.wfile.write(server.body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def host_server(body: bytes = b"from-the-host") -> Iterator[HostServer]:
    """A :class:`HostServer` serving on a thread until the block ends."""
    server = HostServer(("127.0.0.1", 0), _Answer)
    server.body = body
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)

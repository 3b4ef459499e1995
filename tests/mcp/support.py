"""Helpers for the MCP tests: the kit server over stdio and over HTTP, and process checks."""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ra.env import proctree
from ra.mcp import HttpServer, StdioServer

SERVERS = Path(__file__).resolve().parent / "servers"
KIT = str(SERVERS / "kit.py")
#: The npm reference server, pinned (the lead preinstalls it in CI: see docs/mcp.md).
EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"


def kit(*args: str, **options: object) -> StdioServer:
    """The kit server over stdio."""
    return StdioServer(sys.executable, (KIT, *args), **options)  # type: ignore[arg-type]


def _read_port(process: subprocess.Popen[bytes], timeout: float) -> int:
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    buffer = b""
    try:
        while time.monotonic() < deadline:
            if not selector.select(max(deadline - time.monotonic(), 0.01)):
                continue
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                break
            buffer += chunk
            for line in buffer.decode(errors="replace").splitlines():
                if line.startswith("PORT "):
                    return int(line.split()[1])
                if "listening on port" in line or "running on port" in line:  # server-everything
                    return int(line.rsplit(" ", 1)[1])
    finally:
        selector.close()
    raise AssertionError(f"the HTTP server did not report its port within {timeout}s: {buffer!r}")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Kill a test server's whole process group and reap it (bounded)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


@contextmanager
def http_kit(*args: str, env: dict[str, str] | None = None, timeout: float = 20.0) -> Iterator[str]:
    """The kit server over streamable HTTP on 127.0.0.1; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, KIT, "--http", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    try:
        port = _read_port(process, timeout)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


def npm_everything() -> list[str] | None:
    """The command that runs server-everything: from ``RA_TEST_NPM_DIR`` (an ``npm install
    --prefix`` directory), else through ``npx -y``; None when neither node nor npx is here."""
    if shutil.which("node") is None:
        return None
    prefix = os.environ.get("RA_TEST_NPM_DIR")
    if prefix:
        script = Path(prefix) / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
        if script.is_file():
            return ["node", str(script)]
    npx = shutil.which("npx")
    if npx is None:
        return None
    return [npx, "-y", EVERYTHING]


def free_port() -> int:
    """A port nothing listens on now (for a server that cannot bind port 0 and say which it got)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http(url: str, **options: object) -> HttpServer:
    return HttpServer(url, **options)  # type: ignore[arg-type]


def leftovers(cookie: str) -> set[int]:
    """Live processes that still carry a server's cookie."""
    return proctree.find_by_cookie(cookie)


def wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proctree.alive(pid):
            return True
        time.sleep(0.02)
    return not proctree.alive(pid)

"""Finding bubblewrap, checking it works here, and the ``bwrap`` command line for a policy.

bwrap builds the sandbox from namespaces an unprivileged user may create: a user namespace (no
capabilities inside, even for root: ``--cap-drop ALL``; no further user namespaces where bwrap
can forbid them), a PID namespace (the command sees only its own processes, and ``/proc`` is a new
one), and without the network, a network namespace holding only a loopback device. The file
system is the host's, bound read-only, with ``/dev`` minimal and the writable roots bound on top.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable

__all__ = ["SandboxUnavailable", "bind_args", "check_bwrap", "find_bwrap", "namespace_args"]

#: What to install, by distribution (the message for a missing bwrap).
_INSTALL = (
    "install the bubblewrap package (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; "
    "Arch: pacman -S bubblewrap)"
)
_USERNS_HELP = (
    "user namespaces are not available to this user. Allow them with: sysctl -w user.max_user_namespaces=15000 "
    "(it must be above 0); on Debian kernels also sysctl -w kernel.unprivileged_userns_clone=1; on Ubuntu 23.10 "
    "and later sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile for bwrap); in "
    "a container, run it with user namespaces allowed (e.g. docker --security-opt seccomp=unconfined)"
)
#: bwrap's words when it cannot create the namespaces (kernel, sysctl, AppArmor or seccomp refusals).
_NAMESPACE_ERRORS = ("namespace", "uid map", "uid_map", "setting up uid", "loopback", "operation not permitted")
_PROBE_TIMEOUT_S = 10.0

#: Results of the self-test, per bwrap executable: whether it accepts --disable-userns.
_checked: dict[tuple[str, float, bool], bool] = {}


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run here; the message says what to install or enable."""


def find_bwrap(path: str | None = None) -> str:
    """The bwrap executable: ``path`` if given, else ``bwrap`` on PATH (then /usr/bin/bwrap)."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(f"the sandbox needs Linux (it runs commands under bubblewrap); this is {sys.platform}")
    if path is not None:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise SandboxUnavailable(f"bubblewrap (bwrap) was not found at {path}: {_INSTALL}")
        return path
    found = shutil.which("bwrap") or ("/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None)
    if found is None:
        raise SandboxUnavailable(f"the sandbox needs bubblewrap (bwrap), which is not installed: {_INSTALL}")
    return found


def namespace_args(*, network: bool, disable_userns: bool) -> list[str]:
    """The namespaces and the dropped capabilities, the same for every mode."""
    # No UTS or cgroup namespace: without capabilities a command can change neither the hostname
    # nor the cgroups (and /sys is read-only), and every namespace costs time on every command.
    args = ["--unshare-user", "--unshare-pid", "--unshare-ipc"]
    if disable_userns:
        args.append("--disable-userns")
    if not network:
        args.append("--unshare-net")
    args += ["--cap-drop", "ALL"]
    return args


def check_bwrap(bwrap: str, *, network: bool) -> bool:
    """Run ``bwrap ... true`` once per executable and raise :class:`SandboxUnavailable` with the
    reason when it fails. Returns whether this bwrap accepts ``--disable-userns`` (0.8 and later),
    which stops a sandboxed command from making a user namespace of its own."""
    try:
        key = (bwrap, os.stat(bwrap).st_mtime, network)
    except OSError as exc:
        raise SandboxUnavailable(f"bubblewrap (bwrap) cannot be used at {bwrap}: {exc.strerror}: {_INSTALL}") from None
    if key in _checked:
        return _checked[key]
    stderr = _probe(bwrap, network=network, disable_userns=True)
    disable_userns = True
    if stderr is not None and "disable-userns" in stderr:  # an older bwrap: run without it
        disable_userns = False
        stderr = _probe(bwrap, network=network, disable_userns=False)
    if stderr is not None:
        lowered = stderr.lower()
        if any(words in lowered for words in _NAMESPACE_ERRORS):
            raise SandboxUnavailable(f"bubblewrap cannot build the sandbox: {_USERNS_HELP} (bwrap said: {stderr})")
        raise SandboxUnavailable(f"bubblewrap ({bwrap}) failed its self-test: {stderr or 'no message'}")
    _checked[key] = disable_userns
    return disable_userns


def _probe(bwrap: str, *, network: bool, disable_userns: bool) -> str | None:
    """None when bwrap could run ``true`` in a sandbox like the real one, else what it said."""
    argv = [
        bwrap,
        *namespace_args(network=network, disable_userns=disable_userns),
        *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--", "true"),
    ]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"it did not finish within {_PROBE_TIMEOUT_S:g} s"
    except OSError as exc:
        return f"it could not be started: {exc.strerror or exc}"
    if done.returncode == 0:
        return None
    text = done.stderr.decode("utf-8", "replace").strip() or done.stdout.decode("utf-8", "replace").strip()
    return _one_line(text) or f"exit code {done.returncode}"


def _one_line(text: str, limit: int = 500) -> str:
    joined = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."


def bind_args(flag: str, paths: Iterable[str]) -> list[str]:
    out: list[str] = []
    for path in paths:
        out += [flag, path, path]
    return out

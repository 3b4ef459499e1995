"""What a sandbox allows: the mode (codex's three names), the network, extra writable directories.

A policy is plain data, checked when it is made: a setting either takes effect or is refused with
a ValueError that says what is accepted, so a typo in a config file cannot leave a run unconfined.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["MODES", "SandboxPolicy"]

#: The modes, as codex spells them (``--sandbox`` / ``sandbox_mode``).
MODES = ("read-only", "workspace-write", "danger-full-access")


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """``mode``: ``"read-only"`` (nothing writable but a private /tmp), ``"workspace-write"`` (the
    working directory, /tmp, $TMPDIR and ``writable_roots``; ``.git`` hooks and config stay
    read-only) or ``"danger-full-access"`` (no sandbox at all).

    ``network``: ``None`` means the mode's default - off in the two confined modes, on (unconfined)
    in ``danger-full-access``. ``True`` lets a confined mode reach the network; ``False`` with
    ``danger-full-access`` is refused, since nothing there could take the network away.
    ``writable_roots`` (existing directories) only mean something in ``workspace-write``.
    """

    mode: str
    network: bool | None = None
    writable_roots: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown sandbox mode {self.mode!r}: use one of {', '.join(MODES)}")
        if self.network is not None and not isinstance(self.network, bool):
            raise ValueError(f"sandbox network must be true or false, got {self.network!r}")
        if isinstance(self.writable_roots, str | bytes):
            raise ValueError("writable_roots must be a list of directories, not one string")
        roots = []
        for root in self.writable_roots:
            if not isinstance(root, str) or not root or "\0" in root:
                raise ValueError(f"a writable root must be a non-empty path, got {root!r}")
            roots.append(os.path.abspath(os.path.expanduser(root)))
        object.__setattr__(self, "writable_roots", tuple(roots))
        if self.mode == "danger-full-access" and self.network is False:
            raise ValueError("network=False needs a confined sandbox mode (read-only or workspace-write)")
        if roots and self.mode != "workspace-write":
            raise ValueError(f"writable_roots apply only to the workspace-write mode, not to {self.mode}")

    @property
    def confined(self) -> bool:
        """False for ``danger-full-access``: commands run as they would without a sandbox."""
        return self.mode != "danger-full-access"

    @property
    def network_allowed(self) -> bool:
        return (not self.confined) if self.network is None else self.network

"""A Linux sandbox for commands: bubblewrap namespaces around a local environment (docs/environments.md).

Not imported by ``import ra`` or ``ra.env``: import ``ra.env.sandbox`` where a sandbox is wanted.
"""

from .bwrap import SandboxUnavailable
from .environment import SandboxedExecutionEnvironment, check_sandbox
from .policy import MODES, SandboxPolicy

__all__ = ["MODES", "SandboxPolicy", "SandboxUnavailable", "SandboxedExecutionEnvironment", "check_sandbox"]

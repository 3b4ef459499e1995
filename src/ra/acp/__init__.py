"""ra.acp: ra as an Agent Client Protocol agent, for editors (Zed, JetBrains, Neovim, Emacs).

``ra acp`` (:mod:`ra.cli.acp_command`) builds an :class:`AcpSetup` from ra's usual configuration
and runs :func:`serve` on stdio. The protocol itself comes from the optional
``agent-client-protocol`` package (``pip install 'ra-agent[acp]'``), imported only when the agent
runs, so ``import ra`` never pays for it. docs/editors.md says what is supported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "AcpSetup": ".setup",
    "RaAcpAgent": ".agent",
    "serve": ".agent",
    "AcpEnvironment": ".environment",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from .agent import RaAcpAgent, serve
    from .environment import AcpEnvironment
    from .setup import AcpSetup

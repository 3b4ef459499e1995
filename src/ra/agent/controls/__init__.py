"""The decision seam: controls that the loop asks at fixed points, and the decisions they return.

:mod:`.chain` holds the points and their order (``Control``, ``Controls``); :mod:`.decisions` the
values a control answers with; :mod:`.limits` and :mod:`.budget` the built-in controls that stop
an input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ra._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "Admit": ".decisions",
    "Allow": ".decisions",
    "Continue": ".decisions",
    "CancelCompaction": ".decisions",
    "UseSummary": ".decisions",
    "Deny": ".decisions",
    "Stop": ".decisions",
    "Control": ".chain",
    "Controls": ".chain",
    "Limits": ".limits",
    "Budget": ".budget",
    "UnknownPriceError": ".budget",
}

__all__, __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:  # pragma: no cover
    from .budget import Budget, UnknownPriceError
    from .chain import Control, Controls
    from .decisions import Admit, Allow, CancelCompaction, Continue, Deny, Stop, UseSummary
    from .limits import Limits

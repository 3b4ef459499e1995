"""The documented import path of the in-process local provider::

    from ra.llm.providers.local_llama import LocalLlamaAdapter

The implementation lives in the :mod:`ra.llm.providers.local` package, split by job (loading,
prompt rendering, grammars, output scanning, events, the adapter); its docstring describes the
design. This module re-exports the package's public names so that this path, used by the docs,
the CLI, the benchmarks and existing code, keeps working. Internal helpers are not re-exported:
import them from the submodule that defines them (and patch them there).
"""

from __future__ import annotations

from .local import *  # noqa: F403 - this module is the package's public names under an older path
from .local import __all__ as __all__

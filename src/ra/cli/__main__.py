"""Entry point of the ``ra`` console script and of ``python -m ra.cli``."""

from __future__ import annotations

import gc
import sys


def main(argv: list[str] | None = None) -> int:
    """Run ``ra`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    Called as the command (no ``argv``), the process ends right after: everything it made is then
    moved out of the collector's reach (``gc.freeze``), because the interpreter's last collections
    at exit walked every object the run had created - 40-80 ms between the answer and the shell
    prompt. Nothing is lost: files and records are written unbuffered or flushed before this
    (stdout and stderr are flushed by the interpreter, logging and exporters by their exit
    handlers), and the memory goes back with the process."""
    from .app import run

    code = run(sys.argv[1:] if argv is None else argv)
    if argv is None:
        gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(main())

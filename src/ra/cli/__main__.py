"""Entry point of the ``ra`` console script and of ``python -m ra.cli``."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run ``ra`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    from .app import run

    return run(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())

"""Shell completion for ``ra`` (bash, zsh, fish), through argcomplete.

``ra completion SHELL`` prints the script a shell loads once (``eval "$(ra completion bash)"`` in
``~/.bashrc``, the same with ``zsh``, ``ra completion fish | source`` in fish's config). The script
calls ``ra`` back with argcomplete's environment variables set; :func:`complete` answers from the
real argument parser, so flags, choices and values can never drift from what ``ra`` accepts.
Beyond argparse's own choices it offers the catalogue's model ids for ``--model`` and
``--fallback-model`` (of the ``--provider`` given, if any), the permission modes, image files for
``--image``, JSON files for ``--mcp-config``, directories for ``-C``, the commands ``models``,
``sessions``, ``replay``, ``batch``, ``mcp`` and ``completion`` where a task would start, ``show`` /
``delete`` after ``sessions``, ``list`` after ``mcp`` and ``.jsonl`` files after ``replay`` (records)
and ``batch`` (tasks).

argcomplete is imported only when a shell asks (or a script is printed), so ``ra``'s start-up
does not pay for it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from .errors import UsageError

__all__ = ["COMMANDS", "SHELLS", "complete", "is_completing", "shell_script"]

SHELLS = ("bash", "zsh", "fish")
#: ``ra``'s commands: a first word that is one of these is a command, not a task.
COMMANDS = ("models", "sessions", "replay", "batch", "mcp", "completion")


def shell_script(argv: list[str]) -> str:
    """The completion script for the shell named in ``argv`` (``ra completion SHELL``)."""
    if len(argv) != 1 or argv[0] not in SHELLS:
        raise UsageError(f"usage: ra completion {{{','.join(SHELLS)}}}")
    import argcomplete

    return argcomplete.shellcode(["ra"], shell=argv[0])


def is_completing() -> bool:
    """True when a shell's completion script runs ``ra`` to ask for completions."""
    return "_ARGCOMPLETE" in os.environ


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell (argcomplete writes the candidates and exits the process)."""
    import argcomplete
    from argcomplete.completers import DirectoriesCompleter, FilesCompleter

    from .policy import PERMISSION_MODES

    completers: dict[str, Any] = {
        "task": _task_completer,
        "model": _model_completer,
        "fallback_model": _model_completer,
        "permission_mode": argcomplete.completers.ChoicesCompleter(PERMISSION_MODES),
        "image": FilesCompleter(allowednames=("png", "jpg", "jpeg", "gif", "webp")),
        "cwd": DirectoriesCompleter(),
        "output_trajectory": FilesCompleter(),
        "mcp_config": FilesCompleter(allowednames=("json",)),
    }
    for action in parser._actions:  # argparse keeps no public list; argcomplete reads the same one
        completer = completers.get(action.dest)
        if completer is not None:
            action.completer = completer  # type: ignore[attr-defined]
    # Flags are offered once a word starts with '-': a bare TAB after `ra completion ` means the shell.
    argcomplete.autocomplete(parser, always_complete_options=False)


def _task_completer(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    words = list(getattr(parsed_args, "task", None) or [])
    if not words:
        return [c for c in COMMANDS if c.startswith(prefix)]
    if words == ["completion"]:
        return [s for s in SHELLS if s.startswith(prefix)]
    if words in (["replay"], ["batch"]):
        from argcomplete.completers import FilesCompleter

        return list(FilesCompleter(allowednames=("jsonl",))(prefix))
    if words == ["sessions"]:
        return [s for s in ("show", "delete") if s.startswith(prefix)]
    if words == ["mcp"]:
        return [s for s in ("list",) if s.startswith(prefix)]
    return []  # a task is free text


def _model_completer(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    from ra.llm.catalog import list_models

    provider = getattr(parsed_args, "provider", None)
    from .providers import catalogue_family

    family = catalogue_family(provider)
    if provider == "local":
        return []
    return [info.id for info in list_models(family) if info.id.startswith(prefix)]

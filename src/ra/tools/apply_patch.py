"""``apply_patch``: create, update, rename and delete files from one patch, all or nothing.

Accepts codex's v4a format (coding-agent-loop-spec Appendix A: ``*** Begin Patch`` ...
``*** End Patch``) and ordinary unified diffs (``git diff``, ``diff -u``), which ra-spec's
``apply_patch(patch)`` tool names. Parsing lives in :mod:`ra.tools.patch_parse`, application in
:mod:`ra.tools.patch_apply`, lenient matching in :mod:`ra.tools.fuzzy`.

Where ra differs from the standalone codex tool, on purpose:

* A failing patch changes nothing (codex's standalone tool keeps the operations before the failure;
  its agent-side tool, like ra, verifies the whole patch first).
* A pure-addition hunk with an ``@@ hint`` inserts its lines right after the hint line; without a
  hint it appends at the end of the file, as codex does.
* ``*** Update File`` with ``*** Move to`` and no hunks is a plain rename.

Everything else follows codex: Add overwrites an existing file, Move overwrites its destination,
an updated file always ends with a newline, hunks are searched forward with the exact / trailing
whitespace / whitespace / punctuation ladder.
"""

from __future__ import annotations

from .patch_apply import (
    FileChange,
    PatchApplyError,
    PatchFileSystem,
    PatchProblem,
    PatchResult,
    PatchWriteError,
    apply_parsed_patch,
)
from .patch_parse import FileOp, Hunk, OpKind, Patch, PatchError, PatchParseError, parse_patch

__all__ = [
    "FileChange",
    "FileOp",
    "Hunk",
    "OpKind",
    "Patch",
    "PatchApplyError",
    "PatchError",
    "PatchFileSystem",
    "PatchParseError",
    "PatchProblem",
    "PatchResult",
    "PatchWriteError",
    "apply_patch",
    "parse_patch",
]


async def apply_patch(text: str, env: PatchFileSystem) -> PatchResult:
    """Parse ``text`` and apply it through ``env``; raise :class:`PatchError` (nothing written) on failure.

    ``env`` is any object with the file methods of :class:`ra.env.base.ExecutionEnvironment`
    (``read_bytes``, ``write_file``, ``delete_file``, ``move_file``, ``file_exists``,
    ``is_directory``, ``resolve``). Relative paths in the patch resolve against it.
    ``str(result)`` is the summary to give the model.
    """
    return await apply_parsed_patch(parse_patch(text), env)

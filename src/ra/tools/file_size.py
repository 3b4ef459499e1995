"""How big a file is before a tool reads all of it.

``read_bytes`` returns a whole file, and the editing tools need whole files (a replacement, a
diff, a patch). A file of gigabytes - a log, a database, a sparse file that costs no disk - would
then take that much memory, in one tool call the model made by mistake. So a tool that reads a
whole file asks its size first and refuses (or skips, or leaves out the diff) past its bound:

* :data:`MAX_EDIT_BYTES` for ``edit_file`` and ``apply_patch`` (an error naming the size and what
  to do instead) and for ``write_file``'s diff of the text it replaces (the write goes ahead; the
  diff is "unknown");
* ``read_many_files`` skips files past its own bound (:mod:`ra.tools.builtin.batch`).

The size comes from the environment's ``file_size(path)`` when it has one (the local environment
and ra's wrappers do), else from a listing of the file's directory, so any
:class:`~ra.env.ExecutionEnvironment` works.
"""

from __future__ import annotations

import posixpath
from typing import Any

__all__ = ["MAX_EDIT_BYTES", "file_size", "too_large_message"]

#: The largest file the editing tools read whole (16 MiB: far past any source file).
MAX_EDIT_BYTES = 16 * 1024 * 1024


async def file_size(env: Any, path: str) -> int | None:
    """The size of the file at ``path`` in bytes, or None when it cannot be told (then the caller
    reads as before: an environment that cannot stat is no worse off than without the bound)."""
    sized = getattr(env, "file_size", None)
    if sized is not None:
        try:
            return int(await sized(path))
        except (OSError, ValueError):
            return None
    listing = getattr(env, "list_directory", None)
    if listing is None:  # a bare file system (the editing tools' protocols): read as before
        return None
    resolve = getattr(env, "resolve", None)
    full = resolve(path) if resolve is not None else path
    parent, name = posixpath.split(full)
    try:
        entries = await listing(parent or ".", 1)
    except (OSError, ValueError):
        return None
    for entry in entries:
        if entry.name == name:
            return entry.size
    return None


def too_large_message(path: str, size: int, limit: int, what: str) -> str:
    return (
        f"{path} is {size:,} bytes, larger than the {limit // (1024 * 1024)} MiB that {what} reads whole. "
        "Work on it with shell commands instead (e.g. sed, head, split), or read parts with read_file."
    )

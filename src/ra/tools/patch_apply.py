"""Applying a parsed patch: all of it, or none of it.

Three phases. **Verify**: every operation runs, in order, against an in-memory overlay of the files
it touches (so a later operation sees an earlier one's result); every hunk of every file is located,
every Delete/Update target is checked to be an existing file, every new text is encoded. Nothing is
written until all of that succeeded; a failure reports every problem found, each naming the file,
the hunk and what did not match. **Commit**: the overlay's final state is written. **Roll back**:
if a write fails part-way (disk full, permissions), every file already touched is restored from the
bytes read during verification.

Hunks are located by the ladder in :mod:`ra.tools.fuzzy`, always searching forward from the end of
the previous hunk so two hunks never claim the same lines.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Protocol

from .file_size import MAX_EDIT_BYTES, file_size, too_large_message
from .fuzzy import (
    LEVEL_NOTES,
    LEVELS,
    DecodedText,
    LineDoc,
    LineIndex,
    closest_region,
    format_excerpt,
    normalise,
    seek,
)
from .patch_parse import FileOp, Hunk, OpKind, Patch, PatchError

__all__ = [
    "FileChange",
    "PatchApplyError",
    "PatchFileSystem",
    "PatchProblem",
    "PatchResult",
    "PatchWriteError",
    "apply_parsed_patch",
]

_SHOW_LINES = 15


class PatchFileSystem(Protocol):
    """The part of :class:`ra.env.base.ExecutionEnvironment` that patching needs."""

    async def read_bytes(self, path: str) -> bytes: ...

    async def write_file(self, path: str, content: str | bytes) -> None: ...

    async def delete_file(self, path: str) -> None: ...

    async def move_file(self, source: str, destination: str) -> None: ...

    async def file_exists(self, path: str) -> bool: ...

    async def is_directory(self, path: str) -> bool: ...

    def resolve(self, path: str) -> str: ...


@dataclass(slots=True)
class PatchProblem:
    """One reason a patch cannot be applied."""

    path: str
    message: str
    #: 1-based hunk number within the file, when the problem is a hunk.
    hunk: int | None = None


class PatchApplyError(PatchError):
    """Verification failed; nothing was written."""

    def __init__(self, problems: list[PatchProblem]) -> None:
        head = "apply_patch failed; no files were changed."
        if len(problems) > 1:
            head += f" {len(problems)} problems:"
        super().__init__(head + "\n\n" + "\n\n".join(p.message for p in problems))
        self.problems = problems


class PatchWriteError(PatchError):
    """Writing failed part-way. ``rolled_back`` says whether every touched file was restored."""

    def __init__(self, message: str, *, rolled_back: bool, rollback_failures: list[str]) -> None:
        super().__init__(message)
        self.rolled_back = rolled_back
        self.rollback_failures = rollback_failures


@dataclass(slots=True)
class FileChange:
    kind: OpKind
    path: str
    move_to: str | None = None
    added: int = 0
    removed: int = 0
    #: How loosely hunks had to be matched, when not exactly.
    notes: list[str] = field(default_factory=list)
    #: The file's text before and after this operation (None: absent), for hosts to show a diff.
    before: str | None = field(default=None, repr=False)
    after: str | None = field(default=None, repr=False)

    @property
    def letter(self) -> str:
        return {OpKind.ADD: "A", OpKind.UPDATE: "M", OpKind.DELETE: "D"}[self.kind]

    @property
    def final_path(self) -> str:
        return self.move_to or self.path


@dataclass(slots=True)
class PatchResult:
    changes: list[FileChange]
    format: str

    @property
    def notes(self) -> list[str]:
        return [note for change in self.changes for note in change.notes]

    @property
    def summary(self) -> str:
        """codex's success text: ``A``dded, then ``M``odified (moves by their new name), then ``D``eleted."""
        out = ["Success. Updated the following files:"]
        seen: set[tuple[str, str]] = set()
        for letter in "AMD":
            for change in self.changes:
                item = (letter, change.final_path)
                if change.letter == letter and item not in seen:
                    seen.add(item)
                    out.append(f"{letter} {change.final_path}")
        notes = self.notes
        if notes:
            out.append("")
            out.extend(f"Note: {note}" for note in notes)
        return "\n".join(out)

    def __str__(self) -> str:
        return self.summary


class _Problem(Exception):
    def __init__(self, path: str, message: str, hunk: int | None = None) -> None:
        super().__init__(message)
        self.problem = PatchProblem(path, message, hunk)


@dataclass(slots=True)
class _Entry:
    key: str
    path: str
    is_dir: bool
    original: bytes | None
    current: bytes | None
    order: int


class _Overlay:
    """Files as the patch has left them so far, over the real tree, which stays untouched."""

    def __init__(self, fs: PatchFileSystem) -> None:
        self.fs = fs
        self.entries: dict[str, _Entry] = {}
        self.moves: list[tuple[str, str]] = []

    async def entry(self, path: str) -> _Entry:
        key = self.fs.resolve(path)
        found = self.entries.get(key)
        if found is not None:
            return found
        is_dir = await self.fs.is_directory(key)
        original: bytes | None = None
        if not is_dir and await self.fs.file_exists(key):
            size = await file_size(self.fs, key)
            if size is not None and size > MAX_EDIT_BYTES:
                raise _Problem(path, too_large_message(path, size, MAX_EDIT_BYTES, "apply_patch"))
            try:
                original = await self.fs.read_bytes(key)
            except OSError as exc:
                raise _Problem(path, f"{path}: cannot read the file: {_os_reason(exc)}.") from exc
        entry = _Entry(key, path, is_dir, original, original, len(self.entries))
        self.entries[key] = entry
        return entry

    async def check_parents(self, entry: _Entry) -> None:
        """A new file cannot go under a path that is (or will be) a file."""
        key = entry.key
        seen = 0
        while seen < 64:
            parent = posixpath.dirname(key) if "/" in key else ""
            if not parent or parent == key:
                return
            known = self.entries.get(parent)
            if known is not None and known.current is not None:
                raise _Problem(entry.path, f"{entry.path}: cannot create it, because {known.path} is a file.")
            if await self.fs.is_directory(parent):
                return
            if known is None and await self.fs.file_exists(parent):
                raise _Problem(entry.path, f"{entry.path}: cannot create it, because {parent} is a file.")
            key = parent
            seen += 1


async def apply_parsed_patch(patch: Patch, fs: PatchFileSystem) -> PatchResult:
    """Verify every operation of ``patch`` in memory, then write all of it (see module docstring)."""
    overlay = _Overlay(fs)
    changes: list[FileChange] = []
    problems: list[PatchProblem] = []
    failed: set[str] = set()
    for op in patch.operations:
        try:
            change = await _run_op(op, overlay, failed)
        except _Problem as exc:
            problems.append(exc.problem)
            failed.add(fs.resolve(op.path))
            if op.move_to:
                failed.add(fs.resolve(op.move_to))
            continue
        if change is not None:
            changes.append(change)
    if problems:
        raise PatchApplyError(problems)
    await _commit(overlay)
    return PatchResult(changes, patch.format)


async def _run_op(op: FileOp, overlay: _Overlay, failed: set[str]) -> FileChange | None:
    fs = overlay.fs
    keys = [fs.resolve(op.path), *(fs.resolve(p) for p in op.alt_paths)]
    if op.move_to:
        keys.append(fs.resolve(op.move_to))
    if failed.intersection(keys):
        return None  # an earlier operation on this file failed; its error already says why
    if op.kind is OpKind.ADD:
        return await _add(op, overlay)
    if op.kind is OpKind.DELETE:
        return await _delete(op, overlay)
    return await _update(op, overlay)


async def _add(op: FileOp, overlay: _Overlay) -> FileChange:
    entry = await overlay.entry(op.path)
    if entry.is_dir:
        raise _Problem(op.path, f"{op.path}: cannot add the file, a directory of that name exists.")
    if op.must_not_exist and entry.current:
        raise _Problem(
            op.path,
            f"{op.path}: the diff creates this file (--- /dev/null), but it already exists. "
            "Send a diff against its current content instead.",
        )
    await overlay.check_parents(entry)
    text = "\n".join(op.content)
    if op.content and not op.missing_newline:
        text += "\n"
    before = None if entry.current is None else DecodedText.decode(entry.current).text
    entry.current = text.encode("utf-8")
    return FileChange(OpKind.ADD, op.path, added=op.added, before=before, after=text)


async def _delete(op: FileOp, overlay: _Overlay) -> FileChange:
    entry = await overlay.entry(op.path)
    if entry.is_dir:
        raise _Problem(op.path, f"{op.path}: cannot delete it, it is a directory, not a file.")
    if entry.current is None:
        raise _Problem(op.path, f"{op.path}: cannot delete it, the file does not exist.")
    decoded = DecodedText.decode(entry.current)
    if op.hunks:
        doc, _ = _apply_hunks(LineDoc.from_text(decoded.text), op, op.path)
        if doc.lines:
            raise _Problem(
                op.path,
                f"{op.path}: the diff deletes this file, but the file has {len(doc.lines)} more line(s) than "
                "the diff removes. Re-read the file; to delete it whatever it holds, use a diff without hunks.",
            )
    entry.current = None
    return FileChange(OpKind.DELETE, op.path, removed=op.removed, before=decoded.text)


async def _update(op: FileOp, overlay: _Overlay) -> FileChange:
    entry = await overlay.entry(op.path)
    path = op.path
    if entry.current is None and not entry.is_dir:
        for alt in op.alt_paths:
            candidate = await overlay.entry(alt)
            if candidate.current is not None:
                entry, path = candidate, alt
                break
    if entry.is_dir:
        raise _Problem(path, f"{path}: cannot update it, it is a directory, not a file.")
    if entry.current is None:
        raise _Problem(
            path,
            f"{path}: cannot update it, the file does not exist. Check the path; to create a file use "
            "'*** Add File:' (or '--- /dev/null' in a unified diff).",
        )
    decoded = DecodedText.decode(entry.current)
    doc, notes = _apply_hunks(LineDoc.from_text(decoded.text), op, path)
    after = doc.to_text()
    try:
        data = decoded.encode(after)
    except UnicodeEncodeError as exc:
        raise _Problem(
            path,
            f"{path}: the new text has characters ({exc.object[exc.start : exc.end]!r}) that its encoding, "
            f"{decoded.label}, cannot store.",
        ) from exc
    target = entry
    if op.move_to:
        target = await overlay.entry(op.move_to)
        if target.is_dir:
            raise _Problem(path, f"{path}: cannot move it to {op.move_to}, which is a directory.")
        if target.key != entry.key:
            await overlay.check_parents(target)
            entry.current = None
            overlay.moves.append((entry.key, target.key))
    target.current = data
    return FileChange(
        OpKind.UPDATE,
        path,
        move_to=op.move_to,
        added=op.added,
        removed=op.removed,
        notes=notes,
        before=decoded.text,
        after=after,
    )


# -- hunks -----------------------------------------------------------------------------------------


def _apply_hunks(doc: LineDoc, op: FileOp, path: str) -> tuple[LineDoc, list[str]]:
    """The document with every hunk of ``op`` applied, plus notes on loose matches."""
    lines = doc.lines
    n = len(lines)
    index = LineIndex(lines)
    notes: list[str] = []
    cursor = 0
    shift = 0  # where unified hunks really are minus where their headers say
    # (position, old length, new lines, new line sources, order)
    edits: list[tuple[int, int, list[str], list[int], int]] = []
    touches_end: Hunk | None = None
    total = len(op.hunks)
    for number, hunk in enumerate(op.hunks, 1):
        label = _hunk_label(path, number, total, hunk)
        start = cursor
        hint_pos: int | None = None
        for hint in hunk.hints:
            found = _find_hint(index, hint, start)
            if found is None:
                raise _Problem(path, _hint_failure(label, hint, index, start), number)
            hint_pos, level = found
            if level:
                notes.append(f"{path} hunk {number}: the '@@ {hint.strip()}' line matched {_level_note(level)}.")
            start = hint_pos + 1
        old, new, sources = hunk.old_lines, hunk.new_lines, hunk.sources
        near = None if hunk.old_start is None else max(hunk.old_start - 1 + shift, 0)
        if not old:
            if hint_pos is not None:
                pos = hint_pos + 1
            elif near is not None and not hunk.end_of_file:
                pos = min(max(near, cursor), n)
            else:
                pos = n
            edits.append((pos, 0, new, sources, number))
            if hint_pos is not None or near is not None:
                cursor = pos
            if pos == n:
                touches_end = hunk
            continue
        pattern_start = cursor if hint_pos is None else hint_pos
        found = seek(index, old, pattern_start, at_end=hunk.end_of_file, near=near)
        if found is None:
            # Trailing blank context lines are often just the file's final newline, or the blank
            # lines between blocks of the patch, written out. Retry without them.
            trimmed = len(old)
            while trimmed > 1 and old[trimmed - 1] == "" and sources and sources[-1] == trimmed - 1:
                trimmed -= 1
                sources = sources[:-1]
                new = new[:-1]
            if trimmed < len(old):
                old = old[:trimmed]
                found = seek(index, old, pattern_start, at_end=hunk.end_of_file, near=near)
            if found is None:
                old, new, sources = hunk.old_lines, hunk.new_lines, hunk.sources
        if found is None:
            raise _Problem(path, _hunk_failure(label, hunk, index, pattern_start), number)
        pos, level = found
        if level:
            notes.append(f"{path} hunk {number} matched {_level_note(level)}.")
        edits.append((pos, len(old), new, sources, number))
        cursor = pos + len(old)
        if hunk.old_start is not None:
            shift = pos - (hunk.old_start - 1)
        if cursor == n:
            touches_end = hunk
    edits.sort(key=lambda e: (e[0], e[4]))
    result = _splice(doc, edits)
    if op.ensure_final_newline:
        result.final_newline = True
    elif touches_end is not None:
        if touches_end.new_missing_newline:
            result.final_newline = False
        elif touches_end.old_missing_newline:
            result.final_newline = True
    return result, notes


def _find_hint(index: LineIndex, hint: str, start: int) -> tuple[int, int] | None:
    found = seek(index, [hint], start)
    if found is not None or not hint.strip():
        return found
    # Hints are often a line's beginning ('class Foo' for 'class Foo(Base):'); accept a unique-enough
    # loose prefix match as a last resort.
    key = normalise(hint, 3)
    view = index.view(3)
    for i in range(start, len(view)):
        if view[i].startswith(key):
            return i, 3
    return None


def _splice(doc: LineDoc, edits: list[tuple[int, int, list[str], list[int], int]]) -> LineDoc:
    lines = doc.lines
    out: list[str] = []
    eols = doc.eols
    out_eols: list[str] | None = [] if eols is not None else None
    prev = 0
    for pos, length, new, sources, _ in edits:
        out.extend(lines[prev:pos])
        # Context lines keep the file's own text (and ending); only added lines come from the patch.
        if out_eols is not None and eols is not None:
            out_eols.extend(eols[prev:pos])
            for text, src in zip(new, sources, strict=True):
                out.append(lines[pos + src] if src >= 0 else text)
                out_eols.append((eols[pos + src] or doc.eol) if src >= 0 else doc.eol)
        else:
            out.extend(lines[pos + src] if src >= 0 else text for text, src in zip(new, sources, strict=True))
        prev = pos + length
    out.extend(lines[prev:])
    if out_eols is not None and eols is not None:
        out_eols.extend(eols[prev:])
        out_eols = [e or doc.eol for e in out_eols]
    final_newline = doc.final_newline if lines else True
    return LineDoc(out, doc.eol, final_newline, out_eols)


def _level_note(level: int) -> str:
    return LEVEL_NOTES[LEVELS[level]]


def _hunk_label(path: str, number: int, total: int, hunk: Hunk) -> str:
    header = hunk.header.replace("\n", " / ")
    if len(header) > 100:
        header = header[:97] + "..."
    return f"{path}: hunk {number} of {total} ({header}, patch line {hunk.line_no})"


def _show_old_side(hunk: Hunk) -> str:
    """The hunk's context and removed lines, with their ' ' / '-' markers, as the patch had them."""
    context = set(hunk.sources)
    lines = hunk.old_lines
    shown = [("   " if j in context else "  -") + line for j, line in enumerate(lines[:_SHOW_LINES])]
    if len(lines) > _SHOW_LINES:
        shown.append(f"  ... ({len(lines) - _SHOW_LINES} more)")
    return "\n".join(shown)


def _hint_failure(label: str, hint: str, index: LineIndex, start: int) -> str:
    msg = f"{label}: the context line '@@ {hint.strip()}' was not found"
    msg += f" after line {start}." if start else "."
    region = closest_region(index.lines, [hint], index)
    if region is not None:
        msg += f"\nThe most similar line is {region[0] + 1}:\n" + format_excerpt(index.lines, region[0], 1, margin=0)
    return msg + "\nUse a line that exists in the file verbatim after '@@ ', or omit the hint."


def _hunk_failure(label: str, hunk: Hunk, index: LineIndex, start: int) -> str:
    lines = index.lines
    old = hunk.old_lines
    where = "at the end of the file" if hunk.end_of_file else (f"after line {start}" if start else "in the file")
    msg = (
        f"{label}: could not find the lines this hunk expects {where}, even ignoring whitespace and "
        f"typographic punctuation. Expected (context and '-' lines):\n{_show_old_side(hunk)}"
    )
    earlier = seek(index, old, 0) if start else None
    if earlier is not None and earlier[0] < start:
        msg += (
            f"\nThose lines are at line {earlier[0] + 1}, before the previous hunk: hunks must appear in "
            "the order of the file and must not overlap."
        )
        return msg
    region = closest_region(lines, old, index)
    if region is not None:
        begin, equal = region
        span = min(len(old), max(len(lines) - begin, 1))
        end = begin + span
        msg += (
            f"\nThe closest region of the file is lines {begin + 1}-{end} ({equal} of {len(old)} lines equal):\n"
            + format_excerpt(lines, begin, span)
        )
    elif not lines:
        msg += "\nThe file is empty."
    return msg + "\nRe-read the file and copy the context lines exactly."


# -- commit ----------------------------------------------------------------------------------------


async def _commit(overlay: _Overlay) -> None:
    fs = overlay.fs
    entries = overlay.entries
    changed = sorted((e for e in entries.values() if e.current != e.original), key=lambda e: e.order)
    renames: list[tuple[_Entry, _Entry]] = []
    claimed: set[str] = set()
    for src_key, dst_key in overlay.moves:
        src, dst = entries[src_key], entries[dst_key]
        if (
            src.original is not None
            and src.current is None
            and dst.current is not None
            and not claimed.intersection((src_key, dst_key))
        ):
            # A real rename keeps the file's metadata (permissions); the content is written after.
            renames.append((src, dst))
            claimed.update((src_key, dst_key))
    touched: list[_Entry] = []
    try:
        for src, dst in renames:
            touched.extend((src, dst))
            await fs.move_file(src.key, dst.key)
            if dst.current != src.original:
                assert dst.current is not None
                await fs.write_file(dst.key, dst.current)
        for entry in changed:
            if entry.key in claimed:
                continue
            touched.append(entry)
            if entry.current is None:
                await fs.delete_file(entry.key)
            else:
                await fs.write_file(entry.key, entry.current)
    except Exception as exc:
        failures = await _rollback(fs, touched)
        reason = _os_reason(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
        if failures:
            msg = f"apply_patch failed while writing ({reason}) and could not restore every file: " + "; ".join(
                failures
            )
        else:
            msg = f"apply_patch failed while writing ({reason}); every file was restored, nothing changed."
        raise PatchWriteError(msg, rolled_back=not failures, rollback_failures=failures) from exc


async def _rollback(fs: PatchFileSystem, touched: list[_Entry]) -> list[str]:
    failures: list[str] = []
    done: set[str] = set()
    for entry in reversed(touched):
        if entry.key in done:
            continue
        done.add(entry.key)
        try:
            if entry.original is None:
                if await fs.file_exists(entry.key):
                    await fs.delete_file(entry.key)
            else:
                await fs.write_file(entry.key, entry.original)
        except Exception as exc:
            failures.append(f"{entry.path}: {exc}")
    return failures


def _os_reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__

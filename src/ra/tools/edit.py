"""``edit_file``: replace one exact string in a file (coding-agent-loop-spec 3.3), keeping its bytes.

The exact match comes first and must be unique unless ``replace_all``. Only when the exact text is
nowhere in the file does a fuzzy ladder run, each rung tried across the whole file before the next:

1. line by line, ignoring trailing whitespace;
2. line by line, ignoring indentation (the replacement is re-indented by the same amount);
3. as a substring, treating typographic quotes, dashes and spaces as their ASCII forms;
4. line by line, ignoring indentation *and* typographic punctuation.

A fuzzy match must be unique too (or ``replace_all``), and the result says which rung matched so
the model learns its copy was inexact.

Bytes are kept: the file is matched in LF form but written back with its own line endings (CRLF,
LF, or a mix — untouched lines keep theirs, new lines take the dominant one), its encoding and BOM
(UTF-8, UTF-8 with BOM, UTF-16 with BOM; anything else round-trips through latin-1 byte for byte).

An empty ``old_string`` creates the file when it does not exist (or fills an existing empty file);
on a file with content it is an error, since there is nothing to anchor the edit to.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Protocol

from .file_size import MAX_EDIT_BYTES, file_size, too_large_message
from .fuzzy import (
    DecodedText,
    LineIndex,
    closest_region,
    find_all,
    format_excerpt,
    line_of,
    line_starts,
    normalise,
    normalise_punctuation,
)

__all__ = ["EditError", "EditFileSystem", "EditResult", "edit_file"]

_MAX_LISTED = 20


class EditFileSystem(Protocol):
    """The part of :class:`ra.env.base.ExecutionEnvironment` that editing needs."""

    async def read_bytes(self, path: str) -> bytes: ...

    async def write_file(self, path: str, content: str | bytes) -> None: ...

    async def file_exists(self, path: str) -> bool: ...

    async def is_directory(self, path: str) -> bool: ...


class EditError(Exception):
    """The edit was not made; the file is unchanged. ``code`` says why, ``str()`` says it to the model.

    Codes: ``no_change``, ``file_not_found``, ``is_directory``, ``not_empty``, ``not_found``,
    ``not_unique``, ``ambiguous``, ``encoding``, ``io``.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(slots=True)
class EditResult:
    path: str
    replacements: int
    #: 1-based line where the first replacement starts.
    first_line: int
    created: bool = False
    #: Set when the exact text was not found and a looser comparison matched: how it matched.
    fuzzy: str | None = None
    #: The file's text before (None: it did not exist) and after, for hosts to show a diff.
    before: str | None = field(default=None, repr=False)
    after: str | None = field(default=None, repr=False)

    @property
    def message(self) -> str:
        if self.created:
            return f"Created {self.path}."
        plural = "occurrence" if self.replacements == 1 else "occurrences"
        msg = f"Replaced {self.replacements} {plural} in {self.path} (line {self.first_line})."
        if self.fuzzy:
            msg += f"\nNote: old_string did not match exactly; it matched {self.fuzzy}."
        return msg

    def __str__(self) -> str:
        return self.message


@dataclass(slots=True)
class _Span:
    start: int
    end: int
    text: str


async def edit_file(
    env: EditFileSystem, path: str, old_string: str, new_string: str, replace_all: bool = False
) -> EditResult:
    """Replace ``old_string`` with ``new_string`` in ``path``; raise :class:`EditError` otherwise."""
    if old_string == new_string:
        raise EditError("no_change", "old_string and new_string are identical; there is nothing to change.")
    if await env.is_directory(path):
        raise EditError("is_directory", f"{path} is a directory, not a file.")
    if not await env.file_exists(path):
        if old_string == "":
            await _write(env, path, new_string)
            return EditResult(path, 1, 1, created=True, after=new_string)
        raise EditError(
            "file_not_found",
            f"{path} does not exist. Check the path; to create a file, use an empty old_string.",
        )
    size = await file_size(env, path)
    if size is not None and size > MAX_EDIT_BYTES:
        raise EditError("file_too_large", too_large_message(path, size, MAX_EDIT_BYTES, "edit_file"))
    try:
        data = await env.read_bytes(path)
    except OSError as exc:
        raise EditError("io", f"cannot read {path}: {exc}") from exc
    decoded = DecodedText.decode(data)
    raw = decoded.text
    if old_string == "":
        if raw:
            raise EditError(
                "not_empty",
                f"old_string is empty but {path} already has content; give the exact text to replace.",
            )
        await _write(env, path, _encode(decoded, new_string, path))
        return EditResult(path, 1, 1, before=raw, after=new_string)

    crlf = raw.count("\r\n") if "\r" in raw else 0
    text = raw.replace("\r\n", "\n") if crlf else raw
    eol = "\r\n" if crlf and crlf * 2 > raw.count("\n") else "\n"
    old = old_string.replace("\r\n", "\n")
    new = new_string.replace("\r\n", "\n")
    spans, fuzzy = _locate(text, old, new, replace_all, path)
    first_line = text.count("\n", 0, spans[0].start) + 1
    result = _rebuild(raw, text, spans, crlf, eol)
    await _write(env, path, _encode(decoded, result, path))
    return EditResult(path, len(spans), first_line, fuzzy=fuzzy, before=raw, after=result)


def _encode(decoded: DecodedText, text: str, path: str) -> bytes:
    try:
        return decoded.encode(text)
    except UnicodeEncodeError as exc:
        raise EditError(
            "encoding",
            f"new_string has characters ({exc.object[exc.start : exc.end]!r}) that {path}'s encoding, "
            f"{decoded.label}, cannot store; the file is unchanged.",
        ) from exc


async def _write(env: EditFileSystem, path: str, content: str | bytes) -> None:
    try:
        await env.write_file(path, content)
    except OSError as exc:
        raise EditError("io", f"cannot write {path}: {exc}") from exc


def _rebuild(raw: str, text: str, spans: list[_Span], crlf: int, eol: str) -> str:
    """Apply LF-space ``spans`` (ascending) to the original text, mapping offsets past removed ``\\r``s."""
    uniform = crlf and crlf == raw.count("\n")
    cr_at = [m.start() - k for k, m in enumerate(re.finditer("\r\n", raw))] if crlf and not uniform else []
    seen_at, seen = 0, 0  # uniform CRLF: newlines in text[:seen_at], counted incrementally

    def to_raw(offset: int) -> int:
        nonlocal seen_at, seen
        if not crlf:
            return offset
        if uniform:
            # Every newline was CRLF: the \r's before an offset are the newlines before it.
            seen += text.count("\n", seen_at, offset)
            seen_at = offset
            return offset + seen
        return offset + bisect_left(cr_at, offset)

    pieces: list[str] = []
    prev = 0
    for span in spans:
        start = to_raw(span.start)
        end = to_raw(span.end)
        pieces.append(raw[prev:start])
        pieces.append(span.text.replace("\n", eol) if eol != "\n" else span.text)
        prev = end
    pieces.append(raw[prev:])
    return "".join(pieces)


# -- locating --------------------------------------------------------------------------------------


def _locate(text: str, old: str, new: str, replace_all: bool, path: str) -> tuple[list[_Span], str | None]:
    first = text.find(old)
    if first == -1:
        return _locate_fuzzy(text, old, new, replace_all, path)
    starts = [first]
    pos = text.find(old, first + len(old))
    while pos != -1:
        starts.append(pos)
        if not replace_all and len(starts) > _MAX_LISTED:
            break  # enough to report; count the rest below
        pos = text.find(old, pos + len(old))
    if len(starts) == 1 or replace_all:
        return [_Span(p, p + len(old), new) for p in starts], None
    count = text.count(old)  # non-overlapping, like the search above
    lines = _line_numbers(text, starts, count)
    raise EditError(
        "not_unique",
        f"old_string occurs {count} times in {path} (at lines {lines}). Include more surrounding lines "
        "in old_string so it matches exactly one place, or set replace_all to change every occurrence.",
    )


def _line_numbers(text: str, offsets: list[int], total: int) -> str:
    numbers: list[str] = []
    line, prev = 1, 0
    for off in offsets[:_MAX_LISTED]:
        line += text.count("\n", prev, off)
        prev = off
        numbers.append(str(line))
    more = f" and {total - _MAX_LISTED} more" if total > _MAX_LISTED else ""
    return ", ".join(numbers) + more


_RUNGS: tuple[tuple[str, int | None, str], ...] = (
    ("rstrip", 1, "ignoring trailing whitespace"),
    ("strip", 2, "ignoring indentation (the replacement was re-indented to match)"),
    ("unicode", None, "treating typographic quotes, dashes and spaces as ASCII"),
    ("strip+unicode", 3, "ignoring indentation and treating typographic quotes, dashes and spaces as ASCII"),
)


def _locate_fuzzy(text: str, old: str, new: str, replace_all: bool, path: str) -> tuple[list[_Span], str]:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    starts = line_starts(text)
    old_lines = old.split("\n")
    old_trailing = len(old_lines) > 1 and old_lines[-1] == ""
    if old_trailing:
        old_lines.pop()
    index = LineIndex(lines)
    line_rungs_ok = any(line.strip() for line in old_lines)
    for _name, level, note in _RUNGS:
        if level is None:
            found = _substring_matches(text, old)
            if not found:
                continue
            _check_unique(found, replace_all, note, path, [line_of(starts, s) for s in found])
            return [_Span(s, s + len(old), new) for s in found], note
        if not line_rungs_ok:
            continue
        pattern = [normalise(line, level) for line in old_lines]
        positions = find_all(index.view(level), pattern)
        if not positions:
            continue
        _check_unique(positions, replace_all, note, path, [p + 1 for p in positions])
        spans = [
            _line_span(text, starts, lines, p, old_lines, new, old_trailing, reindent=level >= 2) for p in positions
        ]
        return spans, note
    raise EditError("not_found", _not_found_message(path, old_lines, lines, index))


def _substring_matches(text: str, old: str) -> list[int]:
    n_old = normalise_punctuation(old)
    n_text = normalise_punctuation(text)
    if n_old == old and n_text == text:
        return []  # nothing typographic on either side: this rung cannot find anything new
    found: list[int] = []
    pos = n_text.find(n_old)
    while pos != -1:
        found.append(pos)
        pos = n_text.find(n_old, pos + len(n_old))
    return found


def _check_unique(found: list[int], replace_all: bool, note: str, path: str, line_numbers: list[int]) -> None:
    if len(found) > 1 and not replace_all:
        listed = ", ".join(str(n) for n in line_numbers[:_MAX_LISTED])
        if len(line_numbers) > _MAX_LISTED:
            listed += f" and {len(line_numbers) - _MAX_LISTED} more"
        raise EditError(
            "ambiguous",
            f"old_string was not found exactly in {path}; {note.split(' (')[0]}, it matches {len(found)} places "
            f"(lines {listed}). Copy the exact text from the file, with enough surrounding lines to be unique.",
        )


def _line_span(
    text: str,
    starts: list[int],
    lines: list[str],
    pos: int,
    old_lines: list[str],
    new: str,
    old_trailing: bool,
    *,
    reindent: bool,
) -> _Span:
    k = len(old_lines)
    start = starts[pos]
    end = starts[pos + k - 1] + len(lines[pos + k - 1])
    replacement = _reindent(new, old_lines, lines[pos : pos + k]) if reindent else new
    if old_trailing:
        if end < len(text):
            end += 1  # the newline after the last matched line belongs to the match
        elif replacement.endswith("\n"):
            replacement = replacement[:-1]  # keep the file's missing final newline missing
    return _Span(start, end, replacement)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _reindent(new: str, old_lines: list[str], file_lines: list[str]) -> str:
    """Shift ``new`` by however the model's indentation differed from the file's."""
    pairs = [(_indent(o), _indent(f)) for o, f in zip(old_lines, file_lines, strict=True) if o.strip()]
    if not pairs or all(o == f for o, f in pairs):
        return new
    new_lines = new.split("\n")
    first_old, first_file = pairs[0]
    if first_old != first_file and all(o == f for o, f in pairs[1:]):
        # Only the first line lost (or gained) indentation, as when text is copied from mid-line.
        for i, line in enumerate(new_lines):
            if line.strip():
                if line.startswith(first_old):
                    new_lines[i] = first_file + line[len(first_old) :]
                break
        return "\n".join(new_lines)
    out: list[str] = []
    for line in new_lines:
        if not line.strip():
            out.append(line)
        elif first_file.startswith(first_old):
            out.append(first_file[len(first_old) :] + line)
        elif first_old.startswith(first_file):
            extra = first_old[len(first_file) :]
            out.append(line[len(extra) :] if line.startswith(extra) else line.lstrip())
        elif line.startswith(first_old):
            out.append(first_file + line[len(first_old) :])
        else:
            out.append(line)
    return "\n".join(out)


def _not_found_message(path: str, old_lines: list[str], lines: list[str], index: LineIndex) -> str:
    msg = (
        f"old_string was not found in {path}, not even ignoring whitespace and typographic punctuation. "
        "Re-read the file and copy the text exactly, including indentation."
    )
    region = closest_region(lines, old_lines, index)
    if region is not None:
        begin, equal = region
        span = min(len(old_lines), max(len(lines) - begin, 1))
        msg += (
            f"\nThe most similar part of the file is lines {begin + 1}-{begin + span} "
            f"({equal} of {len(old_lines)} lines equal):\n" + format_excerpt(lines, begin, span)
        )
    return msg

"""Parsing patches: codex's v4a format and ordinary unified diffs, into one typed model.

Both formats end up as a :class:`Patch` of :class:`FileOp` objects whose :class:`Hunk` objects
carry the lines to find (``old_lines``) and the lines to put in their place (``new_lines``). The
applier never needs to know which format a hunk came from; only the hints differ (v4a's
``@@ context`` lines versus a unified header's line numbers).

The parser is lenient in the places models (and codex) are: a patch wrapped in a shell heredoc or a
Markdown fence, markers padded with whitespace, a first v4a hunk without ``@@``, unified hunk
headers whose line counts are wrong or missing. It is strict where leniency could write the wrong
thing: a v4a patch must end with ``*** End Patch``, so a reply cut off mid-patch is rejected rather
than half-applied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["FileOp", "Hunk", "OpKind", "Patch", "PatchError", "PatchParseError", "parse_patch"]

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File: "
DELETE = "*** Delete File: "
UPDATE = "*** Update File: "
MOVE = "*** Move to: "
EOF_MARK = "*** End of File"


class PatchError(Exception):
    """A patch that could not be parsed or applied. ``str(error)`` is written for the model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PatchParseError(PatchError):
    """The patch text is malformed; ``line`` is the 1-based line of the patch at fault (0 = whole)."""

    def __init__(self, message: str, line: int = 0) -> None:
        where = f"Invalid patch (line {line}): " if line else "Invalid patch: "
        super().__init__(where + message)
        self.line = line


class OpKind(StrEnum):
    ADD = "add"
    DELETE = "delete"
    UPDATE = "update"


@dataclass(slots=True)
class Hunk:
    """One change: find ``old_lines`` (context + removed), put ``new_lines`` (context + added)."""

    old_lines: list[str] = field(default_factory=list)
    new_lines: list[str] = field(default_factory=list)
    #: For each new line: the index of the old line it repeats (a context line), or -1 (added).
    #: Lets a loosely matched hunk keep the file's own spelling of its context lines.
    sources: list[int] = field(default_factory=list)
    #: v4a ``@@ <hint>`` lines, outermost first; each is found in turn before the hunk itself.
    hints: list[str] = field(default_factory=list)
    #: v4a ``*** End of File``: the hunk must end at the file's last line.
    end_of_file: bool = False
    #: 1-based start line from a unified ``@@ -l,c +l,c @@`` header; a hint, never trusted blindly.
    old_start: int | None = None
    #: ``\\ No newline at end of file`` after an old-side / new-side line (unified diffs).
    old_missing_newline: bool = False
    new_missing_newline: bool = False
    added: int = 0
    removed: int = 0
    header: str = "@@"
    #: 1-based line of the patch where the hunk starts, for messages.
    line_no: int = 0


@dataclass(slots=True)
class FileOp:
    kind: OpKind
    path: str
    move_to: str | None = None
    hunks: list[Hunk] = field(default_factory=list)
    #: ADD only: the new file's lines (without endings), and whether the last one lacks a newline.
    content: list[str] = field(default_factory=list)
    missing_newline: bool = False
    #: ADD from a unified diff (``--- /dev/null``): the file must not exist yet, as with git apply.
    must_not_exist: bool = False
    #: Other names the target may have (a plain unified diff's ``---`` path), tried in order when
    #: ``path`` does not exist.
    alt_paths: tuple[str, ...] = ()
    #: v4a updates always end the file with a newline (codex does); unified diffs keep the file's own
    #: convention unless a ``\\ No newline`` marker says otherwise.
    ensure_final_newline: bool = False
    line_no: int = 0

    @property
    def added(self) -> int:
        return len(self.content) if self.kind is OpKind.ADD else sum(h.added for h in self.hunks)

    @property
    def removed(self) -> int:
        return sum(h.removed for h in self.hunks)


@dataclass(slots=True)
class Patch:
    operations: list[FileOp]
    format: str  # "v4a" | "unified"


# -- entry point -----------------------------------------------------------------------------------

_HEREDOC = re.compile(r"""^\s*(?:(?:apply_patch|applypatch)\s+)?<<-?\s*(['"]?)([A-Za-z_][A-Za-z0-9_]*)\1\s*$""")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})[\w+-]*\s*$")


def parse_patch(text: str) -> Patch:
    """Parse a v4a patch (``*** Begin Patch``) or a unified diff; raise :class:`PatchParseError`."""
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    lines, offset = _unwrap(lines)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise PatchParseError("the patch is empty.")
    if lines[first].strip() == BEGIN:
        return Patch(_parse_v4a(lines, first, offset), "v4a")
    v4a_header = next((i for i, line in enumerate(lines) if line.strip().startswith((ADD, DELETE, UPDATE))), None)
    if v4a_header is not None:
        raise PatchParseError(
            f"'{lines[v4a_header].strip()[:80]}' is a v4a header, but the patch does not start with "
            f"'{BEGIN}'. Wrap the operations in '{BEGIN}' ... '{END}'.",
            first + 1 + offset,
        )
    if _looks_unified(lines):
        return Patch(_UnifiedParser(lines, offset).parse(), "unified")
    raise PatchParseError(
        f"the first line must be '{BEGIN}' (v4a format) or the patch must be a unified diff "
        f"('--- a/path' / '+++ b/path' / '@@ ... @@'); got {lines[first].strip()[:80]!r}.",
        first + 1 + offset,
    )


def _unwrap(lines: list[str]) -> tuple[list[str], int]:
    """Strip a surrounding heredoc (``<<'EOF' ... EOF``) or Markdown fence; return the line offset."""
    offset = 0
    for _ in range(2):  # a fence around a heredoc, or the reverse
        nonblank = [i for i, line in enumerate(lines) if line.strip()]
        if len(nonblank) < 2:
            break
        head, tail = nonblank[0], nonblank[-1]
        m = _HEREDOC.match(lines[head])
        if m and lines[tail].strip() == m.group(2):
            lines = lines[head + 1 : tail]
            offset += head + 1
            continue
        f = _FENCE.match(lines[head])
        if f and lines[tail].strip() == f.group(1):
            lines = lines[head + 1 : tail]
            offset += head + 1
            continue
        break
    return lines, offset


def _looks_unified(lines: list[str]) -> bool:
    for i, line in enumerate(lines):
        if line.startswith("diff --git ") or line.startswith("@@"):
            return True
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            return True
    return False


# -- v4a -------------------------------------------------------------------------------------------

_UNIFIED_NUMBERS = re.compile(r"^-(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@ ?(.*)$")


def _parse_v4a(lines: list[str], first: int, offset: int) -> list[FileOp]:
    last = max(i for i, line in enumerate(lines) if line.strip())
    if last == first or lines[last].strip() != END:
        raise PatchParseError(
            f"the last line must be '{END}'. Was the patch cut off? Nothing was applied.", last + 1 + offset
        )
    body = lines[first + 1 : last]
    base = first + 2 + offset  # 1-based patch line of body[0]
    ops: list[FileOp] = []
    i = 0
    while i < len(body):
        raw = body[i]
        stripped = raw.strip()
        line_no = base + i
        if not stripped:
            i += 1
            continue
        if stripped.startswith(ADD.strip()):
            path = _op_path(stripped, ADD, line_no)
            i += 1
            content: list[str] = []
            while i < len(body):
                line = body[i]
                if line.startswith("+"):
                    content.append(line[1:])
                elif not line.strip() and _more_plus_lines(body, i):
                    content.append("")
                else:
                    break
                i += 1
            ops.append(FileOp(OpKind.ADD, path, content=content, line_no=line_no))
        elif stripped.startswith(DELETE.strip()):
            ops.append(FileOp(OpKind.DELETE, _op_path(stripped, DELETE, line_no), line_no=line_no))
            i += 1
        elif stripped.startswith(UPDATE.strip()):
            path = _op_path(stripped, UPDATE, line_no)
            i += 1
            move_to = None
            if i < len(body) and body[i].strip().startswith(MOVE.strip()):
                move_to = _op_path(body[i].strip(), MOVE, base + i)
                i += 1
            op = FileOp(OpKind.UPDATE, path, move_to=move_to, ensure_final_newline=True, line_no=line_no)
            i = _parse_v4a_hunks(body, i, base, op)
            if not op.hunks and move_to is None:
                raise PatchParseError(
                    f"'*** Update File: {path}' has no hunks. Add '@@' hunks with ' ' context, '-' removed "
                    "and '+' added lines (or use '*** Move to:' for a pure rename).",
                    line_no,
                )
            ops.append(op)
        else:
            raise PatchParseError(
                f"{stripped[:120]!r} is not a valid file operation. Valid headers: '*** Add File: <path>', "
                "'*** Delete File: <path>', '*** Update File: <path>' (optionally followed by "
                "'*** Move to: <path>'); every other line must belong to one of them.",
                line_no,
            )
    if not ops:
        raise PatchParseError("the patch contains no file operations, so nothing was changed.")
    return ops


def _op_path(stripped: str, marker: str, line_no: int) -> str:
    path = stripped[len(marker.strip()) :].strip()
    if not path:
        raise PatchParseError(f"'{marker.strip()}' needs a path.", line_no)
    return path


def _more_plus_lines(body: list[str], i: int) -> bool:
    """Whether a blank line inside an Add File block is followed by more ``+`` lines (so it is content)."""
    for line in body[i + 1 :]:
        if line.startswith("+"):
            return True
        if line.strip():
            return False
    return False


def _parse_v4a_hunks(body: list[str], i: int, base: int, op: FileOp) -> int:
    """Read the hunks of an Update File block starting at ``body[i]``; return the index after them."""
    hunk: Hunk | None = None
    while i < len(body):
        line = body[i]
        line_no = base + i
        stripped = line.strip()
        if line.startswith("***") or (not line.startswith((" ", "-", "+")) and stripped.startswith("*** ")):
            if stripped == EOF_MARK:
                if hunk is None or not (hunk.old_lines or hunk.new_lines):
                    raise PatchParseError(f"'{EOF_MARK}' must follow the lines of a hunk.", line_no)
                hunk.end_of_file = True
                _finish_hunk(op, hunk)
                hunk = None
                i += 1
                continue
            break  # the next file operation (or an invalid header, reported by the caller)
        if stripped.startswith("@@") and not line.startswith((" ", "-", "+")):
            if hunk is not None and not (hunk.old_lines or hunk.new_lines):
                hunk.hints.extend(_v4a_hint(stripped, hunk))  # nested '@@ class' / '@@ def' hints
                hunk.header += "\n" + stripped
            else:
                if hunk is not None:
                    _finish_hunk(op, hunk)
                hunk = Hunk(header=stripped, line_no=line_no)
                hunk.hints.extend(_v4a_hint(stripped, hunk))
            i += 1
            continue
        if line.startswith(("\\ No newline", "\\No newline")):
            i += 1
            continue
        if not line.startswith((" ", "-", "+")) and stripped:
            if hunk is None and not op.hunks:
                raise PatchParseError(
                    f"expected a hunk ('@@' then ' ', '-' or '+' lines) for {op.path!r}, got {stripped[:80]!r}.",
                    line_no,
                )
            raise PatchParseError(
                f"{stripped[:80]!r} is not a hunk line: each line of a hunk starts with ' ' (context), "
                "'-' (remove) or '+' (add).",
                line_no,
            )
        if not stripped and not line.startswith(" "):
            # An empty (or tab-only) line: a blank context line, unless it only separates blocks.
            if hunk is None or _blank_run_ends_block(body, i):
                i += 1
                continue
            line = " "
        if hunk is None:
            hunk = Hunk(header="(no @@ header)", line_no=line_no)
        tag, text = line[0], line[1:]
        _add_line(hunk, tag, text)
        i += 1
    if hunk is not None:
        _finish_hunk(op, hunk)
    return i


def _blank_run_ends_block(body: list[str], i: int) -> bool:
    """True when the blank lines from ``body[i]`` lead to the end or to the next file operation."""
    for line in body[i:]:
        if line:
            return line.strip().startswith("***") and not line.startswith((" ", "-", "+"))
    return True


def _v4a_hint(stripped: str, hunk: Hunk) -> list[str]:
    rest = stripped[2:]
    if not rest.strip():
        return []
    rest = rest[1:] if rest.startswith(" ") else rest
    m = _UNIFIED_NUMBERS.match(rest.strip())
    if m:  # a unified-style '@@ -12,3 +12,4 @@ def f' header inside a v4a patch
        hunk.old_start = int(m.group(1))
        return [m.group(2)] if m.group(2).strip() else []
    return [rest]


def _add_line(hunk: Hunk, tag: str, text: str) -> None:
    if tag == " ":
        hunk.sources.append(len(hunk.old_lines))
        hunk.old_lines.append(text)
        hunk.new_lines.append(text)
    elif tag == "-":
        hunk.old_lines.append(text)
        hunk.removed += 1
    else:
        hunk.sources.append(-1)
        hunk.new_lines.append(text)
        hunk.added += 1


def _finish_hunk(op: FileOp, hunk: Hunk) -> None:
    if not hunk.old_lines and not hunk.new_lines:
        raise PatchParseError(f"hunk {len(op.hunks) + 1} of {op.path!r} has no lines.", hunk.line_no)
    op.hunks.append(hunk)


# -- unified diff ----------------------------------------------------------------------------------

_HUNK_HEADER = re.compile(r"^@@+ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@+(.*)$")
_DEV_NULL = "/dev/null"


@dataclass(slots=True)
class _FileSection:
    line_no: int
    git: bool = False
    git_old: str | None = None
    git_new: str | None = None
    old: str | None = None
    new: str | None = None
    rename_from: str | None = None
    rename_to: str | None = None
    new_file: bool = False
    deleted_file: bool = False
    binary: bool = False
    copy: bool = False
    hunks: list[Hunk] = field(default_factory=list)


class _UnifiedParser:
    """``git diff`` / ``diff -u`` output, one or many files; text outside files is ignored."""

    def __init__(self, lines: list[str], offset: int) -> None:
        lines = list(lines)
        while lines and not lines[-1]:
            lines.pop()  # the text's final newline, or blank lines after the diff: not context
        self.lines = lines
        self.offset = offset
        self.sections: list[_FileSection] = []

    def parse(self) -> list[FileOp]:
        lines = self.lines
        i = 0
        section: _FileSection | None = None
        while i < len(lines):
            line = lines[i]
            if line.startswith("diff --git "):
                section = _FileSection(i + 1 + self.offset, git=True)
                section.git_old, section.git_new = _git_header_paths(line[len("diff --git ") :])
                self.sections.append(section)
                i += 1
                i = self._git_extended_headers(section, i)
                continue
            if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
                if section is None or section.old is not None or section.hunks:
                    section = _FileSection(i + 1 + self.offset)
                    self.sections.append(section)
                section.old = _diff_path(line[4:])
                section.new = _diff_path(lines[i + 1][4:])
                i += 2
                continue
            if line.startswith("@@"):
                if section is None:
                    raise PatchParseError(
                        "a hunk ('@@') appears before any file header ('--- a/path' / '+++ b/path').",
                        i + 1 + self.offset,
                    )
                i = self._hunk(section, i)
                continue
            i += 1  # commit messages, 'Index:' lines, diffstat: not ours to interpret
        ops = [op for s in self.sections if (op := self._to_op(s)) is not None]
        if not ops:
            raise PatchParseError("the diff contains no file changes, so nothing was changed.")
        return ops

    def _git_extended_headers(self, s: _FileSection, i: int) -> int:
        lines = self.lines
        while i < len(lines):
            line = lines[i]
            if line.startswith("rename from "):
                s.rename_from = _unquote(line[len("rename from ") :])
            elif line.startswith("rename to "):
                s.rename_to = _unquote(line[len("rename to ") :])
            elif line.startswith(("copy from ", "copy to ")):
                s.copy = True
            elif line.startswith("new file mode"):
                s.new_file = True
            elif line.startswith("deleted file mode"):
                s.deleted_file = True
            elif line.startswith(("Binary files ", "GIT binary patch")):
                s.binary = True
            elif not line.startswith(("old mode", "new mode", "similarity index", "dissimilarity index", "index ")):
                break
            i += 1
        return i

    def _hunk(self, s: _FileSection, i: int) -> int:
        lines = self.lines
        header = lines[i]
        hunk = Hunk(header=header.strip(), line_no=i + 1 + self.offset)
        m = _HUNK_HEADER.match(header.strip())
        old_left = new_left = -1
        if m:
            hunk.old_start = int(m.group(1))
            old_left = int(m.group(2)) if m.group(2) is not None else 1
            new_left = int(m.group(4)) if m.group(4) is not None else 1
            if old_left == 0 and hunk.old_start > 0:
                hunk.old_start += 1  # '-5,0' means "after line 5"
        elif header.strip() not in ("@@", "@@ @@") and not header.startswith("@@ "):
            raise PatchParseError(f"{header.strip()[:80]!r} is not a hunk header ('@@ -l,c +l,c @@').", i + 1)
        counted = m is not None
        i += 1
        last_tag = ""
        while i < len(lines):
            line = lines[i]
            in_count = counted and (old_left > 0 or new_left > 0)
            if line.startswith("\\"):
                if last_tag in ("-", " "):
                    hunk.old_missing_newline = True
                if last_tag in ("+", " "):
                    hunk.new_missing_newline = True
                i += 1
                continue
            if not in_count and not self._continues_hunk(i, counted):
                break
            if in_count and self._is_file_boundary(i, strict=True):
                break  # the header's counts were too large; the hunk ends here
            tag = line[:1] or " "
            text = line[1:]
            if tag not in (" ", "-", "+"):
                break
            _add_line(hunk, tag, text)
            if tag != "+":
                old_left -= 1
            if tag != "-":
                new_left -= 1
            last_tag = tag
            i += 1
        if not hunk.old_lines and not hunk.new_lines:
            raise PatchParseError(f"hunk {header.strip()[:60]!r} has no lines.", hunk.line_no)
        s.hunks.append(hunk)
        return i

    def _is_file_boundary(self, i: int, *, strict: bool = False) -> bool:
        """Whether ``lines[i]`` starts a new hunk or file. ``strict`` (inside a hunk's counted lines,
        where '--- x' could be a removed line) also wants the '@@' that must follow a file header."""
        lines = self.lines
        line = lines[i]
        if line.startswith(("diff --git ", "@@")):
            return True
        if not (line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")):
            return False
        return not strict or (i + 2 < len(lines) and lines[i + 2].startswith("@@"))

    def _continues_hunk(self, i: int, counted: bool) -> bool:
        """After a hunk's counted lines (or in a header without counts): is ``lines[i]`` still a hunk line?

        Models miscount; a ``+``/``-``/`` `` line right after the counted ones is taken as part of
        the hunk rather than silently dropped. Blank lines count only when more hunk lines follow.
        """
        line = self.lines[i]
        if self._is_file_boundary(i):
            return False
        if line == "-- " and counted:
            return False  # 'git format-patch' signature
        if line.startswith((" ", "-", "+")):
            return True
        if line == "":
            for nxt in range(i + 1, len(self.lines)):
                if self.lines[nxt] == "":
                    continue
                return self.lines[nxt].startswith((" ", "-", "+", "\\")) and not self._is_file_boundary(nxt)
        return False

    def _to_op(self, s: _FileSection) -> FileOp | None:
        line_no = s.line_no
        if s.binary:
            raise PatchParseError("binary diffs are not supported; write the file another way.", line_no)
        if s.copy:
            raise PatchParseError("copy diffs ('copy from' / 'copy to') are not supported.", line_no)
        old = s.old if s.old is not None else s.git_old
        new = s.new if s.new is not None else s.git_new
        if s.git:
            old = _strip_prefix(old, "a/")
            new = _strip_prefix(new, "b/")
        elif old is not None and new is not None:
            # A model-written 'git-like' diff without the 'diff --git' line.
            if old.startswith("a/") and (new.startswith("b/") or new == _DEV_NULL):
                old = old[2:]
            if new.startswith("b/") and (old.startswith("a/") or old == _DEV_NULL or s.old == "a/" + old):
                new = new[2:]
        if s.rename_from is not None:
            old = s.rename_from
        if s.rename_to is not None:
            new = s.rename_to
        is_new = (
            s.new_file
            or old == _DEV_NULL
            or (not s.git and len(s.hunks) == 1 and s.hunks[0].old_start == 0 and not s.hunks[0].old_lines)
        )
        is_deleted = s.deleted_file or new == _DEV_NULL
        if is_new:
            if new is None or new == _DEV_NULL:
                raise PatchParseError("a new file needs a '+++ b/path' name.", line_no)
            content: list[str] = []
            missing = False
            for h in s.hunks:
                if h.old_lines:
                    raise PatchParseError(f"the new file {new!r} has context or removed lines.", h.line_no)
                content.extend(h.new_lines)
                missing = h.new_missing_newline
            return FileOp(
                OpKind.ADD, new, content=content, missing_newline=missing, must_not_exist=True, line_no=line_no
            )
        if is_deleted:
            if old is None or old == _DEV_NULL:
                raise PatchParseError("a deleted file needs a '--- a/path' name.", line_no)
            for h in s.hunks:
                if h.new_lines:
                    raise PatchParseError(f"the deleted file {old!r} has context or added lines.", h.line_no)
            return FileOp(OpKind.DELETE, old, hunks=s.hunks, line_no=line_no)
        if old is None or new is None:
            raise PatchParseError("a file diff needs both '--- ' and '+++ ' lines.", line_no)
        renamed = s.rename_from is not None and s.rename_to is not None and old != new
        if not s.hunks and not renamed:
            return None  # a mode-only change: nothing this interface can apply
        if renamed:
            return FileOp(OpKind.UPDATE, old, move_to=new, hunks=s.hunks, line_no=line_no)
        alt = (old,) if old != new and not s.git else ()
        return FileOp(OpKind.UPDATE, new, hunks=s.hunks, alt_paths=alt, line_no=line_no)


def _strip_prefix(path: str | None, prefix: str) -> str | None:
    if path is None or path == _DEV_NULL:
        return path
    return path[len(prefix) :] if path.startswith(prefix) else path


def _diff_path(field_text: str) -> str:
    """The path of a ``---``/``+++`` line: unquoted, without a trailing timestamp."""
    text = field_text.rstrip()
    if text.startswith('"'):
        return _unquote(text)
    if "\t" in text:
        text = text.split("\t", 1)[0]
    return text.rstrip()


def _git_header_paths(rest: str) -> tuple[str | None, str | None]:
    """``a/x b/x`` from a ``diff --git`` line; None where the split is ambiguous (spaces in names)."""
    rest = rest.strip()
    if rest.startswith('"'):
        end = _quoted_end(rest)
        first = _unquote(rest[: end + 1])
        second = rest[end + 1 :].strip()
        return first, _unquote(second) if second.startswith('"') else second
    if rest.endswith('"'):
        start = rest.rfind(' "')
        return rest[:start], _unquote(rest[start + 1 :])
    n = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[n] == " " and rest[2:n] == rest[n + 3 :]:
        return rest[:n], rest[n + 1 :]
    parts = rest.split(" ")
    if len(parts) == 2:
        return parts[0], parts[1]
    return None, None


def _quoted_end(text: str) -> int:
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i
        i += 1
    return len(text) - 1


_ESCAPES = {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\", "a": b"\a", "b": b"\b", "f": b"\f", "r": b"\r", "v": b"\v"}


def _unquote(text: str) -> str:
    """Git's C-style quoted path (``"t\\303\\251st.txt"``) to text; unquoted text is returned as is."""
    text = text.strip()
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        return text
    body = text[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            digits = body[i + 1 : i + 4]
            if len(digits) == 3 and all(c in "01234567" for c in digits):
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
            out += _ESCAPES.get(nxt, nxt.encode())
            i += 2
            continue
        out += ch.encode()
        i += 1
    return out.decode("utf-8", errors="surrogateescape")

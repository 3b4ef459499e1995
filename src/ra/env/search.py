"""grep and glob for the local environment (coding-agent-loop-spec 3.3, 4.2).

grep runs ripgrep when it can be found (the ``ripgrep`` wheel puts ``rg`` next to the Python
executable) and otherwise a pure-Python search. Both backends feed the same collector and formatter,
so their output is byte-for-byte the same for the same tree: ``path:line:text`` for matches,
``path-line-text`` for context lines, ``--`` between groups when context is asked for. Paths are
absolute, files are visited depth first in name order (ripgrep's ``--sort path``), and hidden files,
symlinks, binary files and ignored files (``.gitignore`` inside a git repository, ``.ignore``,
``.rgignore``; the Python side implements the common subset of the syntax) are skipped. A file is
binary when its first 64 KiB hold a NUL byte. A NUL found later (ripgrep's rules): a directory
search stops reading the file there, keeps the matches before it and says so after them
(:data:`LATE_BINARY_NOTE`), and a count leaves the file out; a file named on its own is read to
the end, but the first matching line that holds a NUL ends it (:data:`BINARY_MATCH_NOTE`).

ripgrep's plain output is read as it comes (``path\0N:text`` records), and a file name may hold
a newline, so a name can be made to look like ripgrep's own note about binary data followed by
a record of another path (:func:`_rejoin`). Such a line followed by more output is settled by the
file system (does the note's file exist, or the longer name?) and, where both do, by searching
again in ripgrep's JSON, which quotes every path.

glob is plain filesystem globbing with the shell's rules for dotfiles: ``*`` and ``**`` do not match
names that start with ``.`` unless the pattern spells the dot, so ``**/*.py`` does not wander into
``.venv``. ``{a,b}`` alternatives are expanded. Only files are returned, newest first.
"""

from __future__ import annotations

import contextlib
import operator
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from . import ripgrep_parts
from .base import GrepOptions

__all__ = [
    "OUTPUT_MODES",
    "find_ripgrep",
    "glob_files",
    "grep_python",
    "grep_ripgrep",
    "translate_glob",
]

OUTPUT_MODES = ("content", "files_with_matches", "count")
#: How much of a file is inspected for NUL bytes to call it binary (ripgrep's first buffer).
BINARY_SNIFF_BYTES = 64 * 1024
#: What follows a file's matches when a directory search met binary data (a NUL byte) past that
#: first buffer and stopped reading the file there; both backends say it, after the file's matches.
#: The most of one file the Python side reads into memory: the Python backend's text files, and a
#: binary file named on its own (both backends). A larger file is searched in its first
#: SEARCH_READ_LIMIT bytes with :data:`CUT_NOTE`, so a huge (or sparse) file cannot take the
#: process's memory. ripgrep itself streams, and needs no bound.
SEARCH_READ_LIMIT = 64 * 1024 * 1024
CUT_NOTE = "[only the first {limit} MiB of this {size}-byte file were searched]"
LATE_BINARY_NOTE = "[stopped at binary data (a NUL byte at offset {offset}); the rest of this file was not searched]"
#: What follows a named file's matches when a matching line past that first buffer holds a NUL:
#: ripgrep searches a file named on its own past NUL bytes, but stops at the first such match.
BINARY_MATCH_NOTE = (
    "[a matching line holds binary data (a NUL byte at offset {offset}); the rest of this file was not searched]"
)
#: ripgrep's own lines for those cases, on stdout among the records (no NUL ends their path).
_RG_NOTES = re.compile(
    rb"(.*): (WARNING: stopped searching binary file after match|binary file matches)"
    rb' \(found "\\0" byte around offset (\d+)\)',
    re.S,
)
_MAX_BRACE_EXPANSIONS = 1024
_MAGIC = frozenset("*?[{")


# ---------------------------------------------------------------------------------------------
# glob translation


def expand_braces(pattern: str) -> list[str]:
    """Expand ``{a,b}`` alternatives (nested allowed); ``\\{`` and a brace without a comma stay literal."""
    results: list[str] = []
    pending = [pattern]
    while pending:
        current = pending.pop()
        span = _first_brace_group(current)
        if span is None:
            results.append(current)
            if len(results) > _MAX_BRACE_EXPANSIONS:
                raise ValueError(f"glob pattern {pattern!r} expands to too many alternatives")
            continue
        start, end, options = span
        pending.extend(current[:start] + option + current[end + 1 :] for option in reversed(options))
    return results


def _first_brace_group(text: str) -> tuple[int, int, list[str]] | None:
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            i = _class_end(text, i) + 1
            continue
        if ch == "{":
            depth = 0
            parts: list[str] = []
            piece_start = i + 1
            j = i
            while j < len(text):
                c = text[j]
                if c == "\\":
                    j += 2
                    continue
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                    if depth == 0:
                        parts.append(text[piece_start:j])
                        break
                elif c == "," and depth == 1:
                    parts.append(text[piece_start:j])
                    piece_start = j + 1
                j += 1
            else:
                raise ValueError(f"invalid glob pattern {text!r}: unclosed '{{'")
            if len(parts) > 1:
                return i, j, parts
            i = j + 1
            continue
        i += 1
    return None


def _class_end(text: str, start: int) -> int:
    """Index of the ``]`` closing the character class opened at ``start``."""
    j = start + 1
    if j < len(text) and text[j] in "!^":
        j += 1
    if j < len(text) and text[j] == "]":
        j += 1
    while j < len(text) and text[j] != "]":
        j += 1
    if j >= len(text):
        raise ValueError(f"invalid glob pattern {text!r}: unclosed '['")
    return j


def _translate_segment(segment: str, dot_special: bool) -> str:
    out: list[str] = []
    if dot_special and not segment.startswith("."):
        out.append(r"(?!\.)")
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            while i + 1 < len(segment) and segment[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = _class_end(segment, i)
            body = segment[i + 1 : end]
            negate = body[:1] in ("!", "^")
            if negate:
                body = body[1:]
            body = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
            out.append(f"[{'^/' if negate else ''}{body}]")
            i = end
        elif ch == "\\" and i + 1 < len(segment):
            i += 1
            out.append(re.escape(segment[i]))
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _translate_one(pattern: str, dot_special: bool) -> str:
    segments = [s for s in pattern.split("/") if s]
    component = r"(?!\.)[^/]+" if dot_special else "[^/]+"
    pieces: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            pieces.append(f"(?:{component}/)*{component}" if last else f"(?:{component}/)*")
        else:
            pieces.append(_translate_segment(segment, dot_special) + ("" if last else "/"))
    return "".join(pieces)


def translate_glob(pattern: str, *, dot_special: bool = True) -> re.Pattern[str]:
    """A compiled regex that fully matches ``/``-separated relative paths matching ``pattern``.

    ``*`` and ``?`` stop at ``/``; ``**`` as a whole segment spans any number of directories;
    ``[...]`` and ``{a,b}`` work as in the shell. With ``dot_special``, wildcards do not match a
    leading ``.`` of a path component (the shell's rule); without it they do (gitignore's rule).
    """
    alternatives = [_translate_one(p, dot_special) for p in expand_braces(pattern)]
    return re.compile("(?s:" + "|".join(f"(?:{a})" for a in alternatives) + r")\Z")


def _has_magic(segment: str) -> bool:
    return any(ch in _MAGIC for ch in segment)


# ---------------------------------------------------------------------------------------------
# glob


def glob_files(pattern: str, base: str) -> list[str]:
    """Absolute paths of files under ``base`` matching ``pattern``, newest modification first.

    Blocking; the environment runs it in a worker thread.
    """
    if not pattern or "\0" in pattern:
        raise ValueError("glob pattern must be a non-empty string")
    segments = pattern.split("/")
    root = "/" if pattern.startswith("/") else base
    literal: list[str] = []
    for segment in segments[:-1]:
        if _has_magic(segment):
            break
        literal.append(segment)
    root = os.path.normpath(os.path.join(root, *literal)) if literal else os.path.normpath(root)
    rest = "/".join(segments[len(literal) :]).lstrip("/")
    if not os.path.isdir(base):
        raise FileNotFoundError(f"Directory not found: {base}")
    if not _has_magic(rest):
        candidate = os.path.join(root, rest)
        return [candidate] if os.path.isfile(candidate) else []
    matcher = translate_glob(rest, dot_special=True)  # before any early return: bad patterns must fail
    if not os.path.isdir(root):
        return []
    expanded = expand_braces(rest)
    walk_hidden = any(seg.startswith(".") for alt in expanded for seg in alt.split("/"))
    recursive = any("**" in alt for alt in expanded)
    max_depth = None if recursive else max(len([s for s in alt.split("/") if s]) for alt in expanded)

    found: list[tuple[float, str]] = []
    for rel, full, entry in _walk_for_glob(root, walk_hidden, max_depth):
        if matcher.match(rel):
            try:
                if entry.is_file():
                    found.append((entry.stat().st_mtime, full))
            except OSError:
                continue
    found.sort(key=lambda item: (-item[0], item[1]))
    return [path for _, path in found]


def _walk_for_glob(root: str, walk_hidden: bool, max_depth: int | None) -> Iterator[tuple[str, str, os.DirEntry[str]]]:
    stack: list[tuple[str, str, int]] = [(root, "", 1)]
    while stack:
        directory, prefix, depth = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs: list[tuple[str, str, int]] = []
        for entry in entries:
            if entry.name == ".git" or (not walk_hidden and entry.name.startswith(".")):
                continue
            rel = prefix + entry.name
            yield rel, entry.path, entry
            if (max_depth is None or depth < max_depth) and _is_real_dir(entry):
                subdirs.append((entry.path, rel + "/", depth + 1))
        stack.extend(reversed(subdirs))


def _is_real_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# result collection and formatting (shared by both grep backends)


@dataclass(slots=True)
class _Collector:
    """Turns search records into the output text, enforcing ``max_results``.

    ``add`` returns False once enough has been seen, so a backend can stop searching early.
    """

    mode: str
    max_results: int
    context: int
    lines: list[str] = field(default_factory=list)
    matches: int = 0
    truncated: bool = False
    done: bool = False
    _prev_path: str | None = None
    _prev_line: int = 0
    _last_match_path: str | None = None
    _last_match_line: int = 0

    def add_line(self, path: str, line_number: int, text: str, is_match: bool) -> bool:
        if self.done:
            return False
        if self.matches >= self.max_results:
            is_after_context = (
                not is_match and path == self._last_match_path and line_number <= self._last_match_line + self.context
            )
            if not is_after_context:
                # Any record past the last kept match's after-context belongs to a later match.
                self.truncated = True
                self.done = True
                return False
        if is_match:
            self.matches += 1
            self._last_match_path, self._last_match_line = path, line_number
        if (
            self.context > 0
            and self._prev_path is not None
            and (path != self._prev_path or line_number != self._prev_line + 1)
        ):
            self.lines.append("--")
        sep = ":" if is_match else "-"
        self.lines.append(f"{path}{sep}{line_number}{sep}{text}")
        self._prev_path, self._prev_line = path, line_number
        return True

    def add_note(self, path: str, note: str) -> None:
        """A line about a file that is not a match (it counts towards nothing)."""
        if not self.done:
            self.lines.append(f"{path}: {note}")

    def add_match_records(self, records: list[bytes]) -> bool:
        """Content without context: ripgrep's ``path\0N:text`` records, every one a match, taken
        as they are (the NUL becomes the ``:`` of ``path:N:text``) up to ``max_results``."""
        if self.done:
            return False
        if not all(b"\0" in r for r in records):
            # A note among the matches (ripgrep's line about binary data): one record at a time.
            # A record with a NUL is a match whatever its text says (a note's path cannot hold
            # one): a line ending in the words of ripgrep's note is not taken for it.
            for record in records:
                if b"\0" in record:
                    if not self.add_match_records([record]):
                        return False
                elif (note := _rg_note(record)) is not None:
                    self.add_note(*note)
            return True
        room = self.max_results - self.matches
        taken = records[:room] if len(records) > room else records
        self.lines.extend(
            r.replace(b"\0", b":", 1).removesuffix(b"\r").decode("utf-8", errors="replace") for r in taken
        )
        self.matches += len(taken)
        if len(records) > len(taken):
            self.truncated = self.done = True
            return False
        return True

    def add_match_block(self, block: bytes, count: int) -> bool:
        """:meth:`add_match_records` for ``count`` whole records at once (``block`` ends with the
        last one's newline), when each holds exactly one NUL (the caller compared the counts;
        ripgrep never prints a NUL inside a line's text: such a line is binary data, which it
        reports instead). Every NUL becomes the ``:`` of ``path:N:text``, the CR before each newline
        goes, and the block is decoded in one pass: the same text, record for record (a newline
        ends any partial UTF-8 sequence before it, so decoding whole or in records agrees)."""
        if self.done:
            return False
        if b"\r" in block:
            block = block.replace(b"\r\n", b"\n")
        return self.add_match_lines(block.replace(b"\0", b":"), count, 1)

    def add_match_lines(self, block: bytes, count: int, tail: int) -> bool:
        """``count`` match lines ``path:N:text`` at once, each ended by a newline but the last,
        after which ``block`` holds ``tail`` more bytes that are not part of it (``_RgHeading``'s
        blocks: the next line's path already put after the last newline); decoded in one pass,
        up to ``max_results``."""
        if self.done:
            return False
        room = self.max_results - self.matches
        end = len(block) - tail
        if count > room:
            end = -1
            for _ in range(room):
                end = block.index(b"\n", end + 1)
        if end > 0:
            self.lines.append(str(memoryview(block)[:end], "utf-8", "replace"))
            self.matches += min(count, room)
        if count > room:
            self.truncated = self.done = True
            return False
        return True

    def add_file_block(self, records: list[bytes]) -> bool | None:
        """files_with_matches / count: ripgrep's records in order (``path`` / ``path\0N``), taken as
        they are up to ``max_results`` (a count's NUL becomes its ``:``) and decoded in one pass -
        the text :meth:`add_file` gives one by one. ``None``, having taken nothing, when a record
        is not of that shape (empty, not one NUL, a zero count): they go one at a time then."""
        if self.done:
            return False
        if b"" in records:
            return None
        if self.mode == "count":
            joined = b"\n".join(records) + b"\n"
            if count_byte(joined, b"\0") != len(records) or b"\x000\n" in joined:
                return None
        room = self.max_results - self.matches
        taken = records[:room] if len(records) > room else records
        if taken:
            block = b"\n".join(taken)
            if self.mode == "count":
                block = block.replace(b"\0", b":")
            self.lines.append(block.decode("utf-8", errors="replace"))
            self.matches += len(taken)
        if len(records) > len(taken):
            self.truncated = self.done = True
            return False
        return True

    def add_file(self, path: str, count: int) -> bool:
        if self.done:
            return False
        if count <= 0:
            return True
        if self.matches >= self.max_results:
            self.truncated = True
            self.done = True
            return False
        self.matches += 1
        self.lines.append(path if self.mode == "files_with_matches" else f"{path}:{count}")
        return True

    def text(self) -> str:
        out = "\n".join(self.lines)
        if self.truncated:
            unit = "matches" if self.mode == "content" else "files"
            out += (
                f"\n[Results truncated: showing the first {self.max_results} {unit}. "
                "Narrow the pattern, the path or glob_filter to see the rest.]"
            )
        return out


def _display_line(raw: str) -> str:
    if raw.endswith("\n"):
        raw = raw[:-1]
    if raw.endswith("\r"):
        raw = raw[:-1]
    return raw


def validate_options(options: GrepOptions) -> None:
    if options.output_mode not in OUTPUT_MODES:
        raise ValueError(f"unknown output_mode {options.output_mode!r}; expected one of {', '.join(OUTPUT_MODES)}")
    if options.max_results < 1:
        raise ValueError(f"max_results must be at least 1, got {options.max_results}")
    if options.context_lines < 0:
        raise ValueError(f"context_lines must not be negative, got {options.context_lines}")


def is_binary_file(path: str, sniff: int = BINARY_SNIFF_BYTES) -> bool:
    with open(path, "rb") as fh:
        return b"\0" in fh.read(sniff)


def binary_file_result(pattern: str, path: str, options: GrepOptions) -> str:
    """What both backends say for a binary file that was named explicitly."""
    flags = re.IGNORECASE if options.case_insensitive else 0
    regex = _compile(pattern, flags)
    with open(path, "rb") as fh:
        raw = fh.read(SEARCH_READ_LIMIT)
        cut = fh.read(1) != b""
    data = raw.decode("utf-8", errors="replace")
    del raw
    note = _cut_note(path) if cut else None
    if not regex.search(data):
        return f"{path}: {note}" if note and options.output_mode == "content" else ""
    if options.output_mode == "files_with_matches":
        return path
    if options.output_mode == "count":
        return f"{path}:{sum(1 for line in data.split(chr(10)) if regex.search(line))}"
    return f"{path}: binary file matches" + (f"\n{path}: {note}" if note else "")


def _cut_note(path: str) -> str:
    try:
        size = os.path.getsize(path)
    except OSError:
        size = -1
    return CUT_NOTE.format(limit=SEARCH_READ_LIMIT // (1024 * 1024), size=size)


def _compile(pattern: str, flags: int) -> re.Pattern[str]:
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ValueError(f"Invalid regex {pattern!r}: {exc}") from None


# ---------------------------------------------------------------------------------------------
# ripgrep backend


def find_ripgrep() -> str | None:
    """``rg`` from the running interpreter's bin directory (the ripgrep wheel), else from PATH."""
    name = "rg.exe" if sys.platform == "win32" else "rg"
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("rg")


async def grep_ripgrep(rg: str, pattern: str, target: str, options: GrepOptions, *, target_is_dir: bool) -> str:
    """Search with ripgrep. ``target`` is an absolute file or directory that exists.

    ripgrep matches ``--glob`` patterns that contain a ``/`` against paths relative to its working
    directory, so it runs in the searched directory to anchor them there.
    """
    cwd = target if target_is_dir else os.path.dirname(target)
    # Content is read in path order (``--sort path``) so that the first ``max_results`` matches
    # can be kept and ripgrep stopped early. File lists and counts are small even when matches
    # are many: ripgrep searches with all its threads, unsorted, and the list is sorted here -
    # ``--sort path`` would make it search on one thread (1.7x slower on a big tree).
    content = options.output_mode == "content"
    args = [rg, "--no-config", "--color", "never", "--no-messages", "--with-filename"]
    if content:
        args += ["--sort", "path"]
    if options.case_insensitive:
        args.append("--ignore-case")
    if options.glob_filter:
        args += ["--glob", options.glob_filter]
    tail = ["--regexp", pattern, "--", target]
    if not content:
        args += ["--null", "--count" if options.output_mode == "count" else "--files-with-matches"]
        return await _run_ripgrep([[*args, *tail]], cwd, _RgText(_collector(options), None), pattern, options)
    # A directory is searched in parts side by side, read back in order (ra.env.ripgrep_parts).
    count = min(ripgrep_parts.cores(), ripgrep_parts.MAX_PARTS)
    split = ripgrep_parts.split_directory(target, count) if target_is_dir else None
    text = await _content(args, tail, cwd, split, pattern, options, target, target_is_dir)
    if split is not None and split.changed():
        # An entry came or went at the top of the tree while the parts ran: one without a rule
        # was searched by every part. Once more, in one part.
        text = await _content(args, tail, cwd, None, pattern, options, target, target_is_dir)
    return text


async def _content(
    args: list[str],
    tail: list[str],
    cwd: str,
    split: ripgrep_parts.Split | None,
    pattern: str,
    options: GrepOptions,
    target: str,
    target_is_dir: bool,
) -> str:
    """A content search: ``args`` and ``tail`` (the pattern and the target) around the layout
    read, once per part of ``split`` (or once)."""
    context = ["--context", str(options.context_lines)] if options.context_lines else []

    def commands(*layout: str) -> list[list[str]]:
        # The parts' rules come last: a later --glob wins over an earlier one (the caller's).
        return [[*args, *layout, *rules, *tail] for rules in (split.rules if split else [()])]

    if not context and target_is_dir:
        # Grouped by file, each path written once (see _RgHeading).
        grouped = commands("--null", "--line-number", "--heading")
        with contextlib.suppress(HeadingUnreadable):
            return await _run_ripgrep(grouped, cwd, _RgHeading(_collector(options)), pattern, options)
    # Plain lines, the path ended by NUL (``path\0N:text``, ``path\0N-text`` for context):
    # a third of the bytes of ``--json`` and no JSON to decode per line.
    text = commands("--null", "--line-number", "--no-heading", *context)
    try:
        reader = _RgText(_collector(options), decide_by_files(target, target_is_dir))
        return await _run_ripgrep(text, cwd, reader, pattern, options)
    except AmbiguousOutput:
        # A line reads both as ripgrep's note about a file and as the start of a file name
        # holding newlines, and the file system cannot say which (both files exist, or neither:
        # the tree changed meanwhile). The text alone never can, so the search is run again in
        # ripgrep's JSON, where every path and line is a quoted string of its own. Only names
        # made to look like ripgrep's notes get here.
        quoted = commands("--json", *context)
        return await _run_ripgrep(quoted, cwd, _RgJson(_collector(options)), pattern, options)


def _collector(options: GrepOptions) -> _Collector:
    return _Collector(options.output_mode, options.max_results, options.context_lines)


async def _run_ripgrep(
    commands: list[list[str]],
    cwd: str,
    output: _RgText | _RgHeading | _RgJson,
    pattern: str,
    options: GrepOptions,
) -> str:
    """Run ripgrep (``commands``: one, or one a part of the tree, see ``ra.env.ripgrep_parts``) in
    ``cwd``, the output read into ``output`` until it is done or the collector has enough; the
    collector's text. stdout is a pipe of ra's own (ra.env.pipes): enlarged, read in large
    pieces, and a trickle of small writes (ripgrep's threads write one record each) is let gather
    between reads."""
    collector = output.collector
    stopped_early, results = await ripgrep_parts.run_in_order(commands, cwd, output, wanted=options.max_results)
    if not stopped_early and not collector.lines:
        for returncode, stderr in results:
            if returncode != 2:
                continue
            if "regex" in stderr or "parse" in stderr:
                raise ValueError(f"Invalid regex {pattern!r}: {stderr}")
            if "glob" in stderr:
                raise ValueError(f"Invalid glob_filter {options.glob_filter!r}: {stderr}")
            if stderr:
                raise OSError(f"ripgrep failed: {stderr}")
    return collector.text()


class _RgText:
    """ripgrep's plain output (``--null``), piece by piece as the pipe gives it, into a collector.

    ``decide``: how a line shaped like ripgrep's note that is followed by a record is read (see
    :func:`_rejoin`); None where ripgrep prints no notes (counts, file lists)."""

    def __init__(self, collector: _Collector, decide: Decide | None) -> None:
        self.collector = collector
        self.decide = decide
        self.mode = collector.mode
        self.content = collector.mode == "content"
        self.delimiter = b"\n" if collector.mode in ("content", "count") else b"\0"
        self.joins = self.delimiter == b"\n"
        self.with_separators = bool(collector.context)
        self.whole_blocks = self.content and not collector.context
        self.pending = b""
        self.carry = b""  # the start of a record whose path holds a newline, or a note not yet read
        self.unsorted: list[bytes] = []

    def feed(self, chunk: bytes) -> bool:
        """Take the next piece of output; False once the collector has enough."""
        pending = self.pending + chunk if self.pending else chunk
        if self.whole_blocks and not self.carry:
            # Every record a match: when the complete records hold as many NULs as newlines,
            # none is broken (each has the one NUL that ends its path) and none is a note, so
            # they are converted as one block.
            end = pending.rfind(b"\n") + 1
            if not end:
                self.pending = pending
                return True
            block = pending[:end] if end < len(pending) else pending
            count = count_byte(block, b"\n")
            if count_byte(block, b"\0") == count:
                self.pending = pending[end:]
                return self.collector.add_match_block(block, count)
        delimiter = self.delimiter
        nuls = count_byte(pending[: pending.rfind(delimiter) + 1], b"\0") if self.joins else 0
        *records, self.pending = pending.split(delimiter)
        if self.joins:
            records, self.carry = _rejoin(records, self.carry, self.with_separators, nuls, self.decide)
        if not self.content:
            self.unsorted.extend(records)
            return True
        return _feed_rg_records(self.collector, records, self.mode)

    def finish(self) -> None:
        """A process's output has ended (a search in parts has one a part): what is still open,
        and a file list or counts in path order."""
        if self.pending or self.carry:
            records = [self.pending]
            if self.joins:
                nuls = count_byte(self.pending, b"\0")
                records, _ = _rejoin(records, self.carry, self.with_separators, nuls, self.decide, final=True)
            if self.content:
                _feed_rg_records(self.collector, records, self.mode)
            else:
                self.unsorted.extend(records)
            self.pending = self.carry = b""
        if not self.content:
            self.unsorted.sort(key=_PATH_ORDER)  # path order, as ``--sort path`` gives (bytewise)
            if not self.collector.add_file_block(self.unsorted):
                _feed_rg_records(self.collector, self.unsorted, self.mode)
            self.unsorted = []


class HeadingUnreadable(Exception):
    """ripgrep's grouped output holds a path this reading cannot place (one holding a newline):
    the search is run again in the per-line form, which :func:`_rejoin` reads."""


class _RgHeading:
    """ripgrep's grouped output for content without context lines (``--heading --null``), into a
    collector: a file's path once, ended by its NUL, then its lines ``N:text``, and a blank line
    before the next file. A line of source is about as long as its path, so writing the path once
    per file instead of once per line takes a third off what goes through the pipe (8.6 MB ->
    5.4 MB for the bench's tree, where ripgrep's own writing and the pipe's copies are most of
    what ra adds); the path is put back before every line here, a block of lines per
    ``bytes.replace``.

    A body line never is empty (it starts with its number), so a blank line can only end a file.
    A path holding a newline raises :class:`HeadingUnreadable` at its head, before anything of its
    file is taken. ripgrep's note about binary data past a match (``path: WARNING: ...``) comes
    inside its file's group and is read line by line."""

    def __init__(self, collector: _Collector) -> None:
        self.collector = collector
        self.pending = b""
        self.path: bytes | None = None  # the file whose lines come next; None: a path comes next
        self.prefix = self.glue = b""

    def feed(self, chunk: bytes) -> bool:
        """Take the next piece of output; False once the collector has enough."""
        data = self.pending + chunk if self.pending else chunk
        pos, size = 0, len(data)
        while pos < size:
            if self.path is None:
                nul = data.find(b"\0", pos)
                if nul < 0:
                    break
                path = data[pos:nul]
                if b"\n" in path:
                    raise HeadingUnreadable(path.decode("utf-8", errors="replace"))
                self.path, self.prefix, self.glue = path, path + b":", b"\n" + path + b":"
                pos = nul + 1
                continue
            if data[pos] == 10:  # the blank line after a file's last line
                self.path = None
                pos += 1
                continue
            blank = data.find(b"\n\n", pos)
            stop = blank + 1 if blank >= 0 else data.rfind(b"\n", pos) + 1
            if stop <= pos:
                break  # no whole line yet
            if not self._add(data[pos:stop] if pos or stop < size else data):
                self.pending = b""
                return False
            pos = stop
        self.pending = data[pos:] if pos else data
        return True

    def _add(self, block: bytes) -> bool:
        """Whole lines of the current file, each ended by its newline."""
        if b"\r" in block:
            block = block.replace(b"\r\n", b"\n")
        if _RG_NOTE_MARK in block:
            path = self.path
            assert path is not None
            lines = block.split(b"\n")[:-1]
            # A note starts with the path (a line with its number): ``path: WARNING: ...``.
            note_head = path + b": "
            records = [
                line if line.startswith(note_head) and _RG_NOTES.fullmatch(line) else path + b"\0" + line
                for line in lines
            ]
            return self.collector.add_match_records(records)
        lines_with_paths = self.prefix + block.replace(b"\n", self.glue)
        return self.collector.add_match_lines(lines_with_paths, count_byte(block, b"\n"), len(self.glue))

    def finish(self) -> None:
        """A process's output has ended: a last line without its newline (ripgrep ends every
        line with one; a killed ripgrep may not). The next output starts with a path."""
        if self.pending and self.path is not None:
            self._add(self.pending + b"\n")
        self.pending = b""
        self.path = None


class _RgJson:
    """ripgrep's ``--json`` output for content, into a collector: the slow, unambiguous reading,
    for a search whose plain output :func:`_rejoin` cannot read (a directory searched; the
    binary data past a file's matches is ripgrep's "stopped searching" case there)."""

    def __init__(self, collector: _Collector) -> None:
        self.collector = collector
        self.pending = b""

    def feed(self, chunk: bytes) -> bool:
        *lines, self.pending = (self.pending + chunk).split(b"\n")
        return _feed_rg_json(self.collector, lines)

    def finish(self) -> None:
        _feed_rg_json(self.collector, [self.pending])
        self.pending = b""


def _feed_rg_json(collector: _Collector, lines: list[bytes]) -> bool:
    import json

    for line in lines:
        if not line:
            continue
        message = json.loads(line)
        kind, data = message.get("type"), message.get("data") or {}
        if kind in ("match", "context"):
            text = _json_text(data["lines"]).removesuffix("\n").removesuffix("\r")
            if not collector.add_line(_json_text(data["path"]), data["line_number"], text, kind == "match"):
                return False
        elif kind == "end" and data.get("binary_offset") is not None:
            collector.add_note(_json_text(data["path"]), LATE_BINARY_NOTE.format(offset=data["binary_offset"]))
    return True


def _json_text(value: dict[str, str]) -> str:
    """A path or line of ripgrep's JSON: ``{"text": ...}``, or ``{"bytes": base64}`` where it is
    not UTF-8 (decoded as the plain output is: invalid sequences replaced)."""
    if "text" in value:
        return value["text"]
    import base64

    return base64.b64decode(value["bytes"]).decode("utf-8", errors="replace")


def count_byte(data: bytes, byte: bytes) -> int:
    """How many times the single byte ``byte`` occurs in ``data``.

    ``bytes.count`` of one byte is a plain loop over every byte in CPython (about 0.3 ms a MiB,
    however rare the byte), while ``bytes.replace`` finds a single byte with ``memchr``: dropping
    every occurrence and comparing lengths costs per occurrence instead. Where the byte is rarer
    than one in :data:`_MEMCHR_GAP` (ripgrep's lines of source, ~100 bytes) that is 2-3x faster;
    where it is dense, the plain loop is. A grep that returns every match counts each piece of
    its output twice (newlines and NULs), so the choice is made from the first 4 KiB."""
    if len(data) < _SAMPLE_BYTES * 4 or data.count(byte, 0, _SAMPLE_BYTES) * _MEMCHR_GAP > _SAMPLE_BYTES:
        return data.count(byte)
    return len(data) - len(data.replace(byte, b""))


#: How much of a piece of output :func:`count_byte` looks at to choose its way of counting ...
_SAMPLE_BYTES = 4096
#: ... and the mean gap between occurrences past which ``memchr`` wins (measured: even at 32
#: bytes, twice as fast at 64).
_MEMCHR_GAP = 40


#: What marks ripgrep's note about binary data among a file's lines (see :data:`_RG_NOTES`).
_RG_NOTE_MARK = b": WARNING: stopped searching binary file after match"

#: The line number and separator that open a content record's text: ``12:`` (a match), ``12-``
#: (a context line).
_LINE_HEAD = re.compile(rb"(\d+)([:-])")


class AmbiguousOutput(Exception):
    """A line of ripgrep's output reads both as its note about a file and as the start of a file
    name holding newlines, and the file system cannot tell which (see :func:`_rejoin`)."""


#: ``decide(note_path, name_path)`` for a line shaped like ripgrep's note followed by a record:
#: True when it is ripgrep's note about ``note_path``, False when it opens the file name
#: ``name_path`` (which runs to the next NUL), None when it cannot tell.
Decide = Callable[[bytes, bytes], "bool | None"]


def decide_by_files(target: str, target_is_dir: bool) -> Decide:
    """How :func:`_rejoin` reads a note-shaped line followed by a record, ripgrep having searched
    ``target``. A file named on its own is the only path in the output, so the text tells. In a
    directory, the file system does: a note is about a file ripgrep searched, a name is one that
    exists; where both exist (or neither: the tree changed since), it cannot tell."""
    if not target_is_dir:
        named = os.fsencode(target)
        return lambda note_path, name_path: note_path == named

    def decide(note_path: bytes, name_path: bytes) -> bool | None:
        note = os.path.isfile(note_path)
        return note if note != os.path.lexists(name_path) else None

    return decide


def _rejoin(
    records: list[bytes],
    carry: bytes,
    with_separators: bool,
    nuls: int,
    decide: Decide | None,
    *,
    final: bool = False,
) -> tuple[list[bytes], bytes]:
    """Records end at a newline, but a file's name may hold one: a piece without the NUL that
    ends a path is the start of the next record. Returns the whole records and what is still open
    (``--`` between context groups is a record of its own). ``nuls``: how many NULs the records
    hold in all; ``final``: the output has ended.

    A piece shaped like ripgrep's note about binary data (``path: WARNING: ...``, no NUL) is its
    note, or the start of a name made to look like one: ``x: WARNING: ... offset 5)`` and a
    newline is a valid directory name. At the end of the output it is a note (a name would be
    followed by its record). Followed by more, ``decide`` chooses (None: ripgrep prints no notes
    here, such as for counts; every such piece is part of a name); until the next NUL has
    arrived the pieces stay open. Raises :class:`AmbiguousOutput` where ``decide`` cannot tell.
    """
    if not carry:
        # The common case, checked in C: every record holds its one NUL (text with a NUL is
        # binary to ripgrep, which does not print it), so nothing is broken.
        whole = len(records) - records.count(b"") - (records.count(b"--") if with_separators else 0)
        if nuls == whole:
            return records, b""
    # What is open starts a record: read again with what follows, it is decided the same way.
    pieces = [*carry.split(b"\n"), *records] if carry else records
    out: list[bytes] = []
    count = len(pieces)
    i = 0
    while i < count:
        piece = pieces[i]
        i += 1
        if b"\0" in piece or (with_separators and piece == b"--"):
            out.append(piece)
            continue
        if not piece:
            continue
        start, glued = i - 1, piece
        while True:
            if decide is not None and (note := _RG_NOTES.fullmatch(glued)) is not None:
                end = next((k for k in range(i, count) if b"\0" in pieces[k]), -1)
                if end == -1 and not final:
                    return out, b"\n".join(pieces[start:])  # a name's record may be yet to come
                if end == -1:
                    is_note = True
                else:
                    name = b"\n".join([*pieces[start:end], pieces[end].partition(b"\0")[0]])
                    verdict = decide(note.group(1), name)
                    if verdict is None:
                        raise AmbiguousOutput(glued.decode("utf-8", errors="replace"))
                    is_note = verdict
                if is_note:
                    out.append(glued)
                else:
                    out.append(b"\n".join(pieces[start : end + 1]))
                    i = end + 1
                break
            if i == count:
                return out, (b"" if final else glued)
            glued += b"\n" + pieces[i]
            i += 1
            if b"\0" in pieces[i - 1]:
                out.append(glued)
                break
    return out, b""


#: The sort key of a ``--count`` (``path\0count``) or ``--files-with-matches`` record: "/" made
#: the lowest byte, so paths sort component by component, as ``--sort path`` sorts them (``sub/x``
#: before ``sub-x``). A count's own NUL, lowest too, ends its path: ``a\0 7`` sorts before
#: ``a.txt\0 2`` as ``a`` before ``a.txt`` (paths are unique, and a file is no directory).
_PATH_ORDER = operator.methodcaller("replace", b"/", b"\x00")


def _rg_note(record: bytes) -> tuple[str, str] | None:
    """ripgrep's line about a file it stopped reading at binary data, as ``(path, note)``."""
    found = _RG_NOTES.fullmatch(record)
    if found is None:
        return None
    path = found.group(1).decode("utf-8", errors="replace")
    note = LATE_BINARY_NOTE if found.group(2).startswith(b"WARNING") else BINARY_MATCH_NOTE
    return path, note.format(offset=int(found.group(3)))


def _feed_rg_records(collector: _Collector, records: list[bytes], mode: str) -> bool:
    if mode == "content" and not collector.context:
        return collector.add_match_records(records)
    add_line = collector.add_line
    last_path = b""
    path = ""
    for record in records:
        if not record:
            continue
        if mode == "content":
            raw_path, nul, rest = record.partition(b"\0")
            if not nul:
                note = _rg_note(record)
                if note is not None:
                    collector.add_note(*note)
                continue  # else "--" between context groups: the collector draws its own
            if raw_path != last_path:
                last_path, path = raw_path, raw_path.decode("utf-8", errors="replace")
            match = _LINE_HEAD.match(rest)
            if match is None:
                continue
            end = match.end()
            text = rest[end:].decode("utf-8", errors="replace")
            if text.endswith("\r"):
                text = text[:-1]
            if not add_line(path, int(match.group(1)), text, match.group(2) == b":"):
                return False
        elif mode == "count":
            path_bytes, _, count = record.rpartition(b"\0")
            if not collector.add_file(path_bytes.decode("utf-8", errors="replace"), int(count)):
                return False
        elif not collector.add_file(record.decode("utf-8", errors="replace"), 1):
            return False
    return True


# ---------------------------------------------------------------------------------------------
# pure-Python backend


@dataclass(slots=True)
class _IgnoreRule:
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool
    basename_only: bool


def _parse_ignore_file(path: str) -> list[_IgnoreRule]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            raw_lines = fh.read().splitlines()
    except OSError:
        return []
    rules: list[_IgnoreRule] = []
    for raw in raw_lines:
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated or line.startswith(("\\#", "\\!")):
            line = line[1:]  # drop the negation mark, or the backslash escaping a literal # or !
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        try:
            regex = translate_glob(line, dot_special=False)
        except (ValueError, re.error):
            continue
        rules.append(_IgnoreRule(regex, negated, dir_only, not anchored))
    return rules


_IGNORE_FILES = (".gitignore", ".ignore", ".rgignore")


def _find_git_root(start: str) -> str | None:
    current = start
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _load_rules(directory: str, in_git: bool) -> list[_IgnoreRule]:
    rules: list[_IgnoreRule] = []
    for name in _IGNORE_FILES:
        if name == ".gitignore" and not in_git:
            continue
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            rules.extend(_parse_ignore_file(candidate))
    return rules


def _ignored(stack: list[tuple[str, list[_IgnoreRule]]], full: str, name: str, is_dir: bool) -> bool:
    verdict = False
    for base, rules in stack:
        rel = os.path.relpath(full, base).replace(os.sep, "/")
        for rule in rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.match(name if rule.basename_only else rel):
                verdict = not rule.negated
    return verdict


@dataclass(slots=True)
class _GlobFilter:
    regex: re.Pattern[str]
    negated: bool
    basename_only: bool
    dir_only: bool

    @classmethod
    def parse(cls, glob: str) -> _GlobFilter:
        negated = glob.startswith("!")
        body = glob[1:] if negated else glob
        dir_only = body.endswith("/")
        body = body.rstrip("/")
        return cls(translate_glob(body.lstrip("/"), dot_special=False), negated, "/" not in body, dir_only)

    def matches(self, rel: str, name: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        return bool(self.regex.match(name if self.basename_only else rel))


def _walk_files(root: str, glob_filter: _GlobFilter | None) -> Iterator[str]:
    """Files under ``root`` in ripgrep's ``--sort path`` order, with its default filters."""
    git_root = _find_git_root(root)
    stack: list[tuple[str, list[_IgnoreRule]]] = []
    if git_root is not None:
        # Ignore files between the repository root and the search root apply too.
        chain: list[str] = []
        current = os.path.dirname(root)
        while len(current) >= len(git_root):
            chain.append(current)
            if current == git_root:
                break
            current = os.path.dirname(current)
        for directory in reversed(chain):
            rules = _load_rules(directory, True)
            if rules:
                stack.append((directory, rules))
    yield from _walk_dir(root, root, stack, git_root is not None, glob_filter)


def _walk_dir(
    root: str,
    directory: str,
    stack: list[tuple[str, list[_IgnoreRule]]],
    in_git: bool,
    glob_filter: _GlobFilter | None,
) -> Iterator[str]:
    rules = _load_rules(directory, in_git)
    if rules:
        stack = [*stack, (directory, rules)]
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") or entry.is_symlink():
            continue
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = entry.is_file(follow_symlinks=False)
        except OSError:
            continue
        if not (is_dir or is_file):
            continue
        if stack and _ignored(stack, entry.path, entry.name, is_dir):
            continue
        rel = os.path.relpath(entry.path, root).replace(os.sep, "/")
        if glob_filter is not None:
            hit = glob_filter.matches(rel, entry.name, is_dir)
            if glob_filter.negated and hit:
                continue
            if is_file and not glob_filter.negated and not hit:
                continue
        if is_dir:
            yield from _walk_dir(root, entry.path, stack, in_git, glob_filter)
        else:
            yield entry.path


def _file_lines(path: str, *, past_nul: bool = False) -> tuple[list[str] | None, int, bool]:
    """The file's lines (None for a binary or unreadable file), the offset of the NUL byte past
    the first buffer where reading stopped, as ripgrep stops there (-1: read to the end), and
    whether the file was cut at :data:`SEARCH_READ_LIMIT` (at a line end).
    ``past_nul``: read on past such a NUL (ripgrep's way with a file named on its own)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(BINARY_SNIFF_BYTES)
            if b"\0" in data:
                return None, -1, False  # binary: the rest is never read
            data += fh.read(SEARCH_READ_LIMIT - len(data))
            cut = fh.read(1) != b""
    except OSError:
        return None, -1, False
    nul = data.find(b"\0")
    if nul != -1:
        if nul < BINARY_SNIFF_BYTES:
            return None, -1, False
        if past_nul:
            nul = -1
        else:
            data = data[: data.rfind(b"\n", 0, nul) + 1]
            cut = False  # stopped at the NUL, before the cut
    if cut:
        data = data[: data.rfind(b"\n") + 1]
    if not data:
        return [], nul, cut
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines, nul, cut


def grep_python(pattern: str, target: str, options: GrepOptions) -> str:
    """Search without ripgrep (blocking; run it in a worker thread)."""
    flags = re.IGNORECASE if options.case_insensitive else 0
    regex = _compile(pattern, flags)
    glob_filter = _GlobFilter.parse(options.glob_filter) if options.glob_filter else None
    collector = _Collector(options.output_mode, options.max_results, options.context_lines)
    named = os.path.isfile(target)
    files = [target] if named else _walk_files(target, glob_filter)
    context = options.context_lines
    for path in files:
        lines, stopped_at, cut = _file_lines(path, past_nul=named)
        if cut and options.output_mode == "content" and lines is not None:
            # Said first, whether or not the part searched matched: the rest was not searched.
            collector.add_note(path, _cut_note(path))
        if not lines:
            continue
        hits = [i for i, line in enumerate(lines) if regex.search(line)]
        if not hits:
            continue
        # ripgrep, searching a directory, stops reading a file at a NUL past the first buffer and
        # leaves it out of a count; a file named on its own it reads to the end, but shows no
        # match from a line holding a NUL, and stops there.
        if stopped_at != -1 and options.output_mode == "count":
            continue
        if options.output_mode != "content":
            if not collector.add_file(path, len(hits)):
                break
            continue
        note = LATE_BINARY_NOTE.format(offset=stopped_at) if stopped_at != -1 else None
        if named:
            binary = next((n for n, i in enumerate(hits) if "\0" in lines[i]), None)
            if binary is not None:
                note = BINARY_MATCH_NOTE.format(offset=_nul_offset(path, hits[binary]))
                hits = hits[:binary]
        hit_set = set(hits)
        shown: list[int] = []
        last = -1
        for i in hits:
            for j in range(max(i - context, last + 1), min(i + context, len(lines) - 1) + 1):
                shown.append(j)
                last = j
        if not all(collector.add_line(path, j + 1, _display_line(lines[j]), j in hit_set) for j in shown):
            break
        if note is not None:
            collector.add_note(path, note)
    return collector.text()


def _nul_offset(path: str, line_index: int) -> int:
    """The byte offset of the first NUL in the file's line ``line_index`` (0-based; a line of the
    part :func:`_file_lines` read)."""
    with open(path, "rb") as fh:
        data = fh.read(SEARCH_READ_LIMIT)
    start = 0
    for _ in range(line_index):
        start = data.index(b"\n", start) + 1
    return data.index(b"\0", start)

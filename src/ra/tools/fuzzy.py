"""How the editing tools read file text, compare it leniently, and write it back unchanged.

Shared by ``apply_patch`` and ``edit_file``. Two jobs live here because they meet at every edit:

* **Keeping bytes.** :class:`DecodedText` remembers a file's encoding and byte-order mark, and
  :class:`LineDoc` its line endings (LF, CRLF, or a per-line mix) and whether it ends with a
  newline, so that an edit changes only the lines it means to change.
* **Finding text a model remembered imperfectly.** Models drop trailing spaces, re-indent, and
  type ASCII where the file has typographic quotes or dashes. The matching ladder
  (:data:`LEVELS`) retries with progressively looser line comparisons, and callers report which
  rung matched so the model learns its copy was inexact. :func:`closest_region` finds the best
  partial match for error messages, so a failed edit tells the model where to look.

The punctuation map is one character to one character on purpose: a match found in the
normalised text sits at the same offsets in the original text.
"""

from __future__ import annotations

import codecs
import difflib
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "LEVELS",
    "LEVEL_NOTES",
    "DecodedText",
    "LineDoc",
    "LineIndex",
    "closest_region",
    "find_all",
    "format_excerpt",
    "normalise",
    "normalise_punctuation",
    "seek",
]


def _punctuation_table() -> dict[int, str]:
    table: dict[int, str] = {}
    dashes = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"
    singles = "\u2018\u2019\u201a\u201b\u2032\uff07"
    doubles = "\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb\uff02"
    spaces = "\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
    for chars, ascii_char in ((dashes, "-"), (singles, "'"), (doubles, '"'), (spaces, " ")):
        for ch in chars:
            table[ord(ch)] = ascii_char
    return table


_PUNCTUATION = _punctuation_table()
_PUNCTUATION_PAIRS = tuple((chr(code), ascii_char) for code, ascii_char in _PUNCTUATION.items())


def normalise_punctuation(text: str) -> str:
    """Typographic dashes, quotes and spaces to their ASCII forms, one character for one.

    ``str.translate`` walks a non-ASCII string one character at a time through the dict (half a
    second for 10 MB); a search-and-replace per mapped character runs at memory speed instead.
    """
    if text.isascii():
        return text
    if len(text) < 256:
        return text.translate(_PUNCTUATION)
    for fancy, plain in _PUNCTUATION_PAIRS:
        if fancy in text:
            text = text.replace(fancy, plain)
    return text


#: The matching ladder, strictest first. Index = level number used by :func:`normalise`.
LEVELS: tuple[str, ...] = ("exact", "rstrip", "strip", "unicode")

#: How each level reads in a note to the model.
LEVEL_NOTES: dict[str, str] = {
    "exact": "exactly",
    "rstrip": "ignoring trailing whitespace",
    "strip": "ignoring leading and trailing whitespace (indentation)",
    "unicode": "ignoring whitespace and treating typographic quotes, dashes and spaces as ASCII",
}


def normalise(line: str, level: int) -> str:
    """The comparison key of ``line`` at ladder ``level`` (see :data:`LEVELS`)."""
    if level == 0:
        return line
    if level == 1:
        return line.rstrip()
    if level == 2:
        return line.strip()
    return normalise_punctuation(line).strip()


# -- bytes <-> text --------------------------------------------------------------------------------

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


@dataclass(slots=True)
class DecodedText:
    """A file's text plus what is needed to turn edited text back into the same kind of bytes.

    UTF-8 (with or without BOM) and BOM-marked UTF-16 decode as such; anything else that is not
    valid UTF-8 decodes as latin-1, which maps every byte to one character, so untouched bytes
    survive a round trip exactly.
    """

    text: str
    encoding: str
    bom: bytes = b""

    @classmethod
    def decode(cls, data: bytes) -> DecodedText:
        for bom, encoding in _BOMS:
            if data.startswith(bom):
                try:
                    return cls(data[len(bom) :].decode(encoding), encoding, bom)
                except UnicodeDecodeError:
                    break
        try:
            return cls(data.decode("utf-8"), "utf-8")
        except UnicodeDecodeError:
            return cls(data.decode("latin-1"), "latin-1")

    def encode(self, text: str) -> bytes:
        """Raises UnicodeEncodeError when ``text`` has characters the encoding cannot hold."""
        return self.bom + text.encode(self.encoding)

    @property
    def label(self) -> str:
        """Human name of the encoding, for messages."""
        if self.encoding == "latin-1":
            return "latin-1 (the file is not valid UTF-8)"
        return f"{self.encoding} with BOM" if self.bom else self.encoding


# -- lines -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class LineDoc:
    """Text split into lines without their endings.

    ``eols`` is None when every line ends the same way (``eol``); for files that mix endings it
    holds each line's own ending so untouched lines keep theirs. ``eol`` is the dominant ending,
    used for lines an edit adds.
    """

    lines: list[str]
    eol: str = "\n"
    final_newline: bool = True
    eols: list[str] | None = None

    @classmethod
    def from_text(cls, text: str) -> LineDoc:
        if not text:
            return cls([], "\n", False)
        lf = text.count("\n")
        crlf = text.count("\r\n")
        eols: list[str] | None = None
        if crlf == 0:
            eol = "\n"
            parts = text.split("\n")
        elif crlf == lf:
            eol = "\r\n"
            parts = text.split("\r\n")
        else:
            eol = "\r\n" if crlf * 2 > lf else "\n"
            raw = text.split("\n")
            parts = []
            eols = []
            for part in raw[:-1]:
                if part.endswith("\r"):
                    parts.append(part[:-1])
                    eols.append("\r\n")
                else:
                    parts.append(part)
                    eols.append("\n")
            parts.append(raw[-1])
            eols.append("")
        final_newline = parts[-1] == ""
        if final_newline:
            parts.pop()
            if eols is not None:
                eols.pop()
        return cls(parts, eol, final_newline, eols)

    def to_text(self) -> str:
        if not self.lines:
            return ""
        if self.eols is None:
            body = self.eol.join(self.lines)
            return body + self.eol if self.final_newline else body
        eols = self.eols
        last = self.eol if self.final_newline else ""
        if eols[-1] != last:
            eols = [*eols[:-1], last]
        return "".join(line + end for line, end in zip(self.lines, eols, strict=True))


class LineIndex:
    """A file's lines with their normalised views computed once, on first use."""

    __slots__ = ("_views", "lines")

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self._views: dict[int, list[str]] = {0: lines}

    def view(self, level: int) -> list[str]:
        view = self._views.get(level)
        if view is None:
            if level == 1:
                view = [line.rstrip() for line in self.lines]
            elif level == 2:
                view = [line.strip() for line in self.lines]
            else:
                # One pass over the joined text (the mapping never produces or removes a newline).
                joined = normalise_punctuation("\n".join(self.lines)) if self.lines else ""
                view = [line.strip() for line in joined.split("\n")] if self.lines else []
            self._views[level] = view
        return view


def _iter_matches(hay: Sequence[str], pat: Sequence[str], start: int, stop: int):
    """Start positions ``s`` in ``[start, stop]`` with ``hay[s:s+len(pat)] == pat``, ascending.

    Scans for the longest pattern line (usually the rarest) with the C-level ``list.index`` and
    checks the rest only there, which keeps a search over a 100,000-line file cheap.
    """
    k = len(pat)
    if k == 0 or stop < start:
        return
    anchor = max(range(k), key=lambda i: len(pat[i]))
    needle = pat[anchor]
    pat_list = list(pat)
    i = start + anchor
    end = stop + anchor + 1
    index = hay.index if isinstance(hay, list) else list(hay).index
    while i < end:
        try:
            p = index(needle, i, end)
        except ValueError:
            return
        s = p - anchor
        if hay[s : s + k] == pat_list:
            yield s
        i = p + 1


def find_all(hay: list[str], pat: Sequence[str], start: int = 0) -> list[int]:
    """Non-overlapping start positions of ``pat`` in ``hay`` from ``start``."""
    found: list[int] = []
    k = len(pat)
    nxt = start
    for s in _iter_matches(hay, pat, start, len(hay) - k):
        if s >= nxt:
            found.append(s)
            nxt = s + k
    return found


def seek(
    index: LineIndex,
    pattern: Sequence[str],
    start: int,
    *,
    at_end: bool = False,
    near: int | None = None,
    levels: Sequence[int] = (0, 1, 2, 3),
) -> tuple[int, int] | None:
    """Where ``pattern`` occurs at or after line ``start``: ``(position, level)`` or None.

    Every position is tried at one level before the next, looser level is tried, so a loose match
    never wins over a strict one further down. ``at_end`` allows only the position that ends at the
    last line. ``near`` picks, within a level, the match closest to that line instead of the first.
    """
    n = len(index.lines)
    k = len(pattern)
    if k == 0:
        return (n if at_end else start, 0) if start <= n else None
    last = n - k
    if last < start:
        return None
    for level in levels:
        hay = index.view(level)
        pat = [normalise(p, level) for p in pattern]
        if at_end:
            if hay[last:] == pat:
                return last, level
            continue
        if near is None:
            for s in _iter_matches(hay, pat, start, last):
                return s, level
            continue
        best: int | None = None
        for s in _iter_matches(hay, pat, start, last):
            if best is None or abs(s - near) < abs(best - near):
                best = s
            if s >= near:
                break  # matches come in ascending order: every later one is farther away
        if best is not None:
            return best, level
    return None


def closest_region(lines: list[str], pattern: Sequence[str], index: LineIndex | None = None) -> tuple[int, int] | None:
    """The window of ``len(pattern)`` lines most like ``pattern``: ``(start, equal_lines)``.

    Lines are compared loosely (whitespace and typographic punctuation ignored); each equal line
    votes for the window it implies, and the window with most votes wins. When no line is equal,
    the file line most similar to the first non-blank pattern line anchors the window instead.
    Only used on the failure path, to show the model what the file really says.
    """
    if not lines or not pattern:
        return None
    view = (index or LineIndex(lines)).view(3)
    wanted: dict[str, list[int]] = {}
    for j, p in enumerate(pattern):
        key = normalise(p, 3)
        if key:
            wanted.setdefault(key, []).append(j)
    if not wanted:
        return None
    votes: dict[int, int] = {}
    for i, line in enumerate(view):
        offsets = wanted.get(line)
        if offsets:
            for j in offsets:
                s = i - j
                votes[s] = votes.get(s, 0) + 1
    if votes:
        best = max(votes.items(), key=lambda item: (item[1], -item[0]))
        start = min(max(best[0], 0), max(len(lines) - 1, 0))
        return start, best[1]
    if len(view) > 50_000:
        return None
    first_j, first = next((j, normalise(p, 3)) for j, p in enumerate(pattern) if normalise(p, 3))
    close = difflib.get_close_matches(first, view, n=1, cutoff=0.6)
    if not close:
        return None
    start = max(view.index(close[0]) - first_j, 0)
    return start, 0


def format_excerpt(lines: list[str], start: int, count: int, *, margin: int = 1, limit: int = 30) -> str:
    """Lines ``start .. start+count`` (0-based) with ``margin`` lines around, numbered from 1."""
    lo = max(start - margin, 0)
    hi = min(start + count + margin, len(lines))
    clipped = hi - lo > limit
    if clipped:
        hi = lo + limit
    width = len(str(hi))
    out = [f"{i + 1:>{width}} | {lines[i]}" for i in range(lo, hi)]
    if clipped:
        out.append(f"{'':>{width}} | ...")
    return "\n".join(out)


def line_starts(text: str) -> list[int]:
    """Offset of the first character of every line of ``text`` (split on ``\\n``)."""
    starts = [0]
    find = text.find
    pos = find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = find("\n", pos + 1)
    return starts


def line_of(starts: list[int], offset: int) -> int:
    """1-based line number of ``offset`` given :func:`line_starts`."""
    return bisect_left(starts, offset + 1)

"""Reading a function's docstring for ``@ra.tool``: the description and one line per parameter.

The three styles people write are understood - Google (``Args:`` with ``name (type): text``),
NumPy (``Parameters`` underlined with dashes, ``name : type`` then indented text) and Sphinx/reST
(``:param name: text``) - without a docstring library: the tool's description is the prose before
the first section, and each parameter's text is joined onto one line. Sections other than the
parameter ones (Returns, Raises, Examples, ...) are left out: the model needs what a parameter
means, not how the function is tested. ``Attributes`` sections are read the same way, so a
dataclass's docstring describes its fields.
"""

from __future__ import annotations

import inspect
import re

__all__ = ["Docstring", "parse_docstring"]

# Section headers that list parameters (Google and NumPy use the same words).
_PARAM_SECTIONS = frozenset(
    {
        "args",
        "arguments",
        "parameters",
        "params",
        "keyword args",
        "keyword arguments",
        "other parameters",
        "attributes",
        "fields",
    }
)
_GOOGLE_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_ENTRY = re.compile(r"^\*{0,2}([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*\*{0,2}[A-Za-z_][A-Za-z0-9_]*)*)\s*(?::.*)?$")
_SPHINX_FIELD = re.compile(r"^:([A-Za-z]+)((?:\s+[^:]+?)?)\s*:\s*(.*)$")
_SPHINX_PARAM = frozenset({"param", "parameter", "arg", "argument", "key", "keyword", "ivar", "var", "cvar"})


class Docstring:
    """What a docstring says: ``description`` (the prose before any section) and ``params``."""

    __slots__ = ("description", "params")

    def __init__(self, description: str, params: dict[str, str]) -> None:
        self.description = description
        self.params = params

    def __repr__(self) -> str:
        return f"Docstring(description={self.description!r}, params={self.params!r})"


def parse_docstring(doc: str | None) -> Docstring:
    """Split ``doc`` into its description and parameter texts (any of the three styles)."""
    if not doc or not doc.strip():
        return Docstring("", {})
    lines = inspect.cleandoc(doc).splitlines()
    params: dict[str, str] = {}
    end = len(lines)  # where the prose ends: the first section of any style
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        # NumPy: a header line underlined with dashes.
        if i + 1 < len(lines) and stripped and not line[0].isspace() and _NUMPY_UNDERLINE.match(lines[i + 1]):
            end = min(end, i)
            i = _numpy_section(lines, i + 2, stripped.lower(), params)
            continue
        # Google: "Args:" at the left margin, entries indented below it.
        header = _GOOGLE_HEADER.match(line)
        if header and not line[0].isspace() and _is_section(header.group(1), lines, i):
            end = min(end, i)
            i = _google_section(lines, i + 1, header.group(1).lower(), params)
            continue
        # Sphinx: ":param name: text" fields.
        field = _SPHINX_FIELD.match(stripped) if not line[:1].isspace() else None
        if field:
            end = min(end, i)
            i = _sphinx_field(lines, i, field, params)
            continue
        i += 1
    description = "\n".join(lines[:end]).strip()
    return Docstring(description, params)


def _is_section(name: str, lines: list[str], i: int) -> bool:
    """A Google header is a known word, or any capitalised word followed by indented lines."""
    if name.lower() in _PARAM_SECTIONS:
        return True
    following = next((x for x in lines[i + 1 :] if x.strip()), "")
    return name[:1].isupper() and following[:1].isspace()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _google_section(lines: list[str], i: int, name: str, params: dict[str, str]) -> int:
    """Read the indented block after a Google header; returns the index after it."""
    entry_indent: int | None = None
    current: str | None = None
    while i < len(lines):
        line = lines[i]
        if line.strip() and not line[0].isspace():
            break  # back at the margin: the section is over
        if not line.strip():
            i += 1
            continue
        indent = _indent(line)
        if entry_indent is None:
            entry_indent = indent
        if name in _PARAM_SECTIONS:
            match = _GOOGLE_ENTRY.match(line.strip()) if indent <= entry_indent else None
            if match:
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current is not None:
                params[current] = _join(params[current], line.strip())
        i += 1
    return i


def _numpy_section(lines: list[str], i: int, name: str, params: dict[str, str]) -> int:
    """Read a NumPy section body (until the next underlined header); returns where it ends."""
    current: list[str] = []
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and line.strip() and _NUMPY_UNDERLINE.match(lines[i + 1]) and not line[0].isspace():
            break
        if name in _PARAM_SECTIONS and line.strip():
            if not line[0].isspace():
                match = _NUMPY_ENTRY.match(line.strip())
                current = [n.strip().lstrip("*") for n in match.group(1).split(",")] if match else []
                for param in current:
                    params[param] = ""
            else:
                for param in current:
                    params[param] = _join(params[param], line.strip())
        i += 1
    return i


def _sphinx_field(lines: list[str], i: int, field: re.Match[str], params: dict[str, str]) -> int:
    """Read one ``:field arg: text`` and its indented continuation lines."""
    kind, arg, text = field.group(1).lower(), field.group(2).split(), field.group(3).strip()
    i += 1
    while i < len(lines) and lines[i].strip() and lines[i][0].isspace():
        text = _join(text, lines[i].strip())
        i += 1
    if kind in _SPHINX_PARAM and arg:
        params[arg[-1].lstrip("*")] = text  # ":param int count:" names the type first
    return i


def _join(text: str, more: str) -> str:
    return f"{text} {more}" if text else more

"""grep with file names made to look like ripgrep's own notes.

ripgrep's plain output is ``path\\0N:text`` records, one a line, and its note about a file it
stopped reading at binary data is a line of its own with no NUL (``path: WARNING: stopped
searching binary file after match (found "\\0" byte around offset N)``). A file name may hold a
newline, so a directory named like that note plus a newline turns the record of a file inside it
into two lines: a fake note, and a match in a file that may not exist. These trees hold such names
(Linux allows newlines and backslashes in names), real binary files whose genuine note is followed
by more records, and both at once, and the ripgrep backend must print what the pure-Python one
prints for the same tree: in every output mode, with and without context lines, capped right after
the note, and with the note falling across the pipe reads that carry ripgrep's output.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from ra.env import GrepOptions, LocalExecutionEnvironment, ripgrep_parts, search
from ra.env.search import _Collector, _RgHeading, _RgText, decide_by_files, find_ripgrep, grep_ripgrep

pytestmark = pytest.mark.skipif(find_ripgrep() is None, reason="ripgrep not installed")

#: A binary file with a match before its first NUL, which lies past ripgrep's first 64 KiB buffer:
#: ripgrep prints the match, then its note. (No context line reaches the long line before the
#: NUL: that line, across ripgrep's first buffer, is one the two backends show differently.)
LATE_BINARY = b"hit one\n" + b"after\n" * 4 + b"x" * 70000 + b"\nhit two\x00\nhit three\n"
LATE_OFFSET = LATE_BINARY.index(b"\0")


def note_name(offset: int) -> str:
    """A directory name that is ripgrep's note about ``x`` (backslash and zero as two characters)."""
    return f'x: WARNING: stopped searching binary file after match (found "\\0" byte around offset {offset})\n'


def fake_note_tree(root: Path) -> Path:
    """A directory named like a note, holding ``r/foo``: ripgrep prints the record of
    ``<root>/x: WARNING...)\\n/r/foo`` as a note about ``<root>/x`` and a record of ``/r/foo``."""
    (root / note_name(5) / "r").mkdir(parents=True)
    (root / note_name(5) / "r" / "foo").write_text("before\nhit in foo\n")
    (root / "a.txt").write_text("hit a\n")
    (root / "z.txt").write_text("hit z\n")
    return root


def genuine_note_tree(root: Path) -> Path:
    """A real binary file: its match, ripgrep's note, then another file's records."""
    (root / "d").mkdir(parents=True)
    (root / "d" / "bin.txt").write_bytes(LATE_BINARY)
    (root / "d" / "plain.txt").write_text("before\nhit plain\n")
    (root / "e.txt").write_text("hit e\n")
    return root


def both_tree(root: Path) -> Path:
    """``x`` a real binary file whose genuine note is the very name of the directory after it:
    both readings of that line name files that exist, so the text alone cannot tell."""
    root.mkdir(parents=True)
    (root / "x").write_bytes(LATE_BINARY)
    (root / note_name(LATE_OFFSET) / "r").mkdir(parents=True)
    (root / note_name(LATE_OFFSET) / "r" / "foo").write_text("before\nhit in foo\n")
    (root / "z.txt").write_text("hit z\n")
    return root


TREES = {"fake note": fake_note_tree, "genuine note": genuine_note_tree, "both": both_tree}

OPTIONS = [
    GrepOptions(),
    GrepOptions(context_lines=1),
    GrepOptions(context_lines=3),
    GrepOptions(max_results=1),  # the cap falls right before the note-shaped line
    GrepOptions(max_results=2),  # ... right after the record it belongs to
    GrepOptions(max_results=1, context_lines=1),
    GrepOptions(max_results=2, context_lines=1),
    GrepOptions(output_mode="count"),
    GrepOptions(output_mode="files_with_matches"),
    GrepOptions(output_mode="files_with_matches", max_results=1),
]


async def both_backends(root: Path, options: GrepOptions) -> tuple[str, str]:
    rg = LocalExecutionEnvironment(root, grep_backend="ripgrep")
    py = LocalExecutionEnvironment(root, grep_backend="python")
    return await rg.grep("hit", None, options), await py.grep("hit", None, options)


@pytest.mark.parametrize("options", OPTIONS, ids=repr)
@pytest.mark.parametrize("tree", list(TREES))
async def test_ripgrep_prints_what_the_python_backend_prints(tmp_path: Path, tree: str, options: GrepOptions) -> None:
    root = TREES[tree](tmp_path / "t")
    got, expected = await both_backends(root, options)
    assert got == expected
    lines = expected.split("\n")
    if tree == "genuine note" and options.output_mode == "content":
        assert f"{root}/d/bin.txt: {search.LATE_BINARY_NOTE.format(offset=LATE_OFFSET)}" in lines
        assert (f"{root}/d/plain.txt:2:hit plain" in lines) == (options.max_results > 1)
    if tree != "genuine note" and options.output_mode == "content" and options.max_results > 1:
        offset = 5 if tree == "fake note" else LATE_OFFSET
        assert f"{root}/{note_name(offset)}/r/foo:2:hit in foo" in expected  # the file, under its own name
    # One note, about the one binary file with a match, and none where there is none.
    assert expected.count("stopped at binary data") == (tree != "fake note" and options.output_mode == "content")


async def test_a_named_file_under_a_note_shaped_directory(tmp_path: Path) -> None:
    """A file named on its own: the only path in ripgrep's output, so the text tells at once."""
    root = fake_note_tree(tmp_path / "t")
    target = root / note_name(5) / "r" / "foo"
    for options in (GrepOptions(), GrepOptions(context_lines=1), GrepOptions(output_mode="count")):
        rg = LocalExecutionEnvironment(root, grep_backend="ripgrep")
        py = LocalExecutionEnvironment(root, grep_backend="python")
        assert await rg.grep("hit", str(target), options) == await py.grep("hit", str(target), options)


# ---------------------------------------------------------------------------------------------
# ripgrep's output falling across pipe reads


def splitting_rg(tmp_path: Path) -> str:
    """An ``rg`` that runs the real one and writes its output in two parts, a pause between, cut
    where ``RA_TEST_CUT`` says relative to the first note-shaped line: each part reaches the
    reader on its own. ``RA_TEST_RECORD`` names a file that gets the whole output."""
    script = tmp_path / "split-rg"
    script.write_text(
        f"#!{sys.executable} -S\n"
        "import os, subprocess, sys, time\n"
        f"done = subprocess.run([{find_ripgrep()!r}, *sys.argv[1:]], stdout=subprocess.PIPE)\n"
        "out, where = done.stdout, os.environ['RA_TEST_CUT']\n"
        "if os.environ.get('RA_TEST_RECORD'):\n"
        "    open(os.environ['RA_TEST_RECORD'], 'wb').write(out)\n"
        "at = out.find(b': WARNING: stopped')\n"
        "start = out.rfind(b'\\n', 0, at) + 1\n"
        "end = out.find(b'\\n', at)\n"
        "cut = {'line start': start, 'in the path': start + 5,\n"
        "       'before its newline': end, 'after its newline': end + 1,\n"
        "       'after the next nul': out.find(b'\\0', end) + 1}[where] if at != -1 else len(out)\n"
        "sys.stdout.buffer.write(out[:cut]); sys.stdout.buffer.flush(); time.sleep(0.02)\n"
        "sys.stdout.buffer.write(out[cut:]); sys.stdout.buffer.flush()\n"
        "sys.exit(done.returncode)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def one_ripgrep(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search in one process (not in parts, ra.env.ripgrep_parts): the record is its output."""
    monkeypatch.setattr(ripgrep_parts, "cores", lambda: 1)


BIG = 30_000
CUTS = ["in the path", "before its newline", "after its newline", "after the next nul"]


def with_big_file(root: Path) -> Path:
    """Over 1 MiB of matches before the note-shaped line (``a`` sorts first), with the path once a
    file (``--heading``) as with it on every line: several reads through the bulk path before it."""
    (root / "a-big.txt").write_text("".join(f"hit line {i} of a file of many matches\n" for i in range(BIG)))
    return root


@pytest.mark.parametrize("context", [0, 1])
@pytest.mark.parametrize("tree", list(TREES))
async def test_the_note_across_a_pipe_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tree: str, context: int
) -> None:
    root = with_big_file(TREES[tree](tmp_path / "t"))
    rg = splitting_rg(tmp_path)
    record = tmp_path / "output"
    monkeypatch.setenv("RA_TEST_RECORD", str(record))
    one_ripgrep(monkeypatch)
    for max_results in (1_000_000, BIG + 1, BIG + 2):  # every match, the cap before and after the note
        options = GrepOptions(max_results=max_results, context_lines=context)
        expected = (await both_backends(root, options))[1]
        for cut in CUTS:
            monkeypatch.setenv("RA_TEST_CUT", cut)
            assert await grep_ripgrep(rg, "hit", str(root), options, target_is_dir=True) == expected, cut
            assert len(record.read_bytes()) > 1024 * 1024 or max_results < 1_000_000


@pytest.mark.parametrize("context", [0, 2])
@pytest.mark.parametrize("tree", ["fake note", "genuine note"])
async def test_every_cut_of_the_output_reads_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tree: str, context: int
) -> None:
    """ripgrep's real output for the tree, given to the reader cut at every byte, and a byte at a
    time: the same text as the Python backend's."""
    root = TREES[tree](tmp_path / "t")
    monkeypatch.setenv("RA_TEST_CUT", "line start")
    record = tmp_path / "output"
    monkeypatch.setenv("RA_TEST_RECORD", str(record))
    one_ripgrep(monkeypatch)
    options = GrepOptions(context_lines=context)
    await grep_ripgrep(splitting_rg(tmp_path), "hit", str(root), options, target_is_dir=True)
    out = record.read_bytes()
    expected = (await both_backends(root, options))[1]

    # Without context lines ripgrep's output is grouped by file, unless a path holds a newline
    # (the fake note's directory): then the search was run again a record a line.
    grouped = not context and tree == "genuine note"
    assert (b"\n\n" in out) == grouped

    def read(parts: list[bytes]) -> str:
        collector = _Collector("content", options.max_results, context)
        reader = _RgHeading(collector) if grouped else _RgText(collector, decide_by_files(str(root), True))
        for part in parts:
            assert reader.feed(part)
        reader.finish()
        return collector.text()

    note = out.index(b": WARNING: stopped")
    low, high = max(0, out.rfind(b"\n", 0, note) - 50), min(len(out), out.find(b"\0", note) + 50)
    for cut in range(low, high + 1):
        assert read([out[:cut], out[cut:]]) == expected, cut
    assert read([out[:low], *(out[i : i + 1] for i in range(low, high)), out[high:]]) == expected


async def test_the_undecidable_line_is_left_to_the_json_search(tmp_path: Path) -> None:
    """Both readings name files that exist: the plain output is given up for ripgrep's JSON."""
    root = both_tree(tmp_path / "t")
    collector = _Collector("content", 100, 0)
    reader = _RgText(collector, decide_by_files(str(root), True))
    line = f"{root}/{note_name(LATE_OFFSET)}".encode()
    with pytest.raises(search.AmbiguousOutput):
        reader.feed(line + b"/r/foo\x002:hit in foo\n")
    # Either file gone, the file system tells: the note's file ...
    os.rename(root / note_name(LATE_OFFSET), root / "elsewhere")
    collector = _Collector("content", 100, 0)
    reader = _RgText(collector, decide_by_files(str(root), True))
    assert reader.feed(line + b"/r/foo\x002:hit in foo\n")
    reader.finish()
    assert collector.lines == [f"{root}/x: {search.LATE_BINARY_NOTE.format(offset=LATE_OFFSET)}", "/r/foo:2:hit in foo"]
    # ... or the directory.
    os.rename(root / "elsewhere", root / note_name(LATE_OFFSET))
    os.unlink(root / "x")
    collector = _Collector("content", 100, 0)
    reader = _RgText(collector, decide_by_files(str(root), True))
    assert reader.feed(line + b"/r/foo\x002:hit in foo\n")
    reader.finish()
    assert collector.text() == f"{root}/{note_name(LATE_OFFSET)}/r/foo:2:hit in foo"
    # Neither there any more (the tree changed since ripgrep read it): not guessed either.
    os.rename(root / note_name(LATE_OFFSET), root / "elsewhere")
    with pytest.raises(search.AmbiguousOutput):
        _RgText(_Collector("content", 100, 0), decide_by_files(str(root), True)).feed(line + b"/r/foo\x002:x\n")


# ---------------------------------------------------------------------------------------------
# the JSON reading


def json_tree(root: Path) -> Path:
    """What the plain reading is held to elsewhere: CRLF, invalid UTF-8, a newline in a name,
    binary data past a match, context groups that meet and part."""
    genuine_note_tree(root)
    (root / "crlf.txt").write_bytes(b"hit crlf\r\nplain\r\nhit \xe2\x82 cut\r\n\xff hit\n")
    (root / "n").mkdir()
    (root / "n" / "new\nline.txt").write_text("hit\n1\n2\n3\n4\n5\nhit again\nhit\n")
    (root / "x.bin").write_bytes(b"hit\x00 binary from the start\n")
    return root


@pytest.mark.parametrize(
    "options",
    [
        GrepOptions(),
        GrepOptions(context_lines=1),
        GrepOptions(context_lines=2, case_insensitive=True),
        GrepOptions(max_results=3),
        GrepOptions(max_results=3, context_lines=2),
        GrepOptions(glob_filter="*.txt"),
    ],
    ids=repr,
)
async def test_the_json_search_reads_as_the_plain_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: GrepOptions
) -> None:
    """Every search made to fall back to ripgrep's JSON at its first piece of output prints what
    the plain reading prints (and the Python backend)."""
    root = json_tree(tmp_path / "t")
    plain, python = await both_backends(root, options)
    assert plain == python

    def undecided(self: _RgText, chunk: bytes) -> bool:
        raise search.AmbiguousOutput("made to fall back")

    monkeypatch.setattr(_RgText, "feed", undecided)
    assert (await both_backends(root, options))[0] == plain

"""grep's fast paths give the same text as the record-by-record ones.

Content without context lines is converted a whole block of ripgrep records at a time, and
ripgrep's output is read from a pipe of ra's own in large pieces (``ra.env.pipes``). These tests
hold that to the slower paths on inputs chosen to break a bulk conversion: CRLF and stray CRs,
invalid UTF-8 at the end of a matched line, a line longer than one read, a cap that falls inside a
block, a file name with a newline among thousands of records, and output several reads long in
every mode.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from ra.env import GrepOptions, LocalExecutionEnvironment
from ra.env.search import (
    _PATH_ORDER,
    HeadingUnreadable,
    _Collector,
    _feed_rg_records,
    _RgHeading,
    _RgText,
    count_byte,
    decide_by_files,
    find_ripgrep,
)

from .procs import live_children

needs_rg = pytest.mark.skipif(find_ripgrep() is None, reason="ripgrep not installed")

#: Records as ripgrep prints them (``path\0N:text``), the nasty ones for a bulk conversion.
RECORDS = [
    b"/r/a.txt\x001:plain match",
    b"/r/a.txt\x002:crlf match\r",
    b"/r/a.txt\x003:two crs\r\r",
    b"/r/a.txt\x004:a cr\rinside",
    b"/r/b.txt\x001:cut utf-8 \xe2\x82",
    b"/r/b.txt\x002:lone lead \xc3",
    b"/r/b.txt\x003:\xff\xfe bad start",
    b"/r/b.txt\x004:caf\xc3\xa9 \xf0\x9f\x98\x80 fine",
    b"/r/b.txt\x005:",
    b"/r/c:d.txt\x0012:7:looks like a separator",
    b"/r/c:d.txt\x0013:\r",
    b"/r/e.txt\x001:" + b"long " * 5000,
]


def collect(records: list[bytes], max_results: int, *, bulk: bool, pieces: int) -> tuple[str, int, bool]:
    """Feed ``records`` in ``pieces`` runs through one path of the collector."""
    collector = _Collector("content", max_results, 0)
    size = -(-len(records) // pieces)
    for start in range(0, len(records), size):
        run = records[start : start + size]
        if bulk:
            more = collector.add_match_block(b"".join(r + b"\n" for r in run), len(run))
        else:
            more = collector.add_match_records(run)
        if not more:
            break
    return collector.text(), collector.matches, collector.truncated


@pytest.mark.parametrize("pieces", [1, 3, len(RECORDS)])
@pytest.mark.parametrize("max_results", [1, 4, 5, len(RECORDS) - 1, len(RECORDS), 1000])
def test_a_block_is_converted_as_its_records_are(max_results: int, pieces: int) -> None:
    bulk = collect(RECORDS, max_results, bulk=True, pieces=pieces)
    assert bulk == collect(RECORDS, max_results, bulk=False, pieces=pieces)
    text, matches, truncated = bulk
    assert matches == min(max_results, len(RECORDS)) and truncated == (max_results < len(RECORDS))
    if max_results > 4:
        lines = text.split("\n")
        assert lines[1] == "/r/a.txt:2:crlf match" and lines[2] == "/r/a.txt:3:two crs\r"
        assert lines[3] == "/r/a.txt:4:a cr\rinside" and lines[4] == "/r/b.txt:1:cut utf-8 \ufffd"


def test_a_full_collector_takes_no_more() -> None:
    collector = _Collector("content", 2, 0)
    assert not collector.add_match_block(b"/r/a\x001:x\n/r/a\x002:y\n/r/a\x003:z\n", 3)
    assert not collector.add_match_block(b"/r/a\x004:w\n", 1)
    assert collector.text().split("\n")[:2] == ["/r/a:1:x", "/r/a:2:y"]
    assert collector.matches == 2 and collector.truncated


FILE_RECORDS = [b"/r/a.txt", b"/r/b\xff\xfe.txt", b"/r/c:d\x0012", b"/r/notes\nREADME.md", b"/r/\xe2\x82", b"/r/z.txt"]


@pytest.mark.parametrize("mode", ["files_with_matches", "count"])
@pytest.mark.parametrize("max_results", [1, 3, len(FILE_RECORDS), 1000])
def test_file_records_are_taken_as_a_block_as_one_by_one(mode: str, max_results: int) -> None:
    records = [
        r.replace(b"\0", b"") + (b"\x00%d" % (i + 1) if mode == "count" else b"") for i, r in enumerate(FILE_RECORDS)
    ]
    bulk = _Collector(mode, max_results, 0)
    assert bulk.add_file_block(records) is (max_results >= len(records))
    one_by_one = _Collector(mode, max_results, 0)
    _feed_rg_records(one_by_one, records, mode)
    assert (bulk.text(), bulk.matches, bulk.truncated) == (one_by_one.text(), one_by_one.matches, one_by_one.truncated)
    assert "/r/b\ufffd\ufffd.txt" in bulk.text() or max_results < 2


@pytest.mark.parametrize(
    ("mode", "records"),
    [
        ("count", [b"/r/a\x003", b"/r/b\x000", b"/r/c\x001"]),  # a zero count is left out
        ("count", [b"/r/a\x003", b"/r/b", b"/r/c\x001"]),  # not a count record
        ("files_with_matches", [b"/r/a", b"", b"/r/c"]),  # an empty record is skipped
    ],
)
def test_file_records_of_another_shape_go_one_at_a_time(mode: str, records: list[bytes]) -> None:
    collector = _Collector(mode, 1000, 0)
    assert collector.add_file_block(records) is None
    assert collector.lines == [] and collector.matches == 0


def test_count_records_sort_by_their_path() -> None:
    """The whole ``path\0N`` record is the sort key: the same order as its path alone."""
    paths = [
        b"/r/sub/x",
        b"/r/sub-x",
        b"/r/sub.x",
        b"/r/su",
        b"/r/sub/x2/y",
        b"/r/a\nb",
        b"/r/a",
        b"/r/\xff",
        b"/r/a b",
    ]
    records = [path + b"\x00%d" % ((9 - i) * (i + 1)) for i, path in enumerate(paths)]
    by_path = sorted(records, key=lambda r: r.rpartition(b"\0")[0].replace(b"/", b"\0"))
    assert sorted(records, key=_PATH_ORDER) == by_path
    assert sorted(reversed(records), key=_PATH_ORDER) == by_path


def build_tree(root: Path) -> None:
    """Enough matches for several large reads, and every awkward line a tree can hold."""
    for i in range(300):
        folder = root / f"d{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        ending = b"\r\n" if i % 3 == 0 else b"\n"
        lines = [b"hit %d:%d caf\xc3\xa9 \xe2\x82%s" % (i, j, ending) if j % 2 else b"miss\n" for j in range(400)]
        (folder / f"f{i:03d}.txt").write_bytes(b"".join(lines))
    (root / "d3" / "long.txt").write_bytes(b"start\n" + b"hit " * 700_000 + b"\nhit end\n")  # a 2.8 MB line
    (root / "d5" / "name\nwith newline.txt").write_bytes(b"hit in a strange name\n")


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bulk")
    build_tree(root)
    return root


@needs_rg
@pytest.mark.parametrize(
    "options",
    [
        GrepOptions(max_results=1_000_000),
        GrepOptions(max_results=45_000),
        GrepOptions(max_results=100),
        GrepOptions(max_results=30_000, case_insensitive=True),
        GrepOptions(max_results=1_000_000, context_lines=1),
        GrepOptions(output_mode="count", max_results=1_000_000),
        GrepOptions(output_mode="files_with_matches", max_results=1_000_000),
        GrepOptions(output_mode="files_with_matches", max_results=150),
    ],
    ids=repr,
)
async def test_backends_agree_on_output_many_reads_long(big_tree: Path, options: GrepOptions) -> None:
    rg = LocalExecutionEnvironment(big_tree, grep_backend="ripgrep")
    py = LocalExecutionEnvironment(big_tree, grep_backend="python")
    out = await rg.grep("hit", None, options)
    assert out == await py.grep("hit", None, options)
    if options.output_mode == "content" and not options.context_lines:
        lines = out.split("\n")
        assert f"{big_tree}/d0/f000.txt:2:hit 0:1 caf\u00e9 \ufffd" in lines  # CR gone, cut UTF-8 replaced
        if options.max_results > 60_000:
            assert len(out) > 3_000_000  # several reads, and the long line whole
            assert f"{big_tree}/d5/name\nwith newline.txt:1:hit in a strange name" in out
            assert sum(1 for line in lines if line.startswith(f"{big_tree}/d3/long.txt:2:hit hit")) == 1


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@needs_rg
async def test_a_cancelled_search_stops_ripgrep_and_leaves_no_descriptor(big_tree: Path) -> None:
    """Cancelled while ripgrep is still writing, the call ends at once and ripgrep with it (it
    used to wait for ripgrep, which blocked on a full pipe nobody read any more)."""
    env = LocalExecutionEnvironment(big_tree, grep_backend="ripgrep")
    await env.grep("hit", None, GrepOptions(max_results=5))  # early stop, before the count below
    before = open_fds()
    # Children the test process had before (a session-scoped server of another test module,
    # such as the SSH tests' sshd) are not this search's.
    children = set(live_children(os.getpid()))
    for delay in (0.0, 0.01, 0.03):
        task = asyncio.ensure_future(env.grep("h.t", None, GrepOptions(max_results=1_000_000, context_lines=3)))
        await asyncio.sleep(delay)
        task.cancel()
        started = time.monotonic()
        done, _ = await asyncio.wait({task}, timeout=10)
        assert done and time.monotonic() - started < 5
    assert set(live_children(os.getpid())) - children == set()
    assert open_fds() == before


@pytest.mark.parametrize("gap", [1, 2, 7, 39, 40, 41, 100, 5000])
@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 16383, 16384, 70_000])
def test_count_byte_agrees_with_count_at_every_density(gap: int, size: int) -> None:
    """The memchr way is taken for sparse bytes past the sample, the plain loop otherwise; both
    give ``bytes.count``'s answer, whatever the density, including a first 4 KiB unlike the rest."""
    for byte in (b"\n", b"\0"):
        even = ((b"x" * (gap - 1) + byte) * (size // gap + 1))[:size]
        dense_head = byte * min(size, 4096) + even[4096:]
        sparse_head = b"y" * min(size, 4096) + (byte * size)[4096:]
        for data in (even, dense_head, sparse_head, even.replace(byte, b"")):
            assert count_byte(data, byte) == data.count(byte)


def build_small_tree(root: Path) -> None:
    """Every kind of line ripgrep's grouped output can carry, small enough to feed a byte at a time."""
    (root / "a").mkdir()
    (root / "a" / "crlf.txt").write_bytes(b"hit one\r\nmiss\r\nhit two\r\n\r\nhit\r\r\n")
    (root / "a" / "utf8.txt").write_bytes(b"hit caf\xc3\xa9\nhit cut \xe2\x82\nhit \xff\xfe\n")
    (root / "a" / "colon:name.txt").write_bytes(b"hit 12:34: looks like a record\nhit\n")
    (root / "b.txt").write_bytes(b"hit " * 2000 + b"\nmiss\nhit\n")  # a line longer than most pieces
    # ripgrep's note about binary data past a match (its first buffer is 64 KiB) ...
    (root / "late.bin").write_bytes(b"hit first\n" + (b"y" * 80 + b"\n") * 1000 + b"\0 hit late\n")
    # ... and a line that merely contains its words.
    mark = b': WARNING: stopped searching binary file after match (found "\\0" byte around offset 7)'
    (root / "mark.txt").write_bytes(b"hit" + mark + b"\nhit after\n")
    for i in range(12):
        (root / f"many{i:02d}.txt").write_bytes(b"".join(b"hit %d %d\n" % (i, j) for j in range(40)))


def ripgrep_output(root: Path, *layout: str) -> bytes:
    rg = find_ripgrep()
    assert rg is not None
    args = [rg, "--no-config", "--color", "never", "--no-messages", "--with-filename", "--sort", "path", "--null"]
    args += ["--line-number", *layout, "--regexp", "hit", "--", str(root)]
    return subprocess.run(args, stdout=subprocess.PIPE, check=True, timeout=30).stdout


@needs_rg
@pytest.mark.parametrize("piece", [1, 2, 3, 7, 64, 4099, None])
@pytest.mark.parametrize("max_results", [1, 2, 4, 41, 300, 1_000_000])
def test_grouped_output_reads_as_the_per_line_output(tmp_path: Path, piece: int | None, max_results: int) -> None:
    """ripgrep's ``--heading`` output, fed in pieces of every size, gives the text, count and cap
    that its per-line output gives through the record reader."""
    build_small_tree(tmp_path)
    grouped = ripgrep_output(tmp_path, "--heading")
    per_line = ripgrep_output(tmp_path, "--no-heading")
    assert b"WARNING: stopped searching binary file" in grouped and b"\r\n" in grouped  # the cases are there

    expected = _Collector("content", max_results, 0)
    reader = _RgText(expected, decide_by_files(str(tmp_path), True))
    if reader.feed(per_line):
        reader.finish()

    got = _Collector("content", max_results, 0)
    heading = _RgHeading(got)
    size = piece or len(grouped)
    for start in range(0, len(grouped), size):
        if not heading.feed(grouped[start : start + size]):
            break
    else:
        heading.finish()
    assert (got.text(), got.matches, got.truncated) == (expected.text(), expected.matches, expected.truncated)
    lines = got.text().split("\n")
    if max_results == 1_000_000:
        assert f"{tmp_path}/late.bin: [stopped at binary data" in got.text()
        assert f"{tmp_path}/a/crlf.txt:3:hit two" in lines and f"{tmp_path}/a/crlf.txt:5:hit\r" in lines
        assert any(line.startswith(f"{tmp_path}/mark.txt:1:hit: WARNING") for line in lines)


def test_a_path_with_a_newline_is_refused_before_its_lines_are_taken() -> None:
    """The grouped output cannot place a note under such a path; the search is read per line."""
    collector = _Collector("content", 100, 0)
    heading = _RgHeading(collector)
    assert heading.feed(b"/r/a.txt\x001:hit\n2:hit\n\n/r/odd\n")
    with pytest.raises(HeadingUnreadable):
        heading.feed(b"name.txt\x001:hit\n")
    assert collector.text() == "/r/a.txt:1:hit\n/r/a.txt:2:hit" and collector.matches == 2


@needs_rg
async def test_a_tree_with_a_newline_in_a_name_is_searched_per_line(tmp_path: Path) -> None:
    build_small_tree(tmp_path)
    (tmp_path / "a" / "odd\nname.txt").write_bytes(b"hit in an odd name\n")
    out = await LocalExecutionEnvironment(tmp_path, grep_backend="ripgrep").grep("hit", None, GrepOptions())
    assert out == await LocalExecutionEnvironment(tmp_path, grep_backend="python").grep("hit", None, GrepOptions())
    assert f"{tmp_path}/a/odd\nname.txt:1:hit in an odd name" in out


@needs_rg
@pytest.mark.parametrize(
    "options",
    [GrepOptions(max_results=1000), GrepOptions(max_results=1000, context_lines=1), GrepOptions(max_results=1)],
    ids=repr,
)
async def test_a_line_in_the_words_of_a_note_is_a_match(tmp_path: Path, options: GrepOptions) -> None:
    """A matched line ending like ripgrep's note about binary data is shown as the match it is
    (it was taken for a note about a file named by the text before it, and the match was lost)."""
    build_small_tree(tmp_path)
    rg = await LocalExecutionEnvironment(tmp_path, grep_backend="ripgrep").grep("hit", None, options)
    assert rg == await LocalExecutionEnvironment(tmp_path, grep_backend="python").grep("hit", None, options)
    if options.max_results > 1:
        assert f'{tmp_path}/mark.txt:1:hit: WARNING: stopped searching binary file after match (found "\\0"' in rg

"""grep of a directory in parts (ra.env.ripgrep_parts): the same text as one ripgrep gives.

A directory's entries are cut into runs searched by a ripgrep each, side by side, every one told
to skip the others' entries with a glob rule. These tests hold the joined result to one sorted
ripgrep over trees built to catch a rule that misses or overreaches: names that mean something
in a glob, a nested entry that shares a top-level name, ignored and hidden entries, a symlink,
the caller's own globs (which an added rule must not override or be overridden by), context
lines and caps that fall in a later part, and a later part whose output is larger than what may be
read ahead. Also: every ripgrep is stopped when the search has enough, and errors are reported
once, as from one ripgrep.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from ra.env import GrepOptions, LocalExecutionEnvironment, ripgrep_parts
from ra.env.search import find_ripgrep

from .procs import live_children

pytestmark = pytest.mark.skipif(find_ripgrep() is None, reason="ripgrep not installed")

NAMES = ["a*b", "d[x]", "{c,d}", "q?", "back\\slash", "sp ace", "caf\u00e9", "-dash", "!bang", "#hash", "zz"]


def build(root: Path) -> Path:
    """A git repository whose top level holds every awkward kind of entry."""
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=30)
    (root / ".gitignore").write_text("/build\n*.log\n")
    for i, name in enumerate(NAMES):
        folder = root / name / "inner"
        folder.mkdir(parents=True)
        (folder / "m.py").write_text("".join(f"hit {name} {i} {j}\nmiss\n" for j in range(30)))
        (root / name / "notes.md").write_text(f"hit note {name}\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("hit ignored build\n")
    (root / "x.log").write_text("hit ignored log\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "h.py").write_text("hit hidden\n")
    # A nested directory named like a top-level one: a rule for the top-level one must not reach it.
    (root / "zz" / "a*b").mkdir()
    (root / "zz" / "a*b" / "deep.py").write_text("hit nested a*b\n")
    (root / "top.py").write_text("hit top\nhit top again\n")
    (root / "link").symlink_to(root / "zz")  # not followed, as by one ripgrep
    # A later part with more output than may be read ahead in the test that lowers the bound.
    (root / "zz" / "big.txt").write_text("".join(f"hit big line {j} " + "x" * 60 + "\n" for j in range(4000)))
    return root


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("parts") / "t")


async def grep(root: Path, options: GrepOptions, monkeypatch: pytest.MonkeyPatch, parts: int) -> str:
    monkeypatch.setattr(ripgrep_parts, "cores", lambda: parts)
    monkeypatch.setattr(ripgrep_parts, "START_OTHERS_AFTER", 0)  # every part running alongside
    return await LocalExecutionEnvironment(root, grep_backend="ripgrep").grep("hit", None, options)


OPTIONS = [
    GrepOptions(max_results=1_000_000),
    GrepOptions(max_results=1),
    GrepOptions(max_results=45),  # falls in the second part
    GrepOptions(max_results=500),
    GrepOptions(max_results=1_000_000, context_lines=1),
    GrepOptions(max_results=70, context_lines=2),
    GrepOptions(max_results=1_000_000, glob_filter="*.py"),  # the caller's whitelist ...
    GrepOptions(max_results=1_000_000, glob_filter="!*.md"),  # ... and exclusion
    GrepOptions(max_results=1_000_000, glob_filter="zz/**"),
    GrepOptions(max_results=1_000_000, case_insensitive=True),
    GrepOptions(output_mode="count", max_results=1_000_000),
    GrepOptions(output_mode="files_with_matches", max_results=1_000_000),
]


@pytest.mark.parametrize("options", OPTIONS, ids=repr)
@pytest.mark.parametrize("parts", [2, 3, 8])
async def test_parts_give_what_one_ripgrep_gives(
    tree: Path, options: GrepOptions, parts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = await grep(tree, options, monkeypatch, 1)
    assert await grep(tree, options, monkeypatch, parts) == one
    if options.max_results == 1_000_000 and options.output_mode == "content" and not options.glob_filter:
        for name in NAMES:
            assert f"{tree}/{name}/inner/m.py:1" in one  # every awkward name searched ...
        assert f"{tree}/zz/a*b/deep.py:1:hit nested a*b" in one  # ... the nested one too
        assert "ignored" not in one and "hidden" not in one and f"{tree}/link/" not in one


def test_each_entry_is_searched_by_exactly_one_part(tree: Path) -> None:
    """Every entry has its rule, and every part but one carries it."""
    names = os.listdir(tree)
    shown = [name for name in names if not name.startswith(".")]
    for count in (2, 3, 5, 8):
        split = ripgrep_parts.split_directory(str(tree), count)
        assert split is not None and len(split.rules) == min(count, len(shown))
        parts = split.rules
        rules: dict[str, int] = {}
        for part in parts:
            assert list(part[::2]) == ["--glob"] * (len(part) // 2)
            for rule in part[1::2]:
                rules[rule] = rules.get(rule, 0) + 1
        assert len(rules) == len(names) and set(rules.values()) == {len(parts) - 1}
        assert "!/a\\*b" in rules and "!/d\\[x\\]" in rules and "!/back\\\\slash" in rules


@pytest.mark.parametrize(
    "names, count",
    [
        (["a", "b"], 1),  # one core
        (["a"], 4),  # one entry
        ([".git", "src"], 4),  # one entry ripgrep looks into
        (["a", "tab\there"], 4),  # a name no rule can hold
    ],
)
def test_one_part_where_parts_would_not_help_or_cannot_be_written(tmp_path: Path, names: list[str], count: int) -> None:
    for name in names:
        (tmp_path / name).mkdir()
    assert ripgrep_parts.split_directory(str(tmp_path), count) is None


def test_a_name_that_is_not_utf8_and_a_crowded_directory_are_one_part(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    os.mkdir(os.path.join(os.fsencode(tmp_path), b"\xff\xfe"))
    assert ripgrep_parts.split_directory(str(tmp_path), 4) is None
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    for i in range(ripgrep_parts.MAX_ENTRIES + 1):
        (crowded / f"f{i}").write_text("x")
    assert ripgrep_parts.split_directory(str(crowded), 4) is None
    os.unlink(crowded / "f0")
    assert ripgrep_parts.split_directory(str(crowded), 4) is not None


async def test_a_later_part_larger_than_the_read_ahead(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The part whose turn comes has stopped reading ahead at the bound: the rest is read from its
    pipe, where its ripgrep waited."""
    options = GrepOptions(max_results=1_000_000)
    one = await grep(tree, options, monkeypatch, 1)
    monkeypatch.setattr(ripgrep_parts, "READ_AHEAD", 4096)
    assert await grep(tree, options, monkeypatch, 2) == one
    assert one.count("hit big line") == 4000


async def test_enough_results_stop_every_part(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = set(os.listdir("/proc/self/fd"))
    out = await grep(tree, GrepOptions(max_results=3), monkeypatch, 4)
    assert out.count("\n") == 3 and "[Results truncated" in out
    assert live_children(os.getpid()) == []
    assert set(os.listdir("/proc/self/fd")) == before


async def test_a_cancelled_search_in_parts_stops_every_ripgrep(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = set(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(ripgrep_parts, "cores", lambda: 4)
    monkeypatch.setattr(ripgrep_parts, "START_OTHERS_AFTER", 0)
    env = LocalExecutionEnvironment(tree, grep_backend="ripgrep")
    task = asyncio.ensure_future(env.grep("hit", None, GrepOptions(max_results=1_000_000)))
    await asyncio.sleep(0.003)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    assert live_children(os.getpid()) == []
    assert set(os.listdir("/proc/self/fd")) == before


@pytest.mark.parametrize(
    "pattern, options, message",
    [("(unclosed", GrepOptions(), "Invalid regex"), ("hit", GrepOptions(glob_filter="{bad"), "Invalid glob_filter")],
)
async def test_errors_are_reported_once_as_from_one_ripgrep(
    tree: Path, monkeypatch: pytest.MonkeyPatch, pattern: str, options: GrepOptions, message: str
) -> None:
    monkeypatch.setattr(ripgrep_parts, "cores", lambda: 4)
    with pytest.raises(ValueError, match=message) as raised:
        await LocalExecutionEnvironment(tree, grep_backend="ripgrep").grep(pattern, None, options)
    assert str(raised.value).count(message) == 1


async def test_a_search_done_early_starts_one_ripgrep(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search keeping few results starts the first part alone: if its first output is enough,
    the others never start; if not, they start then, not START_OTHERS_AFTER later."""
    started: list[list[str]] = []
    start = ripgrep_parts._start

    async def counting(part: ripgrep_parts._Part, cwd: str) -> None:
        started.append(part.args)
        await start(part, cwd)

    monkeypatch.setattr(ripgrep_parts, "_start", counting)
    monkeypatch.setattr(ripgrep_parts, "cores", lambda: 4)
    monkeypatch.setattr(ripgrep_parts, "START_OTHERS_AFTER", 30)
    env = LocalExecutionEnvironment(tree, grep_backend="ripgrep")
    assert (await env.grep("hit", None, GrepOptions(max_results=2))).count("\n") == 2
    assert len(started) == 1
    for wanted in (ripgrep_parts.FEW_WANTED, 1_000_000):  # the first's output is not enough; more than few
        started.clear()
        await asyncio.wait_for(env.grep("hit", None, GrepOptions(max_results=wanted)), 20)  # no 30 s wait
        assert len(started) == 4


async def test_names_that_differ_by_trailing_spaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ripgrep drops a glob's trailing spaces (gitignore's rule): ``!/b `` unescaped would be ``!/b``,
    searching ``b `` twice and ``b`` never."""
    for name in ("a", "b", "b ", "b  ", " b", "c"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.txt").write_text(f"hit in [{name}]\n")
    one = await grep(tmp_path, GrepOptions(), monkeypatch, 1)
    assert one.count("hit in") == 6
    for parts in (2, 3, 4, 6):
        assert await grep(tmp_path, GrepOptions(), monkeypatch, parts) == one


async def test_a_directory_reached_through_a_link_is_one_part(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ripgrep anchors the rules at its working directory as the system resolves it; the paths it
    prints keep the link, so no rule would match and every part would search everything."""
    link = tree.parent / "through-a-link"
    link.symlink_to(tree)
    assert ripgrep_parts.split_directory(str(link), 4) is None
    assert ripgrep_parts.split_directory(str(tree), 4) is not None
    options = GrepOptions(max_results=1_000_000)
    one = await grep(link, options, monkeypatch, 1)
    assert await grep(link, options, monkeypatch, 4) == one
    assert one.count(f"{link}/top.py:1:hit top") == 1


async def test_an_entry_that_appears_while_the_parts_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It has no rule, so every part searches it: the search is made again in one part."""
    root = build(tmp_path / "t")
    split_directory = ripgrep_parts.split_directory

    def then_another_tool_writes(directory: str, count: int) -> ripgrep_parts.Split | None:
        split = split_directory(directory, count)
        (Path(directory) / "bb").mkdir(exist_ok=True)
        (Path(directory) / "bb" / "new.txt").write_text("hit new\n")
        return split

    monkeypatch.setattr(ripgrep_parts, "split_directory", then_another_tool_writes)
    out = await grep(root, GrepOptions(max_results=1_000_000), monkeypatch, 4)
    assert out.count(f"{root}/bb/new.txt:1:hit new") == 1
    monkeypatch.setattr(ripgrep_parts, "split_directory", split_directory)
    assert out == await grep(root, GrepOptions(max_results=1_000_000), monkeypatch, 1)


@pytest.mark.parametrize("wanted", [100, 5000, 1_000_000])
async def test_a_cancellation_is_never_swallowed(tree: Path, monkeypatch: pytest.MonkeyPatch, wanted: int) -> None:
    """Cancelled at every point of the search (after k turns of the event loop), the call raises
    CancelledError - it used to return results when the cancellation met the wait for a part's
    read-ahead, so asyncio.timeout and interrupts could be ignored - and leaves nothing behind."""
    monkeypatch.setattr(ripgrep_parts, "cores", lambda: 4)
    env = LocalExecutionEnvironment(tree, grep_backend="ripgrep")
    before = set(os.listdir("/proc/self/fd"))
    outcomes = set()
    for turns in range(60):
        task = asyncio.ensure_future(env.grep("hit", None, GrepOptions(max_results=wanted)))
        for _ in range(turns):
            await asyncio.sleep(0)
        if not task.cancel():
            outcomes.add("finished first")
            await task
            continue
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        outcomes.add("cancelled")
    assert "cancelled" in outcomes
    assert live_children(os.getpid()) == []
    for _ in range(200):  # a killed ripgrep's pipes close once the event loop has seen it exit
        left = {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in set(os.listdir("/proc/self/fd")) - before}
        if not left:
            break
        await asyncio.sleep(0.01)
    assert not left


async def test_too_few_file_descriptors_for_every_part(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A part that cannot start beside the others (EMFILE) starts in its turn, once those before it
    have ended and let go of their descriptors: where one ripgrep can run, so can the search in
    parts, with the same result."""
    import resource

    options = GrepOptions(max_results=1_000_000)
    one = await grep(tree, options, monkeypatch, 1)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    async def with_headroom(headroom: int, parts: int) -> str | None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + headroom, hard))
        try:
            return await grep(tree, options, monkeypatch, parts)
        except OSError:
            return None
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    least = 2
    while await with_headroom(least, 1) != one:
        least += 1
        assert least < 40
    for headroom in (least, least + 1, least + 3, least + 6):
        assert await with_headroom(headroom, 8) == one, headroom

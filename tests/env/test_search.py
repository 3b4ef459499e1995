"""grep (ripgrep and pure-Python backends, which must agree) and glob, on real trees."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ra.env import GrepOptions, LocalExecutionEnvironment
from ra.env.search import BINARY_MATCH_NOTE, LATE_BINARY_NOTE, expand_braces, find_ripgrep, translate_glob

needs_rg = pytest.mark.skipif(find_ripgrep() is None, reason="ripgrep not installed")


def make_tree(root: Path) -> Path:
    files = {
        "a.txt": "foo one\nbar\nFOO two\nx\ny\nz\nfoo three\nlast foo\n",
        "b.py": "import foo\n\ndef f():\n    return 'Foo'\n",
        "a-b/z.txt": "foo in a-b\n",
        "sub-x.txt": "foo sub-x\n",
        "sub/c.py": "no match here\nfoo = 1\n",
        "sub/deep/d.py": "x = 'foo'\ny = 'FOO'\n",
        "sub/e.md": "# foo\n",
        "sub/build/o.txt": "foo in nested build\n",
        "build/o.txt": "foo in root build\n",
        "ignored_dir/i.txt": "foo ignored\n",
        "x.log": "foo log\n",
        "keep.log": "foo kept log\n",
        ".hidden/h.txt": "foo hidden\n",
        ".hfile": "foo hidden file\n",
        "crlf.txt": "foo crlf\r\nbar\r\nfoo end",
        ".gitignore": "ignored_dir/\n*.log\n!keep.log\n/build\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, newline="")
    (root / "bin.dat").write_bytes(b"foo\x00binary foo\n")
    (root / "latin.txt").write_bytes(b"caf\xe9 foo\n")
    (root / "link.txt").symlink_to(root / "a.txt")
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    else:
        (root / ".git").mkdir()
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "repo")


def backends(root: Path) -> tuple[LocalExecutionEnvironment, LocalExecutionEnvironment]:
    return (
        LocalExecutionEnvironment(root, grep_backend="ripgrep"),
        LocalExecutionEnvironment(root, grep_backend="python"),
    )


CASES = [
    ("foo", GrepOptions()),
    ("foo", GrepOptions(case_insensitive=True)),
    ("^foo", GrepOptions()),
    ("foo$", GrepOptions()),
    ("fo+ (t|o)", GrepOptions(case_insensitive=True)),
    ("foo", GrepOptions(context_lines=1)),
    ("foo", GrepOptions(context_lines=2, case_insensitive=True)),
    ("foo", GrepOptions(glob_filter="*.py")),
    ("foo", GrepOptions(glob_filter="*.{py,md}", case_insensitive=True)),
    ("foo", GrepOptions(glob_filter="sub/**/*.py")),
    ("foo", GrepOptions(glob_filter="deep/*.py")),
    ("foo", GrepOptions(glob_filter="!*.txt")),
    ("foo", GrepOptions(glob_filter="!sub")),
    ("foo", GrepOptions(glob_filter="sub")),
    ("foo", GrepOptions(glob_filter="sub/**")),
    ("foo", GrepOptions(glob_filter="**/deep/**", case_insensitive=True)),
    ("foo", GrepOptions(output_mode="files_with_matches")),
    ("foo", GrepOptions(output_mode="count", case_insensitive=True)),
    ("foo", GrepOptions(output_mode="count", glob_filter="*.txt")),
    ("foo", GrepOptions(max_results=3)),
    ("foo", GrepOptions(max_results=2, context_lines=1)),
    ("foo", GrepOptions(max_results=2, output_mode="files_with_matches")),
    ("foo", GrepOptions(max_results=1, output_mode="count")),
    ("nothing-matches-this", GrepOptions()),
]


@needs_rg
@pytest.mark.parametrize(("pattern", "options"), CASES)
async def test_backends_agree(tree: Path, pattern: str, options: GrepOptions) -> None:
    rg, py = backends(tree)
    for path in (None, "sub"):
        assert await rg.grep(pattern, path, options) == await py.grep(pattern, path, options)


@pytest.mark.parametrize("backend", ["ripgrep", "python"])
async def test_content_output_format(tree: Path, backend: str) -> None:
    if backend == "ripgrep" and find_ripgrep() is None:
        pytest.skip("ripgrep not installed")
    env = LocalExecutionEnvironment(tree, grep_backend=backend)
    r = str(tree)
    assert await env.grep("foo") == "\n".join(
        [
            f"{r}/a-b/z.txt:1:foo in a-b",
            f"{r}/a.txt:1:foo one",
            f"{r}/a.txt:7:foo three",
            f"{r}/a.txt:8:last foo",
            f"{r}/b.py:1:import foo",
            f"{r}/crlf.txt:1:foo crlf",
            f"{r}/crlf.txt:3:foo end",
            f"{r}/keep.log:1:foo kept log",
            f"{r}/latin.txt:1:caf\ufffd foo",
            f"{r}/sub/build/o.txt:1:foo in nested build",
            f"{r}/sub/c.py:2:foo = 1",
            f"{r}/sub/deep/d.py:1:x = 'foo'",
            f"{r}/sub/e.md:1:# foo",
            f"{r}/sub-x.txt:1:foo sub-x",
        ]
    )
    assert await env.grep("three", "a.txt", GrepOptions(context_lines=1)) == (
        f"{r}/a.txt-6-z\n{r}/a.txt:7:foo three\n{r}/a.txt-8-last foo"
    )
    assert await env.grep("foo", "a.txt", GrepOptions(context_lines=1, case_insensitive=True)) == "\n".join(
        [
            f"{r}/a.txt:1:foo one",
            f"{r}/a.txt-2-bar",
            f"{r}/a.txt:3:FOO two",
            f"{r}/a.txt-4-x",
            "--",
            f"{r}/a.txt-6-z",
            f"{r}/a.txt:7:foo three",
            f"{r}/a.txt:8:last foo",
        ]
    )
    assert await env.grep("foo", "sub", GrepOptions(output_mode="files_with_matches", glob_filter="*.py")) == (
        f"{r}/sub/c.py\n{r}/sub/deep/d.py"
    )
    assert await env.grep("foo", "a.txt", GrepOptions(output_mode="count", case_insensitive=True)) == f"{r}/a.txt:4"
    truncated = await env.grep("foo", options=GrepOptions(max_results=2))
    assert truncated.splitlines()[:2] == [f"{r}/a-b/z.txt:1:foo in a-b", f"{r}/a.txt:1:foo one"]
    assert "truncated" in truncated.splitlines()[2]
    assert await env.grep("zzz-no-match") == ""
    # A binary file named explicitly is reported, not dumped.
    assert await env.grep("foo", "bin.dat") == f"{r}/bin.dat: binary file matches"


@pytest.mark.parametrize("backend", ["ripgrep", "python"])
async def test_grep_errors(tree: Path, backend: str) -> None:
    if backend == "ripgrep" and find_ripgrep() is None:
        pytest.skip("ripgrep not installed")
    env = LocalExecutionEnvironment(tree, grep_backend=backend)
    with pytest.raises(ValueError, match="Invalid regex"):
        await env.grep("foo(")
    with pytest.raises(FileNotFoundError, match="missing"):
        await env.grep("foo", "missing")
    with pytest.raises(ValueError, match="output_mode"):
        await env.grep("foo", options=GrepOptions(output_mode="lines"))
    with pytest.raises(ValueError, match="max_results"):
        await env.grep("foo", options=GrepOptions(max_results=0))


@needs_rg
async def test_backends_agree_on_many_matches(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"f{i:02d}.txt").write_text("".join(f"hit {j}\nmiss\n" for j in range(20)))
    rg, py = backends(tmp_path)
    for options in (GrepOptions(max_results=100), GrepOptions(max_results=57, context_lines=1)):
        out = await rg.grep("hit", None, options)
        assert out == await py.grep("hit", None, options)
        assert sum(1 for line in out.splitlines() if ":hit " in line) == options.max_results


# -- glob -------------------------------------------------------------------------------------


def touch(path: Path, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    os.utime(path, (mtime, mtime))


async def test_glob_newest_first_and_recursive(tmp_path: Path) -> None:
    touch(tmp_path / "old.py", 1_000_000)
    touch(tmp_path / "src/mid.py", 2_000_000)
    touch(tmp_path / "src/deep/new.py", 3_000_000)
    touch(tmp_path / "src/readme.md", 4_000_000)
    touch(tmp_path / ".venv/lib/hidden.py", 5_000_000)
    env = LocalExecutionEnvironment(tmp_path)
    r = str(tmp_path)
    assert await env.glob("**/*.py") == [f"{r}/src/deep/new.py", f"{r}/src/mid.py", f"{r}/old.py"]
    assert await env.glob("*.py") == [f"{r}/old.py"]
    assert await env.glob("src/*") == [f"{r}/src/readme.md", f"{r}/src/mid.py"]
    assert await env.glob("*.py", "src") == [f"{r}/src/mid.py"]
    assert await env.glob("src/**") == [f"{r}/src/readme.md", f"{r}/src/deep/new.py", f"{r}/src/mid.py"]
    assert await env.glob("**/*.{md,py}", "src") == [f"{r}/src/readme.md", f"{r}/src/deep/new.py", f"{r}/src/mid.py"]
    # Dotfiles only when the pattern spells the dot.
    assert await env.glob(".venv/**/*.py") == [f"{r}/.venv/lib/hidden.py"]
    assert await env.glob(f"{r}/src/deep/*.py") == [f"{r}/src/deep/new.py"]
    assert await env.glob("src/mid.py") == [f"{r}/src/mid.py"]
    assert await env.glob("nothing/*.py") == []


async def test_glob_ties_are_ordered_by_path(tmp_path: Path) -> None:
    for name in ("b.txt", "a.txt", "c.txt"):
        touch(tmp_path / name, 1_000_000)
    env = LocalExecutionEnvironment(tmp_path)
    assert await env.glob("*.txt") == [str(tmp_path / n) for n in ("a.txt", "b.txt", "c.txt")]


async def test_glob_errors(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path)
    with pytest.raises(ValueError, match="unclosed"):
        await env.glob("src/[ab")
    with pytest.raises(ValueError, match="unclosed"):
        await env.glob("*.{py,md")
    with pytest.raises(FileNotFoundError):
        await env.glob("*.py", "missing")


def test_translate_glob() -> None:
    rx = translate_glob("**/*.py")
    assert rx.match("a.py") and rx.match("x/y/a.py")
    assert not rx.match("x/.hidden/a.py") and not rx.match(".a.py") and not rx.match("a.pyc")
    rx = translate_glob("**/*.py", dot_special=False)
    assert rx.match("x/.hidden/a.py")
    rx = translate_glob("src/[!a]?.{c,h}")
    assert rx.match("src/bx.c") and rx.match("src/by.h")
    assert not rx.match("src/ax.c") and not rx.match("src/b/x.c")
    assert expand_braces("{a,b{c,d}}.{x,y}") == ["a.x", "a.y", "bc.x", "bc.y", "bd.x", "bd.y"]
    assert expand_braces("{single}") == ["{single}"]


@needs_rg
@pytest.mark.parametrize("context", [0, 1])
async def test_names_and_lines_that_look_like_separators(tmp_path: Path, context: int) -> None:
    """ripgrep's plain records end the path with NUL: a name such as ``12-3:4.txt`` and lines that
    start with digits, colons and dashes come out whole, as the Python backend writes them."""
    (tmp_path / "12-3:4.txt").write_bytes(b"7:foo at seven\n--\n-8- foo\r\nplain\n")
    (tmp_path / "--.py").write_bytes(b"x\nfoo\n\xff\xfe foo\n")
    rg, py = backends(tmp_path)
    options = GrepOptions(context_lines=context)
    out = await rg.grep("foo", None, options)
    assert out == await py.grep("foo", None, options)
    assert f"{tmp_path}/12-3:4.txt:1:7:foo at seven" in out.splitlines()
    assert f"{tmp_path}/12-3:4.txt:3:-8- foo" in out.splitlines()
    assert f"{tmp_path}/--.py:3:\ufffd\ufffd foo" in out.splitlines()


@needs_rg
@pytest.mark.parametrize(
    "options", [GrepOptions(), GrepOptions(context_lines=1), GrepOptions(output_mode="count")], ids=repr
)
async def test_a_newline_in_a_file_name_does_not_move_a_match_to_another_file(
    tmp_path: Path, options: GrepOptions
) -> None:
    (tmp_path / "notes\nREADME.md").write_text("intro\napi_key = 'x'\n")
    (tmp_path / "README.md").write_text("nothing here\n")
    rg, py = backends(tmp_path)
    out = await rg.grep("api_key", None, options)
    assert out == await py.grep("api_key", None, options)
    assert f"{tmp_path}/notes\nREADME.md:" in out and f"\n{tmp_path}/README.md" not in out


@needs_rg
@pytest.mark.parametrize("last", [False, True], ids=["followed", "last"])
@pytest.mark.parametrize("mode", ["content", "files_with_matches", "count"])
async def test_a_nul_past_the_first_buffer_stops_the_file_and_says_so(tmp_path: Path, mode: str, last: bool) -> None:
    """A text file with a NUL byte past its first 64 KiB: ripgrep stops reading it there. Both
    backends keep the matches before it and say, after them, that the rest was not searched; the
    next file's matches are its own (ripgrep's warning line was glued to the next record's path
    before, and the Python backend said nothing). Counts leave such a file out in both."""
    nul_at = 9 + 70_000 + 1
    (tmp_path / "b.log").write_bytes(b"needle 1\n" + b"x" * 70_000 + b"\n\0\nneedle 2\n")
    if not last:
        (tmp_path / "c.txt").write_text("needle 3\n")
    rg, py = backends(tmp_path)
    options = GrepOptions(output_mode=mode)
    out = await rg.grep("needle", None, options)
    assert out == await py.grep("needle", None, options)
    lines = out.splitlines()
    follower = [] if last else [f"{tmp_path}/c.txt" + {"content": ":1:needle 3", "count": ":1"}.get(mode, "")]
    if mode == "content":
        note = f"{tmp_path}/b.log: " + LATE_BINARY_NOTE.format(offset=nul_at)
        assert lines == [f"{tmp_path}/b.log:1:needle 1", note, *follower]
    elif mode == "files_with_matches":
        assert lines == [f"{tmp_path}/b.log", *follower]
    else:
        assert lines == follower


@needs_rg
@pytest.mark.parametrize("mode", ["content", "files_with_matches", "count"])
async def test_a_file_named_on_its_own_is_searched_past_a_late_nul(tmp_path: Path, mode: str) -> None:
    """Named on its own, a text file is read past a NUL beyond its first 64 KiB (ripgrep's rule),
    until a matching line holds one: that match is not shown and a line says where the search
    stopped (ripgrep's "binary file matches" line was dropped before, and the Python backend
    stopped at the first NUL)."""
    data = b"needle 1\n" + b"x" * 70_000 + b"\n" + b"a\0b\nneedle 2\nneedle \0 here\nneedle 4\n"
    (tmp_path / "mixed.log").write_bytes(data)
    rg, py = backends(tmp_path)
    options = GrepOptions(output_mode=mode)
    out = await rg.grep("needle", "mixed.log", options)
    assert out == await py.grep("needle", "mixed.log", options)
    path = f"{tmp_path}/mixed.log"
    if mode == "content":
        note = BINARY_MATCH_NOTE.format(offset=data.index(b"\0 here"))
        assert out.splitlines() == [f"{path}:1:needle 1", f"{path}:4:needle 2", f"{path}: {note}"]
    elif mode == "files_with_matches":
        assert out == path
    else:
        assert out == f"{path}:4"  # every matching line, as ripgrep counts a named file

"""edit_file on real files: exact and fuzzy matching, errors, and keeping the file's bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ra.tools.edit import EditError, edit_file
from tests.tools.fsenv import DirEnv

try:
    from ra.env.local import LocalExecutionEnvironment
except ImportError:  # pragma: no cover - the local environment lands separately
    LocalExecutionEnvironment = None  # type: ignore[assignment,misc]


@pytest.fixture
def env(tmp_path: Path) -> DirEnv:
    return DirEnv(tmp_path)


def put(env: DirEnv, name: str, data: str | bytes) -> Path:
    path = env.root / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


# -- exact -----------------------------------------------------------------------------------------


async def test_exact_unique_replacement(env: DirEnv) -> None:
    f = put(env, "a.py", "def f():\n    return 1\n\ndef g():\n    return 2\n")
    result = await edit_file(env, "a.py", "    return 2", "    return 3")
    assert f.read_text() == "def f():\n    return 1\n\ndef g():\n    return 3\n"
    assert (result.replacements, result.first_line, result.fuzzy, result.created) == (1, 5, None, False)
    assert result.message == "Replaced 1 occurrence in a.py (line 5)."


async def test_not_unique_lists_the_lines(env: DirEnv) -> None:
    f = put(env, "a.txt", "x = 1\ny = 2\nx = 1\nz\nx = 1\n")
    with pytest.raises(EditError) as info:
        await edit_file(env, "a.txt", "x = 1", "x = 9")
    assert info.value.code == "not_unique"
    assert "occurs 3 times" in str(info.value)
    assert "lines 1, 3, 5" in str(info.value)
    assert "replace_all" in str(info.value)
    assert f.read_text() == "x = 1\ny = 2\nx = 1\nz\nx = 1\n"


async def test_replace_all(env: DirEnv) -> None:
    f = put(env, "a.txt", "aXbXc")
    result = await edit_file(env, "a.txt", "X", "--", replace_all=True)
    assert f.read_text() == "a--b--c"
    assert result.replacements == 2
    assert "2 occurrences" in result.message


async def test_identical_strings_are_an_error(env: DirEnv) -> None:
    put(env, "a.txt", "a")
    with pytest.raises(EditError) as info:
        await edit_file(env, "a.txt", "a", "a")
    assert info.value.code == "no_change"


async def test_missing_file_and_directory(env: DirEnv) -> None:
    with pytest.raises(EditError) as info:
        await edit_file(env, "nope.txt", "a", "b")
    assert info.value.code == "file_not_found"
    (env.root / "d").mkdir()
    with pytest.raises(EditError) as info:
        await edit_file(env, "d", "a", "b")
    assert info.value.code == "is_directory"


async def test_empty_old_string_creates_or_fills_but_never_clobbers(env: DirEnv) -> None:
    result = await edit_file(env, "sub/new.txt", "", "hello\n")
    assert result.created and (env.root / "sub/new.txt").read_text() == "hello\n"
    assert result.message == "Created sub/new.txt."
    empty = put(env, "empty.txt", b"")
    await edit_file(env, "empty.txt", "", "filled\n")
    assert empty.read_text() == "filled\n"
    with pytest.raises(EditError) as info:
        await edit_file(env, "empty.txt", "", "again\n")
    assert info.value.code == "not_empty"
    assert empty.read_text() == "filled\n"


async def test_not_found_shows_the_closest_region(env: DirEnv) -> None:
    put(env, "a.py", "import os\n\ndef main():\n    print('hi')\n    return 0\n")
    with pytest.raises(EditError) as info:
        await edit_file(env, "a.py", "def main():\n    print('hello')\n    return 0", "x")
    msg = str(info.value)
    assert info.value.code == "not_found"
    assert "lines 3-5 (2 of 3 lines equal)" in msg
    assert "4 |     print('hi')" in msg


# -- fuzzy -----------------------------------------------------------------------------------------


async def test_fuzzy_trailing_whitespace(env: DirEnv) -> None:
    f = put(env, "a.py", "x = 1   \ny = 2\t\nz = 3\n")
    result = await edit_file(env, "a.py", "x = 1\ny = 2\n", "x = 10\ny = 20\n")
    assert f.read_text() == "x = 10\ny = 20\nz = 3\n"
    assert result.fuzzy == "ignoring trailing whitespace"
    assert "did not match exactly" in result.message


async def test_fuzzy_indentation_reindents_the_replacement(env: DirEnv) -> None:
    f = put(env, "a.py", "class A:\n    def f(self):\n        return 1\n")
    result = await edit_file(env, "a.py", "def f(self):\n    return 1", "def f(self):\n    return 2")
    assert f.read_text() == "class A:\n    def f(self):\n        return 2\n"
    assert result.fuzzy is not None and "indentation" in result.fuzzy


async def test_fuzzy_indentation_when_the_model_over_indents(env: DirEnv) -> None:
    f = put(env, "a.py", "if x:\n  y()\n")
    await edit_file(env, "a.py", "        if x:\n          y()", "        if x:\n          z()")
    assert f.read_text() == "if x:\n  z()\n"


async def test_fuzzy_only_first_line_lost_its_indentation(env: DirEnv) -> None:
    f = put(env, "a.py", "def f():\n    a = 1\n    b = 2\n")
    await edit_file(env, "a.py", "a = 1\n    b = 2", "a = 1\n    b = 3")
    assert f.read_text() == "def f():\n    a = 1\n    b = 3\n"


async def test_fuzzy_typographic_punctuation(env: DirEnv) -> None:
    f = put(env, "doc.md", "He said \u201cit\u2019s fine\u201d \u2014 twice.\n")
    result = await edit_file(env, "doc.md", '"it\'s fine" - twice', '"it is fine" - once')
    assert f.read_text() == 'He said "it is fine" - once.\n'
    assert result.fuzzy is not None and "typographic" in result.fuzzy


async def test_fuzzy_indentation_and_punctuation_together(env: DirEnv) -> None:
    f = put(env, "a.py", "def f():\n    s = \u2018x\u2019\n    t = 1\n")
    result = await edit_file(env, "a.py", "s = 'x'\nt = 1", "s = 'y'\nt = 1")
    assert f.read_text() == "def f():\n    s = 'y'\n    t = 1\n"
    assert result.fuzzy is not None and "indentation and" in result.fuzzy


async def test_ambiguous_fuzzy_match_fails(env: DirEnv) -> None:
    f = put(env, "a.py", "if a:\n    go()\nif b:\n  go()\n")
    with pytest.raises(EditError) as info:
        await edit_file(env, "a.py", "go()  ", "stop()")
    assert info.value.code == "ambiguous"
    assert "lines 2, 4" in str(info.value)
    assert f.read_text() == "if a:\n    go()\nif b:\n  go()\n"


async def test_fuzzy_replace_all(env: DirEnv) -> None:
    f = put(env, "a.py", "if a:\n    go()  \nif b:\n  go()\n")
    result = await edit_file(env, "a.py", "go()   ", "stop()", replace_all=True)
    assert f.read_text() == "if a:\n    stop()\nif b:\n  stop()\n"
    assert result.replacements == 2


# -- bytes kept ------------------------------------------------------------------------------------


async def test_crlf_is_kept_and_new_lines_use_crlf(env: DirEnv) -> None:
    f = put(env, "w.txt", b"one\r\ntwo\r\nthree\r\n")
    await edit_file(env, "w.txt", "two\nthree", "2\n2.5\nthree")
    assert f.read_bytes() == b"one\r\n2\r\n2.5\r\nthree\r\n"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"a\r\nX\r\nb\r\nX\r\nc\r\n", b"a\r\nY\r\nZ\r\nb\r\nY\r\nZ\r\nc\r\n"),
        (b"a\nX\r\nb\r\nX\nc\r\n", b"a\nY\r\nZ\r\nb\r\nY\r\nZ\nc\r\n"),
    ],
    ids=["crlf", "mixed"],
)
async def test_replace_all_maps_every_span_back(env: DirEnv, raw: bytes, expected: bytes) -> None:
    f = put(env, "w.txt", raw)
    result = await edit_file(env, "w.txt", "X", "Y\nZ", replace_all=True)
    assert result.replacements == 2
    assert f.read_bytes() == expected


async def test_crlf_old_string_matches_too(env: DirEnv) -> None:
    f = put(env, "w.txt", b"one\r\ntwo\r\n")
    await edit_file(env, "w.txt", "one\r\ntwo", "1\r\n2")
    assert f.read_bytes() == b"1\r\n2\r\n"


async def test_mixed_line_endings_keep_untouched_bytes(env: DirEnv) -> None:
    f = put(env, "m.txt", b"a\r\nb\nc\r\nd\ne\r\n")
    await edit_file(env, "m.txt", "c\nd", "C\nD")
    assert f.read_bytes() == b"a\r\nb\nC\r\nD\ne\r\n"


async def test_crlf_fuzzy_match(env: DirEnv) -> None:
    f = put(env, "w.txt", b"x = 1  \r\ny = 2\r\n")
    await edit_file(env, "w.txt", "x = 1\ny = 2\n", "x = 3\n")
    assert f.read_bytes() == b"x = 3\r\n"


async def test_missing_final_newline_is_kept(env: DirEnv) -> None:
    f = put(env, "n.txt", "a  \nb")
    await edit_file(env, "n.txt", "a\nb\n", "A\nB\n")
    assert f.read_bytes() == b"A\nB"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"\xef\xbb\xbfname = 'x'\n", b"\xef\xbb\xbfname = 'y'\n"),
        ("\ufeffname = 'x'\n".encode("utf-16-le"), "\ufeffname = 'y'\n".encode("utf-16-le")),
        (b"# caf\xe9\nname = 'x'\n", b"# caf\xe9\nname = 'y'\n"),
    ],
    ids=["utf8-bom", "utf16-bom", "latin1"],
)
async def test_encodings_are_kept(env: DirEnv, raw: bytes, expected: bytes) -> None:
    f = put(env, "e.txt", raw)
    await edit_file(env, "e.txt", "'x'", "'y'")
    assert f.read_bytes() == expected


async def test_latin1_file_can_match_its_characters_and_rejects_unencodable_text(env: DirEnv) -> None:
    f = put(env, "l.txt", b"caf\xe9\n")
    await edit_file(env, "l.txt", "café", "caf\u00e8")
    assert f.read_bytes() == b"caf\xe8\n"
    with pytest.raises(EditError) as info:
        await edit_file(env, "l.txt", "caf\u00e8", "caf\u2615")
    assert info.value.code == "encoding"
    assert f.read_bytes() == b"caf\xe8\n"


async def test_works_with_the_local_execution_environment(tmp_path: Path) -> None:
    if LocalExecutionEnvironment is None:
        pytest.skip("ra.env.local is not available")
    local = LocalExecutionEnvironment(tmp_path)
    (tmp_path / "a.txt").write_bytes(b"x\r\ny\r\n")
    result = await edit_file(local, "a.txt", "y", "z")
    assert (tmp_path / "a.txt").read_bytes() == b"x\r\nz\r\n"
    assert result.replacements == 1

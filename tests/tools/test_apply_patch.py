"""apply_patch on real files: locating hunks, the fuzz ladder, bytes kept, errors, all-or-nothing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ra.tools.apply_patch import (
    PatchApplyError,
    PatchError,
    PatchWriteError,
    apply_patch,
)
from tests.tools.fsenv import DirEnv, snapshot


def v4a(*ops: str) -> str:
    return "*** Begin Patch\n" + "".join(ops) + "*** End Patch\n"


def update(path: str, body: str) -> str:
    return f"*** Update File: {path}\n{body}"


@pytest.fixture
def env(tmp_path: Path) -> DirEnv:
    return DirEnv(tmp_path)


def write(env: DirEnv, name: str, data: str | bytes) -> Path:
    path = env.root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


# -- locating hunks --------------------------------------------------------------------------------


async def test_hunks_search_forward_from_the_previous_hunk(env: DirEnv) -> None:
    f = write(env, "a.txt", "x\ny\nx\ny\n")
    await apply_patch(v4a(update("a.txt", "@@\n x\n-y\n+first\n@@\n x\n-y\n+second\n")), env)
    assert f.read_text() == "x\nfirst\nx\nsecond\n"


async def test_hint_selects_the_region(env: DirEnv) -> None:
    src = "class A:\n    def f(self):\n        return 1\n\nclass B:\n    def f(self):\n        return 1\n"
    f = write(env, "m.py", src)
    await apply_patch(
        v4a(update("m.py", "@@ class B:\n@@     def f(self):\n-        return 1\n+        return 2\n")), env
    )
    assert f.read_text() == src[: src.rindex("1")] + "2\n"


async def test_hint_may_be_the_first_context_line(env: DirEnv) -> None:
    f = write(env, "m.py", "def a():\n    pass\ndef b():\n    pass\n")
    await apply_patch(v4a(update("m.py", "@@ def b():\n def b():\n-    pass\n+    return 1\n")), env)
    assert f.read_text() == "def a():\n    pass\ndef b():\n    return 1\n"


async def test_hint_matches_a_line_prefix_as_a_last_resort(env: DirEnv) -> None:
    f = write(env, "m.py", "class Foo(Base):\n    x = 1\n")
    result = await apply_patch(v4a(update("m.py", "@@ class Foo\n-    x = 1\n+    x = 2\n")), env)
    assert f.read_text() == "class Foo(Base):\n    x = 2\n"
    assert "'@@ class Foo' line matched" in result.summary


async def test_end_of_file_marker_anchors_at_the_end(env: DirEnv) -> None:
    f = write(env, "a.txt", "end\nmiddle\nend\n")
    await apply_patch(v4a(update("a.txt", "@@\n-end\n+END\n*** End of File\n")), env)
    assert f.read_text() == "end\nmiddle\nEND\n"


async def test_end_of_file_marker_fails_when_the_lines_are_not_last(env: DirEnv) -> None:
    write(env, "a.txt", "end\nmiddle\n")
    with pytest.raises(PatchApplyError) as info:
        await apply_patch(v4a(update("a.txt", "@@\n-end\n+END\n*** End of File\n")), env)
    assert "at the end of the file" in str(info.value)


async def test_pure_addition_with_hint_inserts_after_the_hint(env: DirEnv) -> None:
    f = write(env, "a.py", "import os\n\ndef f():\n    pass\n")
    await apply_patch(v4a(update("a.py", "@@ import os\n+import sys\n")), env)
    assert f.read_text() == "import os\nimport sys\n\ndef f():\n    pass\n"


async def test_pure_addition_without_hint_appends_even_before_later_hunks(env: DirEnv) -> None:
    f = write(env, "a.txt", "one\ntwo\nthree\n")
    await apply_patch(v4a(update("a.txt", "@@\n+four\n@@\n-one\n+ONE\n")), env)
    assert f.read_text() == "ONE\ntwo\nthree\nfour\n"


async def test_trailing_blank_context_lines_are_optional(env: DirEnv) -> None:
    f = write(env, "a.txt", "a\nb\n")
    await apply_patch(v4a(update("a.txt", "@@\n a\n-b\n+c\n\n\n@@\n+d\n")), env)
    assert f.read_text() == "a\nc\nd\n"


async def test_blank_context_lines_that_exist_are_matched(env: DirEnv) -> None:
    f = write(env, "a.txt", "a\n\nb\n")
    await apply_patch(v4a(update("a.txt", "@@\n a\n\n-b\n+c\n")), env)
    assert f.read_text() == "a\n\nc\n"


async def test_exact_match_later_in_the_file_beats_a_loose_match_earlier(env: DirEnv) -> None:
    f = write(env, "a.txt", "foo   \nbar\nfoo\n")
    result = await apply_patch(v4a(update("a.txt", "@@\n-foo\n+baz\n")), env)
    assert f.read_text() == "foo   \nbar\nbaz\n"
    assert result.notes == []


# -- the fuzz ladder -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file_line", "note"),
    [
        ("    value = compute()   ", "ignoring trailing whitespace"),
        ("\tvalue = compute()", "ignoring leading and trailing whitespace"),
        ("    value\u00a0=\u00a0compute()", "typographic"),
    ],
)
async def test_fuzz_ladder_levels(env: DirEnv, file_line: str, note: str) -> None:
    f = write(env, "a.py", f"def f():\n{file_line}\n    return value\n")
    result = await apply_patch(
        v4a(update("a.py", "@@\n def f():\n-    value = compute()\n+    value = compute(2)\n     return value\n")), env
    )
    assert f.read_text() == "def f():\n    value = compute(2)\n    return value\n"
    assert note in result.summary
    assert "a.py hunk 1 matched" in result.notes[0]


async def test_typographic_punctuation_in_context_is_matched_and_kept(env: DirEnv) -> None:
    src = "msg = \u201chello\u201d  # \u2014 greeting\nx = 1\n"
    f = write(env, "a.py", src)
    await apply_patch(v4a(update("a.py", '@@\n msg = "hello"  # - greeting\n-x = 1\n+x = 2\n')), env)
    # the context line keeps the file's own quotes and dash; only the changed line comes from the patch
    assert f.read_text() == "msg = \u201chello\u201d  # \u2014 greeting\nx = 2\n"


async def test_unicode_patch_applies_exactly(env: DirEnv) -> None:
    f = write(env, "u.txt", "naïve café\n")
    await apply_patch(v4a(update("u.txt", "@@\n-naïve café\n+naïve café ✅\n")), env)
    assert f.read_text(encoding="utf-8") == "naïve café ✅\n"


# -- bytes kept ------------------------------------------------------------------------------------


async def test_crlf_file_stays_crlf(env: DirEnv) -> None:
    f = write(env, "w.txt", b"one\r\ntwo\r\nthree\r\n")
    await apply_patch(v4a(update("w.txt", "@@\n one\n-two\n+2\n+2.5\n")), env)
    assert f.read_bytes() == b"one\r\n2\r\n2.5\r\nthree\r\n"


async def test_mixed_line_endings_keep_untouched_lines(env: DirEnv) -> None:
    f = write(env, "m.txt", b"a\r\nb\nc\r\nd\r\n")
    await apply_patch(v4a(update("m.txt", "@@\n b\n-c\n+C\n")), env)
    assert f.read_bytes() == b"a\r\nb\nC\r\nd\r\n"


async def test_utf8_bom_and_latin1_bytes_are_kept(env: DirEnv) -> None:
    bom = write(env, "bom.txt", b"\xef\xbb\xbfk = 1\n")
    latin = write(env, "latin.txt", b"caf\xe9 = 1\nz = 2\n")
    await apply_patch(v4a(update("bom.txt", "@@\n-k = 1\n+k = 2\n"), update("latin.txt", "@@\n-z = 2\n+z = 3\n")), env)
    assert bom.read_bytes() == b"\xef\xbb\xbfk = 2\n"
    assert latin.read_bytes() == b"caf\xe9 = 1\nz = 3\n"


async def test_latin1_file_rejects_unencodable_text_and_writes_nothing(env: DirEnv) -> None:
    latin = write(env, "latin.txt", b"caf\xe9\n")
    with pytest.raises(PatchApplyError) as info:
        await apply_patch(v4a(update("latin.txt", "@@\n-café\n+café ☕\n")), env)
    assert "latin-1" in str(info.value)
    assert latin.read_bytes() == b"caf\xe9\n"


async def test_v4a_update_ends_the_file_with_a_newline_like_codex(env: DirEnv) -> None:
    f = write(env, "n.txt", "no newline at end")
    await apply_patch(v4a(update("n.txt", "@@\n-no newline at end\n+first line\n+second line\n")), env)
    assert f.read_text() == "first line\nsecond line\n"


async def test_deleting_every_line_leaves_an_empty_file(env: DirEnv) -> None:
    f = write(env, "n.txt", "a\nb\n")
    await apply_patch(v4a(update("n.txt", "@@\n-a\n-b\n")), env)
    assert f.read_bytes() == b""


# -- operations ------------------------------------------------------------------------------------


async def test_operations_see_earlier_operations(env: DirEnv) -> None:
    write(env, "old.txt", "x\n")
    patch = v4a(
        "*** Add File: a.txt\n+one\n",
        update("a.txt", "@@\n-one\n+two\n"),
        "*** Delete File: old.txt\n",
        "*** Add File: old.txt\n+reborn\n",
    )
    result = await apply_patch(patch, env)
    assert (env.root / "a.txt").read_text() == "two\n"
    assert (env.root / "old.txt").read_text() == "reborn\n"
    assert result.summary.splitlines()[1:] == ["A a.txt", "A old.txt", "M a.txt", "D old.txt"]


async def test_add_creates_parent_directories_and_empty_files(env: DirEnv) -> None:
    await apply_patch(v4a("*** Add File: deep/er/x.txt\n+x\n", "*** Add File: empty.txt\n"), env)
    assert (env.root / "deep/er/x.txt").read_text() == "x\n"
    assert (env.root / "empty.txt").read_bytes() == b""


async def test_add_under_a_file_or_onto_a_directory_is_rejected(env: DirEnv) -> None:
    write(env, "file.txt", "x\n")
    (env.root / "dir").mkdir()
    before = snapshot(env.root)
    with pytest.raises(PatchApplyError) as info:
        await apply_patch(v4a("*** Add File: file.txt/child\n+x\n", "*** Add File: dir\n+x\n"), env)
    assert len(info.value.problems) == 2
    assert "file.txt is a file" in str(info.value)
    assert "a directory of that name exists" in str(info.value)
    assert snapshot(env.root) == before


async def test_pure_rename_keeps_permissions(env: DirEnv) -> None:
    f = write(env, "run.sh", "#!/bin/sh\necho hi\n")
    f.chmod(0o755)
    await apply_patch(v4a("*** Update File: run.sh\n*** Move to: bin/run.sh\n"), env)
    moved = env.root / "bin/run.sh"
    assert not f.exists()
    assert moved.read_text() == "#!/bin/sh\necho hi\n"
    assert os.stat(moved).st_mode & stat.S_IXUSR


async def test_move_with_changes_and_counts(env: DirEnv) -> None:
    write(env, "a.py", "x = 1\ny = 2\n")
    result = await apply_patch(
        v4a("*** Update File: a.py\n*** Move to: b.py\n@@\n-x = 1\n+x = 10\n+z = 3\n y = 2\n"), env
    )
    assert not (env.root / "a.py").exists()
    assert (env.root / "b.py").read_text() == "x = 10\nz = 3\ny = 2\n"
    (change,) = result.changes
    assert (change.letter, change.path, change.move_to, change.added, change.removed) == ("M", "a.py", "b.py", 2, 1)
    assert result.summary == "Success. Updated the following files:\nM b.py"


async def test_absolute_paths_work(env: DirEnv) -> None:
    f = write(env, "abs.txt", "a\n")
    await apply_patch(v4a(update(str(f), "@@\n-a\n+b\n")), env)
    assert f.read_text() == "b\n"


# -- errors and all-or-nothing ---------------------------------------------------------------------


async def test_failure_message_names_file_hunk_expected_lines_and_closest_region(env: DirEnv) -> None:
    write(env, "app.py", "def main():\n    print('Hello')\n    return 1\n\nmain()\n")
    patch = v4a(update("app.py", "@@ def main():\n     print('Hello')\n-    return 0\n+    return 2\n"))
    with pytest.raises(PatchApplyError) as info:
        await apply_patch(patch, env)
    msg = str(info.value)
    assert "no files were changed" in msg
    assert "app.py: hunk 1 of 1 (@@ def main():, patch line 3)" in msg
    assert "     print('Hello')\n  -    return 0" in msg
    assert "closest region of the file is lines 2-3 (1 of 2 lines equal)" in msg
    assert "3 |     return 1" in msg
    (problem,) = info.value.problems
    assert (problem.path, problem.hunk) == ("app.py", 1)


async def test_out_of_order_hunks_are_explained(env: DirEnv) -> None:
    write(env, "a.txt", "one\ntwo\nthree\n")
    with pytest.raises(PatchApplyError) as info:
        await apply_patch(v4a(update("a.txt", "@@\n-three\n+3\n@@\n-one\n+1\n")), env)
    assert "hunk 2 of 2" in str(info.value)
    assert "at line 1, before the previous hunk" in str(info.value)


async def test_every_failing_file_is_reported_and_nothing_is_written(env: DirEnv) -> None:
    good = write(env, "good.txt", "a\n")
    write(env, "bad.txt", "b\n")
    patch = v4a(
        update("good.txt", "@@\n-a\n+A\n"),
        "*** Add File: new.txt\n+n\n",
        update("bad.txt", "@@\n-zzz\n+Z\n"),
        update("bad.txt", "@@\n-b\n+B\n"),  # skipped: the file already failed
        "*** Delete File: ghost.txt\n",
    )
    before = snapshot(env.root)
    with pytest.raises(PatchApplyError) as info:
        await apply_patch(patch, env)
    assert [p.path for p in info.value.problems] == ["bad.txt", "ghost.txt"]
    assert snapshot(env.root) == before
    assert good.read_text() == "a\n"
    assert env.writes == []


async def test_write_failure_rolls_back_everything(env: DirEnv) -> None:
    a = write(env, "a.txt", "a\n")
    write(env, "gone.txt", "g\n")
    write(env, "src.txt", "s\n")
    before = snapshot(env.root)
    env.fail_on.add(env.resolve("z.txt"))
    patch = v4a(
        update("a.txt", "@@\n-a\n+A\n"),
        "*** Delete File: gone.txt\n",
        "*** Update File: src.txt\n*** Move to: moved.txt\n@@\n-s\n+S\n",
        "*** Add File: z.txt\n+z\n",
    )
    with pytest.raises(PatchWriteError) as info:
        await apply_patch(patch, env)
    assert info.value.rolled_back is True
    assert "No space left on device" in str(info.value)
    assert "every file was restored" in str(info.value)
    assert len(env.writes) >= 3  # the commit really had started
    assert snapshot(env.root) == before
    assert a.read_text() == "a\n"


async def test_rollback_failure_is_reported(env: DirEnv) -> None:
    write(env, "a.txt", "a\n")
    write(env, "b.txt", "b\n")

    class Stuck(DirEnv):
        calls = 0

        async def write_file(self, path: str, content: str | bytes) -> None:
            Stuck.calls += 1
            if Stuck.calls >= 2:
                raise PermissionError(13, "Permission denied", path)
            await super().write_file(path, content)

    stuck = Stuck(env.root)
    with pytest.raises(PatchWriteError) as info:
        await apply_patch(v4a(update("a.txt", "@@\n-a\n+A\n"), update("b.txt", "@@\n-b\n+B\n")), stuck)
    assert info.value.rolled_back is False
    assert "could not restore every file" in str(info.value)
    assert any(f.startswith("a.txt: ") for f in info.value.rollback_failures)


async def test_parse_errors_are_patch_errors(env: DirEnv) -> None:
    with pytest.raises(PatchError):
        await apply_patch("*** Begin Patch\n*** Update File: a\n", env)
    assert snapshot(env.root) == {}


async def test_update_of_a_directory_is_rejected(env: DirEnv) -> None:
    (env.root / "d").mkdir()
    with pytest.raises(PatchApplyError) as info:
        await apply_patch(v4a(update("d", "@@\n-a\n+b\n")), env)
    assert "is a directory" in str(info.value)


async def test_move_onto_a_directory_is_rejected(env: DirEnv) -> None:
    write(env, "a.txt", "a\n")
    (env.root / "d").mkdir()
    with pytest.raises(PatchApplyError) as info:
        await apply_patch(v4a("*** Update File: a.txt\n*** Move to: d\n@@\n-a\n+b\n"), env)
    assert "which is a directory" in str(info.value)
    assert (env.root / "a.txt").read_text() == "a\n"


async def test_heredoc_wrapped_patch_applies(env: DirEnv) -> None:
    f = write(env, "a.txt", "a\n")
    await apply_patch("apply_patch <<'EOF'\n" + v4a(update("a.txt", "@@\n-a\n+b\n")) + "EOF\n", env)
    assert f.read_text() == "b\n"

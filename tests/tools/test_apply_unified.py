"""apply_patch with unified diffs: real ``git diff`` / ``diff -u`` output, and hand-written diffs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ra.tools.apply_patch import PatchApplyError, apply_patch
from tests.tools.fsenv import DirEnv, snapshot


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "core.autocrlf=false", "-c", "user.email=t@example.invalid", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )
    return out.stdout.decode("utf-8")


def run_diff(cwd: Path, old: str, new: str) -> str:
    out = subprocess.run(["diff", "-u", old, new], cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    return out.stdout


def tree_without_git(root: Path) -> dict[str, bytes | None]:
    return {k: v for k, v in snapshot(root).items() if k != ".git" and not k.startswith(".git/")}


def make_repo(root: Path, files: dict[str, bytes]) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for name, data in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    return repo


def copy_tree(repo: Path, dest: Path) -> Path:
    shutil.copytree(repo, dest, ignore=shutil.ignore_patterns(".git"))
    return dest


BASE = {
    "big.txt": "".join(f"line {i}\n" for i in range(1, 61)).encode(),
    "gone.txt": b"bye\n",
    "old name.txt": "".join(f"r{i}\n" for i in range(30)).encode(),
    "nonl.txt": b"a\nb",
    "addnl.txt": b"x\ny",
    "crlf.txt": b"one\r\ntwo\r\nthree\r\n",
    "caf\u00e9.txt": "caf\u00e9\n".encode(),
    "pkg/mod.py": b"import os\n\n\ndef f():\n    return 1\n",
}


def mutate(repo: Path) -> None:
    big = (repo / "big.txt").read_text().splitlines()
    big[2] = "changed 3"
    big[40] = "changed 41"
    big.insert(20, "inserted")
    del big[55]
    (repo / "big.txt").write_text("\n".join(big) + "\n")
    (repo / "gone.txt").unlink()
    (repo / "new dir").mkdir()
    (repo / "new dir" / "n.txt").write_text("fresh\nfile\n")
    (repo / "empty.txt").write_bytes(b"")
    (repo / "old name.txt").rename(repo / "renamed.txt")
    renamed = (repo / "renamed.txt").read_text().replace("r5\n", "R5\n")
    (repo / "renamed.txt").write_text(renamed)
    (repo / "nonl.txt").write_bytes(b"a\nB")
    (repo / "addnl.txt").write_bytes(b"x\ny\n")
    (repo / "crlf.txt").write_bytes(b"one\r\n2\r\nthree\r\n")
    (repo / "caf\u00e9.txt").write_text("caf\u00e9 au lait\n")
    (repo / "pkg" / "mod.py").write_bytes(b"import os\nimport sys\n\n\ndef f():\n    return 2\n")


@pytest.mark.parametrize("flags", [["-M"], ["-M", "--no-prefix"], ["-M", "-U1"], ["-M", "-U0"]])
async def test_git_diff_round_trip(tmp_path: Path, flags: list[str]) -> None:
    repo = make_repo(tmp_path, BASE)
    work = copy_tree(repo, tmp_path / "work")
    mutate(repo)
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", *flags)
    assert "rename from old name.txt" in diff and "\\ No newline at end of file" in diff
    result = await apply_patch(diff, DirEnv(work))
    assert tree_without_git(work) == tree_without_git(repo)
    letters = {line.split(" ", 1)[0] for line in result.summary.splitlines()[1:]}
    assert letters == {"A", "M", "D"}


async def test_git_diff_line_numbers_pick_among_repeated_blocks_after_a_shift(tmp_path: Path) -> None:
    block = "def handler():\n    setup()\n    run()\n    teardown()\n"
    files = {"h.py": ("# header\nunique_a()\n" + block + "\n" + block).encode()}
    repo = make_repo(tmp_path, files)
    work = copy_tree(repo, tmp_path / "work")
    text = (repo / "h.py").read_text().replace("unique_a", "unique_b")
    cut = text.rindex("    run()")
    (repo / "h.py").write_text(text[:cut] + "    run(fast=True)\n" + text[cut + len("    run()\n") :])
    diff = git(repo, "diff", "-U1")
    assert diff.count("@@ -") == 2
    # The second hunk's context matches both blocks. Ten lines added at the top of the working copy
    # move everything; the offset learned from hunk 1 keeps hunk 2 on the second block.
    prefix = "".join(f"# {i}\n" for i in range(10))
    (work / "h.py").write_text(prefix + (work / "h.py").read_text())
    await apply_patch(diff, DirEnv(work))
    assert (work / "h.py").read_text() == prefix + (repo / "h.py").read_text()


async def test_diff_u_output_applies(tmp_path: Path) -> None:
    if shutil.which("diff") is None:
        pytest.skip("diff(1) is not installed")
    old = tmp_path / "conf.ini"
    new = tmp_path / "conf.ini.new"
    old.write_text("[a]\nx = 1\ny = 2\n[b]\nz = 3\n")
    new.write_text("[a]\nx = 1\ny = 20\n[b]\nz = 3\nw = 4\n")
    out = run_diff(tmp_path, "conf.ini", "conf.ini.new")
    expected = new.read_text()
    new.unlink()
    # '+++ conf.ini.new' does not exist, so the '---' name is the target
    await apply_patch(out, DirEnv(tmp_path))
    assert old.read_text() == expected
    assert not new.exists()


async def test_hand_written_diff_without_line_numbers_and_with_fuzz(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("def f():  \n    return 1\n")
    diff = "--- a/m.py\n+++ b/m.py\n@@\n def f():\n-    return 1\n+    return 2\n"
    result = await apply_patch(diff, DirEnv(tmp_path))
    assert f.read_text() == "def f():  \n    return 2\n"
    assert "ignoring trailing whitespace" in result.summary


async def test_unified_pure_insertion_uses_the_line_number(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("1\n2\n3\n4\n")
    diff = "--- a/a.txt\n+++ b/a.txt\n@@ -2,0 +3,1 @@\n+2.5\n"
    await apply_patch(diff, DirEnv(tmp_path))
    assert f.read_text() == "1\n2\n2.5\n3\n4\n"


async def test_unified_no_newline_markers_are_honoured(tmp_path: Path) -> None:
    drop = tmp_path / "drop.txt"
    drop.write_text("a\nb\n")
    keep = tmp_path / "keep.txt"
    keep.write_bytes(b"p\nq")
    diff = (
        "--- a/drop.txt\n+++ b/drop.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n"
        "--- a/keep.txt\n+++ b/keep.txt\n@@ -1,2 +1,2 @@\n-p\n+P\n q\n\\ No newline at end of file\n"
    )
    await apply_patch(diff, DirEnv(tmp_path))
    assert drop.read_bytes() == b"a\nc"
    assert keep.read_bytes() == b"P\nq"


async def test_new_file_diff_refuses_to_overwrite(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("precious\n")
    (tmp_path / "empty.txt").write_bytes(b"")
    diff = "--- /dev/null\n+++ b/x.txt\n@@ -0,0 +1 @@\n+new\n"
    with pytest.raises(PatchApplyError) as info:
        await apply_patch(diff, DirEnv(tmp_path))
    assert "already exists" in str(info.value)
    assert (tmp_path / "x.txt").read_text() == "precious\n"
    await apply_patch(diff.replace("x.txt", "empty.txt"), DirEnv(tmp_path))
    assert (tmp_path / "empty.txt").read_text() == "new\n"


async def test_delete_diff_checks_the_content(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("one\ntwo\n")
    diff = "--- a/x.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-one\n"
    with pytest.raises(PatchApplyError) as info:
        await apply_patch(diff, DirEnv(tmp_path))
    assert "1 more line(s)" in str(info.value)
    assert (tmp_path / "x.txt").exists()
    await apply_patch("--- a/x.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n", DirEnv(tmp_path))
    assert not (tmp_path / "x.txt").exists()


async def test_unified_mismatch_reports_the_hunk_header(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("alpha\nbeta\ngamma\n")
    diff = "--- a/x.txt\n+++ b/x.txt\n@@ -1,3 +1,3 @@ section\n alpha\n-BETA\n+delta\n gamma\n"
    with pytest.raises(PatchApplyError) as info:
        await apply_patch(diff, DirEnv(tmp_path))
    msg = str(info.value)
    assert "x.txt: hunk 1 of 1 (@@ -1,3 +1,3 @@ section, patch line 3)" in msg
    assert "  -BETA" in msg
    assert "lines 1-3 (2 of 3 lines equal)" in msg

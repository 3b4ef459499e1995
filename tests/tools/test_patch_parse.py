"""parse_patch: the v4a grammar, its lenient spellings, unified diffs, and parse errors."""

from __future__ import annotations

import pytest

from ra.tools.apply_patch import OpKind, PatchParseError, parse_patch

V4A = """*** Begin Patch
*** Add File: src/new.py
+def greet(name):
+    return f"Hello, {name}!"
*** Delete File: src/old.py
*** Update File: src/main.py
*** Move to: src/app.py
@@ def main():
     print("Hello")
-    return 0
+    print("World")
+    return 1
@@ class Config:
@@     def load(self):
-        pass
+        return {}
*** End of File
*** End Patch
"""


def test_v4a_full_grammar() -> None:
    patch = parse_patch(V4A)
    assert patch.format == "v4a"
    add, delete, update = patch.operations
    assert (add.kind, add.path, add.content) == (
        OpKind.ADD,
        "src/new.py",
        ["def greet(name):", '    return f"Hello, {name}!"'],
    )
    assert (delete.kind, delete.path) == (OpKind.DELETE, "src/old.py")
    assert (update.kind, update.path, update.move_to) == (OpKind.UPDATE, "src/main.py", "src/app.py")
    first, second = update.hunks
    assert first.hints == ["def main():"]
    assert first.old_lines == ['    print("Hello")', "    return 0"]
    assert first.new_lines == ['    print("Hello")', '    print("World")', "    return 1"]
    assert first.sources == [0, -1, -1]
    assert (first.added, first.removed, first.end_of_file) == (2, 1, False)
    assert second.hints == ["class Config:", "    def load(self):"]
    assert second.end_of_file is True
    assert second.old_lines == ["        pass"]
    assert (update.added, update.removed) == (3, 2)
    assert first.line_no == 8


def test_first_hunk_may_omit_the_at_sign_header() -> None:
    patch = parse_patch("*** Begin Patch\n*** Update File: a\n-x\n+y\n*** End Patch")
    (hunk,) = patch.operations[0].hunks
    assert (hunk.old_lines, hunk.new_lines, hunk.hints) == (["x"], ["y"], [])


@pytest.mark.parametrize(
    "wrapped",
    [
        "<<'EOF'\n{p}EOF\n",
        '<<"EOF"\n{p}EOF',
        "<<EOF\n{p}EOF\n",
        "apply_patch <<'PATCH'\n{p}PATCH\n",
        "```diff\n{p}```\n",
        "\n\n{p}\n\n",
        "```\napply_patch <<'EOF'\n{p}EOF\n```",
    ],
)
def test_wrappers_are_removed(wrapped: str) -> None:
    body = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
    patch = parse_patch(wrapped.format(p=body))
    assert patch.operations[0].content == ["hi"]


def test_whitespace_padded_markers_and_crlf_patch_text() -> None:
    text = "  *** Begin Patch \r\n\t*** Update File:   a.txt  \r\n@@\r\n-x\r\n+y\r\n *** End Patch\r\n"
    op = parse_patch(text).operations[0]
    assert op.path == "a.txt"
    assert op.hunks[0].old_lines == ["x"]
    assert op.hunks[0].new_lines == ["y"]


def test_blank_lines_inside_hunks_are_empty_context_but_separators_are_not() -> None:
    text = "*** Begin Patch\n*** Update File: a\n@@\n x\n\n-y\n+z\n\n\n*** Delete File: b\n*** End Patch\n"
    update, delete = parse_patch(text).operations
    assert update.hunks[0].old_lines == ["x", "", "y"]
    assert delete.kind is OpKind.DELETE


def test_blank_line_inside_an_added_file_is_content() -> None:
    text = "*** Begin Patch\n*** Add File: a\n+one\n\n+three\n\n*** End Patch\n"
    assert parse_patch(text).operations[0].content == ["one", "", "three"]


def test_unified_style_header_inside_v4a_gives_a_line_hint() -> None:
    text = "*** Begin Patch\n*** Update File: a\n@@ -12,3 +12,3 @@ def f():\n-x\n+y\n*** End Patch\n"
    hunk = parse_patch(text).operations[0].hunks[0]
    assert hunk.old_start == 12
    assert hunk.hints == ["def f():"]


def test_update_with_move_and_no_hunks_is_a_rename() -> None:
    op = parse_patch("*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch").operations[0]
    assert (op.path, op.move_to, op.hunks) == ("a", "b", [])


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("*** Begin Patch\n*** End Patch\n", 0, "no file operations"),
        ("", 0, "empty"),
        ("*** Begin Patch\n*** Update File: a\n@@\n-x\n", 4, "cut off"),
        ("*** Begin Patch\n*** Frobnicate File: foo\n*** End Patch", 2, "not a valid file operation"),
        ("*** Begin Patch\n*** Update File: foo.txt\n*** End Patch", 2, "has no hunks"),
        ("*** Begin Patch\n*** Update File: a\n@@\n-x\nrandom text\n*** End Patch", 5, "not a hunk line"),
        ("*** Begin Patch\n*** Update File: a\nrandom\n*** End Patch", 3, "expected a hunk"),
        ("*** Begin Patch\n*** Update File: a\n@@\n@@\n*** End Patch", 0, ""),
        ("*** Begin Patch\n*** Update File: a\n@@ x\n*** End Patch", 3, "has no lines"),
        ("*** Begin Patch\n*** Add File:\n*** End Patch", 2, "needs a path"),
        ("*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch", 3, "must follow"),
        ("hello world\n", 1, "Begin Patch"),
        ("*** Update File: a\n@@\n-x\n+y\n*** End Patch\n", 1, "does not start with '*** Begin Patch'"),
    ],
)
def test_parse_errors_say_where(text: str, line: int, needle: str) -> None:
    with pytest.raises(PatchParseError) as info:
        parse_patch(text)
    assert info.value.line == line or line == 0
    assert needle in str(info.value)
    if line:
        assert f"line {line}" in str(info.value)


# -- unified diffs ---------------------------------------------------------------------------------

GIT_DIFF = """diff --git a/src/app.py b/src/app.py
index 83db48f..bf269f4 100644
--- a/src/app.py
+++ b/src/app.py
@@ -1,4 +1,4 @@ import os
 import sys
-import old
+import new

 def main():
@@ -20,3 +20,4 @@ def main():
     a = 1
     b = 2
+    c = 3
     return a
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
index b023018..0000000
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/new dir/n.txt b/new dir/n.txt
new file mode 100644
index 0000000..9d8f9d4
--- /dev/null
+++ b/new dir/n.txt\t
@@ -0,0 +1,2 @@
+fresh
+file
\\ No newline at end of file
diff --git a/old.txt b/new.txt
similarity index 100%
rename from old.txt
rename to new.txt
diff --git "a/t\\303\\251st.txt" "b/t\\303\\251st.txt"
index 1..2 100644
--- "a/t\\303\\251st.txt"
+++ "b/t\\303\\251st.txt"
@@ -1 +1 @@
-a
+b
diff --git a/script.sh b/script.sh
old mode 100644
new mode 100755
"""


def test_git_diff_operations() -> None:
    patch = parse_patch(GIT_DIFF)
    assert patch.format == "unified"
    app, gone, new, renamed, test = patch.operations  # the mode-only change is dropped
    assert (app.kind, app.path, app.move_to) == (OpKind.UPDATE, "src/app.py", None)
    h1, h2 = app.hunks
    assert (h1.old_start, h1.old_lines, h1.new_lines) == (
        1,
        ["import sys", "import old", "", "def main():"],
        ["import sys", "import new", "", "def main():"],
    )
    assert (h2.old_start, h2.added, h2.removed) == (20, 1, 0)
    assert (gone.kind, gone.path, gone.hunks[0].old_lines) == (OpKind.DELETE, "gone.txt", ["bye"])
    assert (new.kind, new.path, new.content, new.missing_newline, new.must_not_exist) == (
        OpKind.ADD,
        "new dir/n.txt",
        ["fresh", "file"],
        True,
        True,
    )
    assert (renamed.kind, renamed.path, renamed.move_to, renamed.hunks) == (OpKind.UPDATE, "old.txt", "new.txt", [])
    assert test.path == "tést.txt"


def test_plain_diff_u_with_timestamps_and_no_newline_markers() -> None:
    text = (
        "--- notes.txt\t2024-01-01 10:00:00.000000000 +0000\n"
        "+++ notes.txt\t2024-01-02 10:00:00.000000000 +0000\n"
        "@@ -1,2 +1,2 @@\n"
        " a\n"
        "-b\n"
        "\\ No newline at end of file\n"
        "+c\n"
    )
    (op,) = parse_patch(text).operations
    assert op.path == "notes.txt"
    hunk = op.hunks[0]
    assert (hunk.old_missing_newline, hunk.new_missing_newline) == (True, False)


def test_model_written_diff_without_counts_and_with_miscounts() -> None:
    text = (
        "--- a/x.py\n+++ b/x.py\n@@\n def f():\n-    return 1\n+    return 2\n"
        "\n--- a/y.py\n+++ b/y.py\n@@ -1,1 +1,1 @@\n-one\n+two\n+three\n-four\n"
    )
    x, y = parse_patch(text).operations
    assert (x.path, x.hunks[0].old_start, x.hunks[0].new_lines) == ("x.py", None, ["def f():", "    return 2"])
    # the header said 1/1 lines, but the lines that follow are still part of the hunk
    assert (y.path, y.hunks[0].old_lines, y.hunks[0].new_lines) == ("y.py", ["one", "four"], ["two", "three"])


def test_format_patch_mail_is_understood() -> None:
    text = (
        "From 1234 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] tweak\n\n---\n x.txt | 2 +-\n 1 file changed\n\n"
        "diff --git a/x.txt b/x.txt\nindex 1..2 100644\n--- a/x.txt\n+++ b/x.txt\n@@ -1 +1 @@\n-a\n+b\n"
        "-- \n2.39.5\n\n"
    )
    (op,) = parse_patch(text).operations
    assert (op.hunks[0].old_lines, op.hunks[0].new_lines) == (["a"], ["b"])


def test_counted_hunk_keeps_a_removed_line_that_looks_like_a_header() -> None:
    text = "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n--- not a header\n+++ also content\n keep\n"
    (op,) = parse_patch(text).operations
    assert op.hunks[0].old_lines == ["-- not a header", "keep"]
    assert op.hunks[0].new_lines == ["++ also content", "keep"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("diff --git a/x b/x\nindex 1..2\nBinary files a/x and b/x differ\n", "binary"),
        ("diff --git a/x b/y\ncopy from x\ncopy to y\n", "copy"),
        ("@@ -1 +1 @@\n-a\n+b\n", "before any file header"),
        ("--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n", "no lines"),
        ("--- a/x\n+++ /dev/null\n@@ -1 +1 @@\n-a\n+b\n", "deleted file"),
    ],
)
def test_unified_errors(text: str, needle: str) -> None:
    with pytest.raises(PatchParseError) as info:
        parse_patch(text)
    assert needle in str(info.value)

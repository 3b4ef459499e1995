"""apply_patch as a tool: the patch parameter, codex's input alias, errors, both formats."""

from __future__ import annotations

from pathlib import Path

from ra.env import ReadOnlyExecutionEnvironment
from ra.tools.builtin import apply_patch_tool

from .builtin_support import Runner, local_env

V4A = """*** Begin Patch
*** Add File: pkg/new.py
+print("new")
*** Update File: pkg/old.py
@@ def f():
-    return 1
+    return 2
*** Delete File: pkg/gone.py
*** End Patch
"""


def make_pkg(root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "old.py").write_text("def f():\n    return 1\n")
    (root / "pkg" / "gone.py").write_text("x = 0\n")


async def test_v4a_patch_summary(tmp_path: Path) -> None:
    make_pkg(tmp_path)
    run = Runner(apply_patch_tool(), local_env(tmp_path))
    out = await run(patch=V4A)
    assert not out.is_error
    assert out.content == "Success. Updated the following files:\nA pkg/new.py\nM pkg/old.py\nD pkg/gone.py"
    assert (tmp_path / "pkg" / "old.py").read_text() == "def f():\n    return 2\n"
    assert not (tmp_path / "pkg" / "gone.py").exists()
    assert out.metadata["format"] == "v4a"
    assert [c["op"] for c in out.metadata["changes"]] == ["A", "M", "D"]


async def test_input_alias_passes_validation_and_applies(tmp_path: Path) -> None:
    make_pkg(tmp_path)
    run = Runner(apply_patch_tool(), local_env(tmp_path))
    out = await run(input=V4A)
    assert not out.is_error, out.content
    assert (tmp_path / "pkg" / "new.py").read_text() == 'print("new")\n'
    # The model is only told about `patch`.
    schema = run.tool.definition.parameters
    assert schema["required"] == ["patch"] and set(schema["properties"]) == {"patch"}


async def test_missing_patch_is_a_validation_error(tmp_path: Path) -> None:
    run = Runner(apply_patch_tool(), local_env(tmp_path))
    out = await run()
    assert out.is_error and "missing required field 'patch'" in out.content
    out = await run(input=42)
    assert out.is_error and "patch" in out.content and "string" in out.content
    out = await run(patch="  \n")
    assert out.is_error and "The patch is empty" in out.content


async def test_failed_patch_changes_nothing_and_explains(tmp_path: Path) -> None:
    make_pkg(tmp_path)
    run = Runner(apply_patch_tool(), local_env(tmp_path))
    bad = V4A.replace("-    return 1", "-    return 999")
    out = await run(patch=bad)
    assert out.is_error and not out.content.startswith("Tool error")
    assert "pkg/old.py" in out.content
    assert not (tmp_path / "pkg" / "new.py").exists() and (tmp_path / "pkg" / "gone.py").exists()
    out = await run(patch="*** Begin Patch\n*** Frobnicate File: x\n*** End Patch\n")
    assert out.is_error


async def test_unified_diff_and_its_description(tmp_path: Path) -> None:
    make_pkg(tmp_path)
    tool = apply_patch_tool(unified_diff=True)
    assert "unified diff" in tool.definition.description
    run = Runner(tool, local_env(tmp_path))
    diff = "--- a/pkg/old.py\n+++ b/pkg/old.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 3\n"
    out = await run(patch=diff)
    assert not out.is_error and "M pkg/old.py" in out.content
    assert (tmp_path / "pkg" / "old.py").read_text() == "def f():\n    return 3\n"


async def test_read_only_environment_refuses(tmp_path: Path) -> None:
    make_pkg(tmp_path)
    run = Runner(apply_patch_tool(), ReadOnlyExecutionEnvironment(local_env(tmp_path)))
    out = await run(patch=V4A)
    assert out.is_error
    assert (tmp_path / "pkg" / "old.py").read_text() == "def f():\n    return 1\n"

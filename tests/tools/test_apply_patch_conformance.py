"""codex's own apply_patch scenarios (tests/fixtures/codex-apply-patch), run against ra.

The rule is upstream's: after applying ``patch.txt`` to a copy of ``input/`` the tree must equal
``expected/`` byte for byte, directories included. ra differs in one scenario on purpose: 015
(a failure after an earlier operation succeeded) must leave the tree exactly as it was, because ra
verifies the whole patch before writing anything.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ra.tools.apply_patch import PatchError, apply_patch
from tests.tools.fsenv import DirEnv, snapshot

try:
    from ra.env.local import LocalExecutionEnvironment
except ImportError:  # pragma: no cover - the local environment lands separately
    LocalExecutionEnvironment = None  # type: ignore[assignment,misc]

SCENARIOS = Path(__file__).resolve().parents[1] / "fixtures" / "codex-apply-patch" / "scenarios"
ALL = sorted(p.name for p in SCENARIOS.iterdir() if p.is_dir())
assert len(ALL) == 23, f"expected codex's 23 apply_patch scenarios in {SCENARIOS}, found {len(ALL)}"
FAILING = {
    "005_rejects_empty_patch",
    "006_rejects_missing_context",
    "007_rejects_missing_file_delete",
    "008_rejects_empty_update_hunk",
    "009_requires_existing_file_for_update",
    "012_delete_directory_fails",
    "013_rejects_invalid_hunk_header",
    "015_failure_after_partial_success_leaves_changes",
}
#: ra's all-or-nothing rule: the tree stays as the input was, not as upstream's expected/.
UNCHANGED = {"015_failure_after_partial_success_leaves_changes"}


def test_all_scenarios_present() -> None:
    assert len(ALL) == 23, ALL
    assert set(ALL) >= FAILING


def _env(kind: str, root: Path):
    if kind == "dir":
        return DirEnv(root)
    if LocalExecutionEnvironment is None:
        pytest.skip("ra.env.local is not available")
    return LocalExecutionEnvironment(root)


@pytest.mark.parametrize("kind", ["dir", "local"])
@pytest.mark.parametrize("name", ALL)
async def test_scenario(name: str, kind: str, tmp_path: Path) -> None:
    scenario = SCENARIOS / name
    work = tmp_path / "work"
    work.mkdir()
    if (scenario / "input").is_dir():
        shutil.copytree(scenario / "input", work, dirs_exist_ok=True)
    before = snapshot(work)
    patch = (scenario / "patch.txt").read_text(encoding="utf-8")
    env = _env(kind, work)
    if name in FAILING:
        with pytest.raises(PatchError) as info:
            await apply_patch(patch, env)
        assert str(info.value)
        assert snapshot(work) == before, "a rejected patch must leave the tree unchanged"
    else:
        result = await apply_patch(patch, env)
        assert result.summary.startswith("Success. Updated the following files:\n")
    expected = before if name in UNCHANGED else snapshot(scenario / "expected")
    assert snapshot(work) == expected


async def test_015_writes_nothing_even_for_the_operation_that_would_succeed(tmp_path: Path) -> None:
    env = DirEnv(tmp_path)
    patch = (SCENARIOS / "015_failure_after_partial_success_leaves_changes" / "patch.txt").read_text()
    with pytest.raises(PatchError) as info:
        await apply_patch(patch, env)
    assert env.writes == []
    assert snapshot(tmp_path) == {}
    assert "missing.txt" in str(info.value) and "does not exist" in str(info.value)


@pytest.mark.parametrize(
    ("name", "needles"),
    [
        ("005_rejects_empty_patch", ["no file operations"]),
        ("006_rejects_missing_context", ["modify.txt", "hunk 1 of 1", "-missing"]),
        ("007_rejects_missing_file_delete", ["missing.txt", "does not exist"]),
        ("008_rejects_empty_update_hunk", ["line 2", "foo.txt", "no hunks"]),
        ("009_requires_existing_file_for_update", ["missing.txt", "does not exist"]),
        ("012_delete_directory_fails", ["dir", "directory"]),
        ("013_rejects_invalid_hunk_header", ["line 2", "*** Frobnicate File: foo", "*** Add File: <path>"]),
    ],
)
async def test_rejection_messages(name: str, needles: list[str], tmp_path: Path) -> None:
    scenario = SCENARIOS / name
    if (scenario / "input").is_dir():
        shutil.copytree(scenario / "input", tmp_path, dirs_exist_ok=True)
    with pytest.raises(PatchError) as info:
        await apply_patch((scenario / "patch.txt").read_text(), DirEnv(tmp_path))
    for needle in needles:
        assert needle in str(info.value)


async def test_success_summary_matches_codex_shape(tmp_path: Path) -> None:
    scenario = SCENARIOS / "002_multiple_operations"
    shutil.copytree(scenario / "input", tmp_path, dirs_exist_ok=True)
    result = await apply_patch((scenario / "patch.txt").read_text(), DirEnv(tmp_path))
    assert result.summary == "Success. Updated the following files:\nA nested/new.txt\nM modify.txt\nD delete.txt"

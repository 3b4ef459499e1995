"""ra.profiles.context on real git repositories in tmp_path, through LocalExecutionEnvironment:
git snapshot (spec 6.4), environment block (6.3), project docs discovery and budget (6.5), and
ra-spec's AGENTS.md chain."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import date
from pathlib import Path

import pytest

from ra.env.base import ExecResult
from ra.env.local import LocalExecutionEnvironment
from ra.profiles.context import (
    PROFILE_DOC_FILES,
    PROJECT_DOC_BUDGET,
    TRUNCATION_MARKER,
    GitSnapshot,
    ProjectDoc,
    discover_agents_md_chain,
    discover_project_docs,
    environment_block,
    format_project_docs,
    git_snapshot,
    truncation_marker,
)

# -- helpers (test_prompting.py uses them too) ---------------------------------------------------


@pytest.fixture(autouse=True)
def git_identity(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Commits work on a fresh machine, and no config or repository outside tmp_path leaks in."""
    for key, value in {
        "GIT_AUTHOR_NAME": "Test Author",
        "GIT_AUTHOR_EMAIL": "author@example.invalid",
        "GIT_COMMITTER_NAME": "Test Committer",
        "GIT_COMMITTER_EMAIL": "committer@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CEILING_DIRECTORIES": str(tmp_path.parent),
    }.items():
        monkeypatch.setenv(key, value)
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(key, raising=False)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def read(path: str | Path) -> str:
    return Path(path).read_text(encoding="utf-8")


def make_repo(path: Path, branch: str = "main", commits: tuple[str, ...] = ("initial commit",)) -> Path:
    """A repository at ``path`` on ``branch`` with one file changed per commit subject."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    for number, subject in enumerate(commits):
        write(path / "history.txt", f"{number}\n")
        git(path, "add", "history.txt")
        git(path, "commit", "-q", "-m", subject)
    return path


def env_at(path: Path) -> LocalExecutionEnvironment:
    return LocalExecutionEnvironment(path)


# -- git snapshot --------------------------------------------------------------------------------


async def test_snapshot_of_a_busy_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", branch="feature/login", commits=("first", "second", "third"))
    write(repo / "tracked_a.py", "a\n")
    write(repo / "tracked_b.py", "b\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "add modules")
    write(repo / "tracked_a.py", "a changed\n")  # unstaged modification
    write(repo / "tracked_b.py", "b changed\n")
    git(repo, "add", "tracked_b.py")  # staged modification
    write(repo / "staged_new.py", "new\n")
    git(repo, "add", "staged_new.py")  # staged addition
    write(repo / "notes.txt", "untracked\n")
    write(repo / "scratch" / "one.txt", "1\n")  # an untracked directory counts file by file
    write(repo / "scratch" / "deep" / "two.txt", "2\n")

    snap = await git_snapshot(env_at(repo))

    assert snap.is_repo
    assert snap.root == str(repo)
    assert snap.branch == "feature/login"
    assert snap.head == git(repo, "rev-parse", "--short", "HEAD")
    assert snap.modified == 3
    assert snap.untracked == 3
    assert snap.recent_commits == ["add modules", "third", "second", "first"]
    assert snap.render() == "\n".join(
        [
            "<git>",
            "Branch: feature/login",
            "Modified files: 3",
            "Untracked files: 3",
            "Recent commits:",
            "- add modules",
            "- third",
            "- second",
            "- first",
            "</git>",
        ]
    )


async def test_clean_repository_counts_zero(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    snap = await git_snapshot(env_at(repo))
    assert (snap.is_repo, snap.modified, snap.untracked) == (True, 0, 0)
    assert snap.recent_commits == ["initial commit"]


async def test_renames_and_deletions_count_once_each(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    write(repo / "old_name.txt", "content\n")
    write(repo / "doomed.txt", "bye\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "two files")
    git(repo, "mv", "old_name.txt", "new_name.txt")
    (repo / "doomed.txt").unlink()
    snap = await git_snapshot(env_at(repo))
    assert (snap.modified, snap.untracked) == (2, 0)


async def test_recent_commits_are_capped(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", commits=tuple(f"commit {n}" for n in range(12)))
    env = env_at(repo)
    assert (await git_snapshot(env)).recent_commits == [f"commit {n}" for n in range(11, 1, -1)]
    assert (await git_snapshot(env, max_commits=5)).recent_commits == [f"commit {n}" for n in range(11, 6, -1)]
    assert (await git_snapshot(env, max_commits=0)).recent_commits == []
    with pytest.raises(ValueError, match="max_commits"):
        await git_snapshot(env, max_commits=-1)


async def test_long_subjects_are_clipped(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", commits=("x" * 500,))
    (subject,) = (await git_snapshot(env_at(repo))).recent_commits
    assert len(subject) == 200 and subject.endswith("...") and subject.startswith("xxx")


async def test_repository_without_commits_is_still_a_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "fresh", branch="trunk", commits=())
    write(repo / "README", "hello\n")
    snap = await git_snapshot(env_at(repo))
    assert snap.is_repo and snap.branch == "trunk" and snap.head is None
    assert (snap.modified, snap.untracked, snap.recent_commits) == (0, 1, [])
    assert "Recent commits: none yet" in snap.render()
    assert snap.branch_label() == "trunk"


async def test_detached_head(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", commits=("one", "two"))
    git(repo, "checkout", "-q", "--detach", "HEAD~1")
    snap = await git_snapshot(env_at(repo))
    sha = git(repo, "rev-parse", "--short", "HEAD")
    assert snap.is_repo and snap.branch is None and snap.head == sha
    assert snap.branch_label() == f"(detached at {sha})"
    assert f"Branch: (detached at {sha})" in snap.render()
    assert snap.recent_commits == ["one"]


async def test_not_a_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    snap = await git_snapshot(env_at(plain))
    assert snap == GitSnapshot()
    assert snap.render() == ""
    assert snap.branch_label() == "(none)"


async def test_snapshot_from_a_subdirectory_names_the_top(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "pkg" / "sub").mkdir(parents=True)
    snap = await git_snapshot(env_at(repo / "pkg" / "sub"))
    assert snap.is_repo and snap.root == str(repo)


async def test_root_keeps_the_environments_spelling_through_a_symlink(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "real")
    (repo / "pkg").mkdir()
    link = tmp_path / "link"
    link.symlink_to(repo, target_is_directory=True)
    assert (await git_snapshot(env_at(link / "pkg"))).root == str(link)
    assert (await git_snapshot(env_at(link))).root == str(link)


class _BrokenEnv(LocalExecutionEnvironment):
    async def exec_command(self, *args: object, **kwargs: object) -> ExecResult:
        raise OSError("no shell here")


async def test_an_environment_that_cannot_run_commands_is_not_a_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    assert await git_snapshot(_BrokenEnv(repo)) == GitSnapshot()


class _ImpatientEnv(LocalExecutionEnvironment):
    """Runs every command with a short timeout, so a slow ``git status`` really times out."""

    async def exec_command(self, command: str, timeout_ms: int | None = None, **kwargs: object) -> ExecResult:
        return await super().exec_command(command, 1500, **kwargs)  # type: ignore[arg-type]


async def test_a_slow_git_status_keeps_what_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path / "repo", commits=("one",))
    real_git = shutil.which("git")
    assert real_git is not None
    bin_dir = tmp_path / "bin"
    fake = write(bin_dir / "git", f'#!/bin/sh\n[ "$1" = status ] && sleep 30\nexec {real_git} "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env = _ImpatientEnv(repo, kill_grace_ms=100)

    snap = await git_snapshot(env)

    assert snap.is_repo and snap.branch == "main" and snap.head is not None
    assert snap.modified is None and snap.untracked is None and snap.recent_commits == []
    assert "Modified files: unknown" in snap.render()
    assert "Untracked files: unknown" in snap.render()


# -- environment block ---------------------------------------------------------------------------


def test_environment_block_has_exactly_the_spec_fields() -> None:
    snap = GitSnapshot(is_repo=True, root="/w", branch="main", head="abc1234")
    block = environment_block(
        working_directory="/w/app",
        git=snap,
        platform="linux",
        os_version="Linux 6.1.0",
        model="Claude Sonnet 4.5 (claude-sonnet-4-5)",
        knowledge_cutoff="2025-01",
        today=date(2026, 3, 4),
    )
    assert block == "\n".join(
        [
            "<environment>",
            "Working directory: /w/app",
            "Is git repository: true",
            "Git branch: main",
            "Platform: linux",
            "OS version: Linux 6.1.0",
            "Today's date: 2026-03-04",
            "Model: Claude Sonnet 4.5 (claude-sonnet-4-5)",
            "Knowledge cutoff: 2025-01",
            "</environment>",
        ]
    )


def test_environment_block_outside_a_repository_and_with_unknowns() -> None:
    block = environment_block(
        working_directory="/tmp/x", git=GitSnapshot(), platform="darwin", os_version="Darwin 23.0", model="m"
    ).splitlines()
    assert block[2:4] == ["Is git repository: false", "Git branch: (none)"]
    assert block[6] == f"Today's date: {date.today().isoformat()}"
    assert block[8] == "Knowledge cutoff: unknown"
    detached = environment_block(
        working_directory="/w",
        git=GitSnapshot(is_repo=True, head="1234567"),
        platform="linux",
        os_version="Linux",
        model="m",
    )
    assert "Git branch: (detached at 1234567)" in detached.splitlines()


async def test_environment_block_from_a_real_environment(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", branch="dev")
    env = env_at(repo)
    block = environment_block(
        working_directory=env.working_directory(),
        git=await git_snapshot(env),
        platform=env.platform(),
        os_version=env.os_version(),
        model="gpt-5.2",
    ).splitlines()
    assert block[1] == f"Working directory: {repo}"
    assert block[2] == "Is git repository: true"
    assert block[3] == "Git branch: dev"
    assert block[4] == f"Platform: {env.platform()}" and env.platform() in ("linux", "darwin")
    assert block[5] == f"OS version: {env.os_version()}"


# -- project docs --------------------------------------------------------------------------------

ALL_DOC_NAMES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md", ".codex/instructions.md")


@pytest.fixture
def doc_tree(tmp_path: Path) -> Path:
    """outer/AGENTS.md (above the repository), then in the repository at every level of
    repo/pkg/sub (the working directory) a selection of instruction files, plus decoys off the
    path (a sibling directory, a directory below the working directory)."""
    write(tmp_path / "AGENTS.md", "above the repository\n")
    repo = make_repo(tmp_path / "repo")
    for name in ALL_DOC_NAMES:
        write(repo / name, f"root {name}\n")
    write(repo / "pkg" / "AGENTS.md", "pkg AGENTS.md\n")
    write(repo / "pkg" / "CLAUDE.md", "pkg CLAUDE.md\n")
    write(repo / "pkg" / "sub" / "GEMINI.md", "sub GEMINI.md\n")
    write(repo / "pkg" / "sub" / ".codex" / "instructions.md", "sub .codex/instructions.md\n")
    write(repo / "pkg" / "sub" / "AGENTS.md", "sub AGENTS.md\n")
    write(repo / "sibling" / "AGENTS.md", "never\n")
    write(repo / "sibling" / "CLAUDE.md", "never\n")
    write(repo / "pkg" / "sub" / "below" / "AGENTS.md", "never\n")
    return repo


EXPECTED = {
    "anthropic": [
        "AGENTS.md",
        "CLAUDE.md",
        "pkg/AGENTS.md",
        "pkg/CLAUDE.md",
        "pkg/sub/AGENTS.md",
    ],
    "gemini": ["AGENTS.md", "GEMINI.md", "pkg/AGENTS.md", "pkg/sub/AGENTS.md", "pkg/sub/GEMINI.md"],
    "openai": [
        "AGENTS.md",
        ".codex/instructions.md",
        "pkg/AGENTS.md",
        "pkg/sub/AGENTS.md",
        "pkg/sub/.codex/instructions.md",
    ],
    "ra": ["AGENTS.md", "pkg/AGENTS.md", "pkg/sub/AGENTS.md"],
}


@pytest.mark.parametrize("profile", sorted(EXPECTED))
async def test_each_profile_reads_agents_md_and_only_its_own_files(profile: str, doc_tree: Path) -> None:
    env = env_at(doc_tree / "pkg" / "sub")
    snap = await git_snapshot(env)
    docs = await discover_project_docs(env, PROFILE_DOC_FILES[profile], git_root=snap.root)
    assert [d.path for d in docs] == [str(doc_tree / rel) for rel in EXPECTED[profile]]
    for doc in docs:
        assert doc.content == read(doc.path) and not doc.truncated


def test_profile_doc_files_follow_the_spec_table() -> None:
    assert dict(PROFILE_DOC_FILES) == {
        "openai": (".codex/instructions.md",),
        "anthropic": ("CLAUDE.md",),
        "gemini": ("GEMINI.md",),
        "ra": (),
    }


async def test_without_git_root_only_the_working_directory_is_read(doc_tree: Path) -> None:
    env = env_at(doc_tree / "pkg")
    docs = await discover_project_docs(env, ["CLAUDE.md"])
    assert [d.path for d in docs] == [str(doc_tree / "pkg" / "AGENTS.md"), str(doc_tree / "pkg" / "CLAUDE.md")]


async def test_a_non_git_directory_reads_only_itself(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "parent\n")
    plain = tmp_path / "plain"
    write(plain / "AGENTS.md", "here\n")
    write(plain / "GEMINI.md", "gemini here\n")
    env = env_at(plain)
    snap = await git_snapshot(env)
    assert not snap.is_repo
    docs = await discover_project_docs(env, ["GEMINI.md"], git_root=snap.root)
    assert [(Path(d.path).name, d.content) for d in docs] == [("AGENTS.md", "here\n"), ("GEMINI.md", "gemini here\n")]


async def test_docs_walk_through_a_symlinked_working_directory(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "real")
    write(repo / "AGENTS.md", "top\n")
    write(repo / "pkg" / "AGENTS.md", "pkg\n")
    link = tmp_path / "link"
    link.symlink_to(repo, target_is_directory=True)
    env = env_at(link / "pkg")
    snap = await git_snapshot(env)
    docs = await discover_project_docs(env, [], git_root=snap.root)
    assert [(d.path, d.content) for d in docs] == [(f"{link}/AGENTS.md", "top\n"), (f"{link}/pkg/AGENTS.md", "pkg\n")]


async def test_empty_files_and_directories_named_like_docs_are_skipped(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "  \n\n")
    (tmp_path / "CLAUDE.md").mkdir()
    write(tmp_path / "GEMINI.md", "real content\n")
    docs = await discover_project_docs(env_at(tmp_path), ["CLAUDE.md", "GEMINI.md"])
    assert [Path(d.path).name for d in docs] == ["GEMINI.md"]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads every file")
async def test_unreadable_files_are_skipped(tmp_path: Path) -> None:
    locked = write(tmp_path / "AGENTS.md", "secret\n")
    write(tmp_path / "CLAUDE.md", "readable\n")
    locked.chmod(0)
    try:
        docs = await discover_project_docs(env_at(tmp_path), ["CLAUDE.md"])
    finally:
        locked.chmod(0o644)
    assert [(Path(d.path).name, d.content) for d in docs] == [("CLAUDE.md", "readable\n")]


async def test_invalid_utf8_is_replaced_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_bytes(b"caf\xe9 rules\n")
    (doc,) = await discover_project_docs(env_at(tmp_path), [])
    assert doc.content == "caf\ufffd rules\n"


async def test_bad_file_names_are_rejected(tmp_path: Path) -> None:
    env = env_at(tmp_path)
    for bad in (["/etc/passwd"], ["../AGENTS.md"], [""], ["a/../../x"]):
        with pytest.raises(ValueError):
            await discover_project_docs(env, bad)
    with pytest.raises(TypeError):
        await discover_project_docs(env, "CLAUDE.md")
    with pytest.raises(ValueError, match="budget"):
        await discover_project_docs(env, [], budget=0)


async def test_agents_md_is_read_once_even_if_listed(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "once\n")
    docs = await discover_project_docs(env_at(tmp_path), ["AGENTS.md", "./AGENTS.md"])
    assert [d.content for d in docs] == ["once\n"]


async def test_budget_cuts_the_crossing_file_and_marks_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    first = "a" * 20_000 + "\n"
    second = "b" * 20_000 + "\n"
    write(repo / "AGENTS.md", first)
    write(repo / "pkg" / "AGENTS.md", second)
    write(repo / "pkg" / "CLAUDE.md", "never reached\n")
    env = env_at(repo / "pkg")
    docs = await discover_project_docs(env, ["CLAUDE.md"], git_root=str(repo))

    assert [d.path for d in docs] == [str(repo / "AGENTS.md"), str(repo / "pkg" / "AGENTS.md")]
    assert docs[0].content == first and not docs[0].truncated
    kept, marker = docs[1].content.rsplit("\n", 1)
    assert marker == "[Project instructions truncated at 32KB]" == TRUNCATION_MARKER
    assert docs[1].truncated
    assert kept == "b" * (PROJECT_DOC_BUDGET - len(first))
    assert len(first) + len(kept) == 32 * 1024
    assert format_project_docs(docs).endswith(f"{kept}\n{TRUNCATION_MARKER}\n</project_instructions>")


async def test_budget_exhausted_exactly_marks_the_next_file(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "x" * PROJECT_DOC_BUDGET)
    write(tmp_path / "CLAUDE.md", "more\n")
    docs = await discover_project_docs(env_at(tmp_path), ["CLAUDE.md"])
    assert docs[0].content == "x" * PROJECT_DOC_BUDGET and not docs[0].truncated
    assert docs[1] == ProjectDoc(str(tmp_path / "CLAUDE.md"), TRUNCATION_MARKER, truncated=True)


async def test_budget_cut_never_splits_a_character(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "é" * 100)  # two bytes each
    (doc,) = await discover_project_docs(env_at(tmp_path), [], budget=51)
    assert doc.content == "é" * 25 + "\n[Project instructions truncated at 51 bytes]"
    assert "\ufffd" not in doc.content


def test_truncation_markers() -> None:
    assert truncation_marker(32 * 1024) == "[Project instructions truncated at 32KB]"
    assert truncation_marker(8 * 1024) == "[Project instructions truncated at 8KB]"
    assert truncation_marker(1000) == "[Project instructions truncated at 1000 bytes]"


def test_format_project_docs() -> None:
    assert format_project_docs([]) == ""
    text = format_project_docs([ProjectDoc("/r/AGENTS.md", "one\n\n"), ProjectDoc("/r/a/CLAUDE.md", "two")])
    assert text == (
        '<project_instructions path="/r/AGENTS.md">\none\n</project_instructions>\n\n'
        '<project_instructions path="/r/a/CLAUDE.md">\ntwo\n</project_instructions>'
    )


# -- ra-spec AGENTS.md chain ---------------------------------------------------------------------


async def test_agents_md_chain_goes_past_the_git_root(doc_tree: Path, tmp_path: Path) -> None:
    env = env_at(doc_tree / "pkg" / "sub")
    docs = await discover_agents_md_chain(env)
    ours = [d for d in docs if d.path.startswith(str(tmp_path) + "/")]
    assert [(d.path, d.content) for d in ours] == [
        (str(tmp_path / "AGENTS.md"), "above the repository\n"),
        (str(doc_tree / "AGENTS.md"), "root AGENTS.md\n"),
        (str(doc_tree / "pkg" / "AGENTS.md"), "pkg AGENTS.md\n"),
        (str(doc_tree / "pkg" / "sub" / "AGENTS.md"), "sub AGENTS.md\n"),
    ]
    # Anything before ours comes from directories above tmp_path, outermost first.
    others = [Path(d.path).parent for d in docs[: len(docs) - len(ours)]]
    assert all(tmp_path.is_relative_to(p) for p in others)
    assert others == sorted(others, key=lambda p: len(p.parts))
    assert docs[len(docs) - len(ours) :] == ours


async def test_agents_md_chain_outside_any_repository(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "outer\n")
    write(tmp_path / "a" / "b" / "AGENTS.md", "inner\n")
    write(tmp_path / "a" / "CLAUDE.md", "not for ra\n")
    docs = await discover_agents_md_chain(env_at(tmp_path / "a" / "b"))
    assert [d.content for d in docs if d.path.startswith(str(tmp_path))] == ["outer\n", "inner\n"]


async def test_agents_md_chain_respects_the_budget(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "o" * 30)
    write(tmp_path / "a" / "AGENTS.md", "i" * 30)
    docs = await discover_agents_md_chain(env_at(tmp_path / "a"), budget=40)
    ours = [d for d in docs if d.path.startswith(str(tmp_path))]
    if len(ours) == len(docs):  # nothing above tmp_path on this machine used the budget first
        assert [d.content for d in ours] == ["o" * 30, "i" * 10 + "\n[Project instructions truncated at 40 bytes]"]
    assert docs[-1].truncated

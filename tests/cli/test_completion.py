"""Shell completion: ``ra completion SHELL`` loaded into real bash, zsh and fish, asked real
questions (.ci/run installs zsh and fish; a machine without them skips those two)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.support import clean_env, ra_command, run_ra


def shell_env(tmp_path: Path) -> dict[str, str]:
    env = clean_env(tmp_path, TERM="dumb")
    bin_dir = str(Path(ra_command()[0]).parent)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def bash_complete(tmp_path: Path, line: str) -> list[str]:
    """What bash's completion function offers for ``line`` (the cursor at its end)."""
    words = line.split(" ")
    script = (
        "source <(ra completion bash) || exit 9\n"
        f'COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; COMP_WORDS=({" ".join(repr(w) for w in words)}); '
        f"COMP_CWORD={len(words) - 1}\n"
        '_python_argcomplete ra\nprintf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "-c", script], env=shell_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [w.strip() for w in done.stdout.splitlines() if w.strip()]


def test_bash_completes_flags_choices_models_files_and_commands(tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("x")
    assert bash_complete(tmp_path, "ra --permission-m") == ["--permission-mode"]
    assert bash_complete(tmp_path, "ra --permission-mode ") == ["default", "accept_edits", "plan", "bypass", "dont_ask"]
    assert bash_complete(tmp_path, "ra --output-format s") == ["stream-json"]
    models = bash_complete(tmp_path, "ra --provider anthropic --model claude-sonnet-4")
    assert models and all(m.startswith("claude-sonnet-4") for m in models) and "claude-sonnet-4-5" in models
    assert bash_complete(tmp_path, "ra --image ") == ["shot.png"]  # images only
    (tmp_path / "session.jsonl").write_text("")
    assert bash_complete(tmp_path, "ra replay ") == ["session.jsonl"]  # record files only
    assert bash_complete(tmp_path, "ra batch ") == ["session.jsonl"]  # tasks files are JSONL too
    assert bash_complete(tmp_path, "ra ") == ["models", "sessions", "replay", "batch", "mcp", "completion"]
    assert bash_complete(tmp_path, "ra sessions ") == ["show", "delete"]
    assert bash_complete(tmp_path, "ra mcp ") == ["list"]
    (tmp_path / "servers.json").write_text("{}")
    assert bash_complete(tmp_path, "ra --mcp-config ") == ["servers.json"]  # JSON files only
    assert "--resume" in bash_complete(tmp_path, "ra --res")
    assert "--fork-session" in bash_complete(tmp_path, "ra --fork")
    assert bash_complete(tmp_path, "ra completion ") == ["bash", "zsh", "fish"]
    assert bash_complete(tmp_path, "ra fix the bu") == []  # a task is free text


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed (.ci/run installs it)")
def test_fish_completes_from_the_same_parser(tmp_path: Path) -> None:
    def fish(line: str) -> list[str]:
        done = subprocess.run(
            ["fish", "--no-config", "-c", f'ra completion fish | source; complete -C "{line}"'],
            env=shell_env(tmp_path),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return [row.split("\t")[0] for row in done.stdout.splitlines()]

    assert fish("ra --permission-mode a") == ["accept_edits"]
    assert "--max-budget-usd" in fish("ra --max-b")
    assert fish("ra completion f") == ["fish"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed (.ci/run installs it)")
def test_zsh_completes_at_a_real_prompt(tmp_path: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    buffer = tmp_path / "buffer"
    shell = pexpect.spawn("zsh", ["-f", "-i"], env=shell_env(tmp_path), cwd=str(tmp_path), encoding="utf-8", timeout=30)
    try:
        # A key that writes the line being edited to a file and says so: what TAB left there.
        shell.sendline(
            'PS1="> "; bindkey -e; autoload -Uz compinit && compinit -u -d "$HOME/.zcompdump"; '
            'eval "$(ra completion zsh)"; '
            f'dump() {{ print -r -- "$BUFFER" > {buffer}; zle -M "DU""MPED"; }}; zle -N dump; bindkey "^X" dump; '
            'sync() { zle -M "SY""NC:$BUFFER"; }; zle -N sync; bindkey "^Y" sync; '
            "echo RE''ADY"
        )
        shell.expect("READY")

        rounds = iter(range(1, 100))

        def completed(line: str, shown: str) -> str:
            # Every key sent before is handled first: a DUMPED left over from the last round's
            # extra ^X presses must not be taken for this round's.
            token = f"round{next(rounds)}"
            shell.send(token + "\x19")
            shell.expect(f"SYNC:{token}", timeout=30)
            shell.send("\x15")
            shell.send(line + "\t")
            # Wait until the completion is on the screen: a key typed while zsh still completes
            # (it runs ra, slow on a loaded machine) is typeahead, and zsh then drops the space
            # it would have added after a unique match.
            shell.expect_exact(shown, timeout=30)
            deadline = time.monotonic() + 30
            while True:  # ask until the completion (which runs ra) has finished
                shell.send("\x18")
                try:
                    shell.expect("DUMPED", timeout=0.5)
                    break
                except pexpect.TIMEOUT:
                    assert time.monotonic() < deadline, "zsh never finished completing"
            shell.send("\x15")  # clear the line for the next one
            return buffer.read_text().rstrip("\n")

        assert completed("ra --permission-mode pl", "mode plan") == "ra --permission-mode plan "
        assert completed("ra comp", "completion") == "ra completion "
        assert completed("ra --provider gemini --model gemini-2.5-fl", "gemini-2.5-flash").startswith(
            "ra --provider gemini --model gemini-2.5-flash"
        )
    finally:
        shell.close(force=True)


def test_completion_needs_a_known_shell(tmp_path: Path) -> None:
    result = run_ra(["completion", "tcsh"], clean_env(tmp_path))
    assert result.returncode == 2 and "bash,zsh,fish" in result.stderr
    assert run_ra(["completion", "bash"], clean_env(tmp_path)).stdout.startswith("#compdef ra")

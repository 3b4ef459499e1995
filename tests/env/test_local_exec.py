"""exec_command against real processes: capture, timeouts, process groups, memory bound."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ra.env import ExecResult, LocalExecutionEnvironment
from ra.env.local import timeout_message

from .procs import is_alive, kill_quietly, live_group_members, needs_proc

SPEC_TIMEOUT_TEXT = (
    "[ERROR: Command timed out after 300ms. Partial output is shown above.\n"
    "You can retry with a longer timeout by setting the timeout_ms parameter.]"
)


@pytest.fixture
def env(tmp_path: Path) -> LocalExecutionEnvironment:
    return LocalExecutionEnvironment(tmp_path)


def file_size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None


def read_chunks(path: str) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            yield chunk


def first_line_pid(result: ExecResult) -> int:
    return int(result.stdout.splitlines()[0])


async def test_separate_streams_exit_code_and_counts(env: LocalExecutionEnvironment) -> None:
    result = await env.exec_command("echo out; echo err >&2; echo more; exit 3")
    assert result.stdout == "out\nmore\n"
    assert result.stderr == "err\n"
    assert result.exit_code == 3
    assert not result.timed_out and not result.aborted
    assert result.total_bytes == len("out\nmore\nerr\n")
    assert result.duration_ms >= 0
    assert result.full_output_path is None
    assert result.output == "out\nmore\nerr\n"


async def test_runs_in_working_dir_with_bash(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    result = await env.exec_command("pwd; echo ${BASH_VERSION:+bash}")
    assert result.stdout.splitlines() == [str(tmp_path), "bash"]
    result = await env.exec_command("pwd", working_dir="sub")
    assert result.stdout.strip() == str(tmp_path / "sub")


async def test_bad_working_dir_and_bad_input(env: LocalExecutionEnvironment) -> None:
    with pytest.raises(FileNotFoundError, match="missing"):
        await env.exec_command("true", working_dir="missing")
    with pytest.raises(ValueError, match="timeout_ms"):
        await env.exec_command("true", timeout_ms=0)
    with pytest.raises(ValueError, match="command"):
        await env.exec_command("  ")


async def test_stdin_is_dev_null(env: LocalExecutionEnvironment) -> None:
    result = await env.exec_command("cat; echo after", timeout_ms=5000)
    assert result.stdout == "after\n"
    assert not result.timed_out


async def test_signal_death_reports_shell_style_exit_code(env: LocalExecutionEnvironment) -> None:
    result = await env.exec_command("kill -KILL $$")
    assert result.exit_code == 137


async def test_timeout_returns_partial_output_and_spec_message(env: LocalExecutionEnvironment) -> None:
    result = await env.exec_command("echo started; sleep 30", timeout_ms=300)
    assert result.timed_out
    assert result.stdout == "started\n" + SPEC_TIMEOUT_TEXT
    assert timeout_message(300) == SPEC_TIMEOUT_TEXT
    assert result.exit_code == 143  # SIGTERM


async def test_timeout_is_capped_by_max(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path, max_command_timeout_ms=300)
    result = await env.exec_command("sleep 30", timeout_ms=60_000)
    assert result.timed_out
    assert result.stdout == SPEC_TIMEOUT_TEXT
    assert env.effective_timeout_ms(None) == 300


async def test_default_timeout_applies(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path, default_timeout_ms=300)
    result = await env.exec_command("sleep 30")
    assert result.timed_out
    assert "timed out after 300ms" in result.stdout


def test_the_default_timeout_is_ten_seconds(tmp_path: Path) -> None:
    """Spec 4.2: 10 s when a call gives none - the environment's default and the session's."""
    from ra.agent import SessionConfig

    assert LocalExecutionEnvironment(tmp_path).effective_timeout_ms(None) == 10_000
    assert SessionConfig().default_command_timeout_ms == 10_000


@needs_proc
async def test_timeout_kills_background_children(env: LocalExecutionEnvironment) -> None:
    result = await env.exec_command("echo $$; sleep 100 & sleep 100 & wait", timeout_ms=300)
    assert result.timed_out
    assert live_group_members(first_line_pid(result)) == []


@needs_proc
async def test_term_trapping_command_gets_sigkill_after_grace(env: LocalExecutionEnvironment) -> None:
    script = "trap 'echo got-term' TERM; echo $$; while :; do sleep 0.05; done"
    result = await env.exec_command(script, timeout_ms=300)
    assert result.timed_out
    lines = result.stdout.splitlines()
    assert "got-term" in lines  # SIGTERM came first and the trap ran ...
    assert result.exit_code == 137  # ... and SIGKILL ended it
    assert live_group_members(int(lines[0])) == []


@needs_proc
async def test_background_child_holding_pipes_does_not_hang(env: LocalExecutionEnvironment) -> None:
    result = await env.exec_command("echo $$; sleep 100 &")
    assert result.exit_code == 0
    assert not result.timed_out
    assert "background" in result.stderr
    assert live_group_members(first_line_pid(result)) == []


@needs_proc
async def test_child_that_leaves_the_group_cannot_hang_the_call(env: LocalExecutionEnvironment) -> None:
    # setsid moves sleep into its own session, out of reach of killpg, still holding the pipes.
    result = await env.exec_command("setsid sleep 100 & echo $!")
    pid = int(result.stdout.strip())
    try:
        assert result.exit_code == 0 and not result.timed_out
        assert "background" in result.stderr
    finally:
        kill_quietly(pid)


@needs_proc
async def test_detached_background_child_is_left_running(env: LocalExecutionEnvironment) -> None:
    result = await env.exec_command("sleep 100 > /dev/null 2>&1 & echo $!")
    pid = int(result.stdout.strip())
    try:
        assert result.stderr == ""
        assert is_alive(pid)
    finally:
        kill_quietly(pid)


@needs_proc
async def test_terminate_all_aborts_running_commands(env: LocalExecutionEnvironment) -> None:
    pids: list[int] = []
    seen = asyncio.Event()

    def on_output(stream: str, text: str) -> None:
        if stream == "stdout" and not pids:
            pids.append(int(text.split()[0]))
            seen.set()

    task = asyncio.create_task(
        env.exec_command("echo $$; sleep 100 & sleep 100", timeout_ms=60_000, on_output=on_output)
    )
    await asyncio.wait_for(seen.wait(), 10)
    await env.terminate_all()
    result = await asyncio.wait_for(task, 10)
    assert result.aborted
    assert not result.timed_out
    assert "timed out" not in result.stdout
    assert live_group_members(pids[0]) == []


@needs_proc
async def test_cancelling_the_call_kills_the_group(env: LocalExecutionEnvironment) -> None:
    pids: list[int] = []
    seen = asyncio.Event()

    def on_output(stream: str, text: str) -> None:
        pids.append(int(text.split()[0]))
        seen.set()

    task = asyncio.create_task(
        env.exec_command("echo $$; sleep 100 & sleep 100", timeout_ms=60_000, on_output=on_output)
    )
    await asyncio.wait_for(seen.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):
        if not live_group_members(pids[0]):
            break
        await asyncio.sleep(0.02)
    assert live_group_members(pids[0]) == []


async def test_output_streams_while_the_command_runs(env: LocalExecutionEnvironment, tmp_path: Path) -> None:
    # The command waits for a file that only the callback creates: it can finish only if the
    # callback saw "ready" while the command was still running.
    received: list[tuple[str, str]] = []

    def on_output(stream: str, text: str) -> None:
        received.append((stream, text))
        if "ready" in text:
            (tmp_path / "go").touch()

    result = await env.exec_command(
        "echo ready; while [ ! -f go ]; do sleep 0.01; done; echo done; echo oops >&2",
        timeout_ms=10_000,
        on_output=on_output,
    )
    assert not result.timed_out
    assert "".join(t for s, t in received if s == "stdout") == "ready\ndone\n"
    assert "".join(t for s, t in received if s == "stderr") == "oops\n"
    assert result.stdout == "ready\ndone\n"


async def test_utf8_split_across_reads_is_decoded_whole(env: LocalExecutionEnvironment) -> None:
    chunks: list[str] = []
    result = await env.exec_command(
        r"printf '\xc3'; sleep 0.2; printf '\xa9t\xc3\xa9\n'", on_output=lambda s, t: chunks.append(t)
    )
    assert "".join(chunks) == "\u00e9t\u00e9\n"
    assert "\ufffd" not in "".join(chunks)
    assert result.stdout == "\u00e9t\u00e9\n"


async def test_failing_callback_does_not_lose_output(env: LocalExecutionEnvironment) -> None:
    def on_output(stream: str, text: str) -> None:
        raise RuntimeError("observer bug")

    result = await env.exec_command("echo one; sleep 0.1; echo two", on_output=on_output)
    assert result.stdout == "one\ntwo\n"


async def test_huge_output_is_bounded_in_memory_and_spilled(tmp_path: Path) -> None:
    cap = 1024 * 1024
    env = LocalExecutionEnvironment(tmp_path, output_memory_cap=cap)
    size = 50_000_000
    result = await env.exec_command(f"yes 0123456789 | head -c {size}", timeout_ms=60_000)
    assert result.exit_code == 0
    assert result.total_bytes == size
    assert len(result.stdout.encode()) < cap + 1000
    assert result.stdout.startswith("0123456789\n0123456789\n")
    assert "bytes of stdout omitted" in result.stdout
    assert result.full_output_path is not None
    assert result.full_output_path in result.stdout
    spilled = result.full_output_path
    assert file_size(spilled) == size
    # The spill file holds exactly what the command printed.
    line = b"0123456789\n"
    expected = hashlib.sha256()
    whole, rest = divmod(size, len(line))
    block = line * 10_000
    for _ in range(whole // 10_000):
        expected.update(block)
    expected.update(line * (whole % 10_000) + line[:rest])
    actual = hashlib.sha256()
    for chunk in read_chunks(spilled):
        actual.update(chunk)
    assert actual.hexdigest() == expected.hexdigest()
    # The tail of the in-memory text is the end of the output.
    assert result.stdout.endswith((line * 3 + line[:rest]).decode()[-20:])
    await env.cleanup()
    assert file_size(spilled) is None


async def test_spill_file_keeps_both_streams(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path, output_memory_cap=64 * 1024)
    result = await env.exec_command(
        "head -c 300000 /dev/zero | tr '\\0' o; head -c 200000 /dev/zero | tr '\\0' e >&2", timeout_ms=30_000
    )
    assert result.total_bytes == 500_000
    assert result.full_output_path is not None
    data = b"".join(read_chunks(result.full_output_path))
    assert data.count(b"o") == 300_000 and data.count(b"e") == 200_000
    assert set(result.stdout.split("\n\n[")[0]) == {"o"}
    assert result.stderr.startswith("eeee") and "bytes of stderr omitted" in result.stderr
    assert len(result.stdout) + len(result.stderr) < 64 * 1024 + 2000


async def test_small_output_under_cap_is_complete(tmp_path: Path) -> None:
    env = LocalExecutionEnvironment(tmp_path, output_memory_cap=64 * 1024)
    result = await env.exec_command("seq 1 1000")
    assert result.full_output_path is None
    assert result.stdout == "".join(f"{i}\n" for i in range(1, 1001))


async def test_concurrent_commands_are_independent(env: LocalExecutionEnvironment) -> None:
    results = await asyncio.gather(*(env.exec_command(f"sleep 0.1; echo {i}") for i in range(5)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(5)]


def test_platform_metadata(env: LocalExecutionEnvironment) -> None:
    assert env.platform() in ("linux", "darwin")
    assert env.os_version()
    assert os.path.isabs(env.working_directory())

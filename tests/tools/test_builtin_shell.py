"""shell and shell_command with real processes: output, exit codes, timeouts, streaming, spills."""

from __future__ import annotations

from pathlib import Path

from ra.agent.config import SessionConfig
from ra.env import ReadOnlyExecutionEnvironment
from ra.tools.builtin import shell_command_tool, shell_tool

from .builtin_support import Runner, local_env


async def test_output_exit_code_and_duration(tmp_path: Path) -> None:
    run = Runner(shell_tool(), local_env(tmp_path), SessionConfig())
    out = await run(command="echo out; echo err >&2", description="say things")
    assert not out.is_error
    lines = out.content.splitlines()
    assert lines[0] == "Exit code: 0"
    assert lines[1].startswith("Duration: ") and lines[1].endswith(" ms")
    assert lines[2:] == ["Output:", "out", "err"]
    assert out.metadata["exit_code"] == 0 and out.metadata["description"] == "say things"
    assert out.metadata["timeout_ms"] == 10_000  # the session's default


async def test_nonzero_exit_is_an_error_result_with_its_output(tmp_path: Path) -> None:
    run = Runner(shell_tool(), local_env(tmp_path), SessionConfig())
    out = await run(command="echo partial; exit 7")
    assert out.is_error
    assert out.content.startswith("Exit code: 7\n") and out.content.endswith("Output:\npartial")
    out = await run(command="definitely-not-a-command-xyz")
    assert out.is_error and "Exit code: 127" in out.content and "not found" in out.content
    out = await run(command="true")
    assert out.content.endswith("Output: (none)")


async def test_timeout_from_the_call(tmp_path: Path) -> None:
    run = Runner(shell_tool(), local_env(tmp_path), SessionConfig())
    out = await run(command="echo started; sleep 5; echo never", timeout_ms=300)
    assert out.is_error and out.metadata["timed_out"]
    assert out.content.startswith("Exit code: ") and "(timed out after 300 ms)" in out.content
    assert "started" in out.content and "never" not in out.content
    assert "[ERROR: Command timed out after 300ms. Partial output is shown above." in out.content
    assert "setting the timeout_ms parameter.]" in out.content


async def test_default_timeout_comes_from_the_session_config(tmp_path: Path) -> None:
    config = SessionConfig(default_command_timeout_ms=250)
    run = Runner(shell_tool(), local_env(tmp_path), config)
    out = await run(command="sleep 5")
    assert out.metadata["timed_out"] and out.metadata["timeout_ms"] == 250


async def test_factory_default_overrides_the_session_default(tmp_path: Path) -> None:
    config = SessionConfig(default_command_timeout_ms=60_000)
    run = Runner(shell_tool(default_timeout_ms=200), local_env(tmp_path), config)
    out = await run(command="sleep 5")
    assert out.metadata["timed_out"] and out.metadata["timeout_ms"] == 200
    # ...but the model can still ask for its own.
    out = await run(command="echo quick", timeout_ms=5_000)
    assert out.metadata["timeout_ms"] == 5_000 and not out.is_error


async def test_per_call_timeout_is_capped_at_the_session_maximum(tmp_path: Path) -> None:
    config = SessionConfig(default_command_timeout_ms=100, max_command_timeout_ms=300)
    run = Runner(shell_tool(), local_env(tmp_path), config)
    out = await run(command="sleep 5", timeout_ms=100_000)
    assert out.metadata["timeout_ms"] == 300 and out.metadata["timed_out"]
    assert "[timeout_ms 100000 is above the maximum of 300 ms; 300 ms was used.]" in out.content
    # A factory default above the maximum is capped too, silently (the model asked for nothing).
    run = Runner(shell_tool(default_timeout_ms=120_000), local_env(tmp_path), config)
    out = await run(command="echo ok")
    assert out.metadata["timeout_ms"] == 300 and "maximum" not in out.content


async def test_output_streams_as_deltas(tmp_path: Path) -> None:
    run = Runner(shell_tool(), local_env(tmp_path), SessionConfig())
    out = await run(command="echo one; sleep 0.05; echo two >&2; sleep 0.05; echo three")
    streamed = {
        stream: "".join(chunk for s, chunk in run.sink.deltas if s == stream) for stream in ("stdout", "stderr")
    }
    assert streamed == {"stdout": "one\nthree\n", "stderr": "two\n"}
    assert "one\nthree\ntwo" in out.content


async def test_workdir(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    run = Runner(shell_tool(), local_env(tmp_path), SessionConfig())
    out = await run(command="pwd", workdir="sub")
    assert out.content.endswith(str(tmp_path / "sub"))
    out = await run(command="pwd", workdir="missing")
    assert out.is_error and "Cannot run the command" in out.content and "workdir" in out.content


async def test_validation_errors(tmp_path: Path) -> None:
    run = Runner(shell_tool(), local_env(tmp_path), SessionConfig())
    out = await run(command="true", timeout_ms=0)
    assert out.is_error and "timeout_ms" in out.content
    out = await run(command="   ")
    assert out.is_error and "command is empty" in out.content
    out = await run()
    assert out.is_error and "missing required field 'command'" in out.content


async def test_spilled_output_names_the_file(tmp_path: Path) -> None:
    env = local_env(tmp_path, output_memory_cap=2048)
    run = Runner(shell_tool(), env, SessionConfig())
    out = await run(command="for i in $(seq 1 2000); do echo line-$i; done")
    path = out.metadata["full_output_path"]
    assert path and f"the full output is in {path}" in out.content
    with open(path, encoding="utf-8") as spilled:
        assert spilled.read().count("line-") == 2000
    await env.cleanup()


async def test_shell_works_through_wrappers(tmp_path: Path) -> None:
    run = Runner(shell_tool(), ReadOnlyExecutionEnvironment(local_env(tmp_path)), SessionConfig())
    out = await run(command="echo wrapped")
    assert out.content.endswith("Output:\nwrapped")


async def test_tool_name_and_schema() -> None:
    tool = shell_tool(name="bash", default_timeout_ms=120_000)
    assert tool.name == "bash"
    props = tool.definition.parameters["properties"]
    assert set(props) == {"command", "timeout_ms", "description", "workdir"}
    assert props["timeout_ms"]["minimum"] == 1
    assert "120000 ms" in tool.definition.description


# -- shell_command (ra-spec) ---------------------------------------------------------------------


async def test_shell_command_bounds_output_with_max_output_chars(tmp_path: Path) -> None:
    tool = shell_command_tool()
    assert set(tool.definition.parameters["properties"]) == {"command", "workdir", "timeout_ms", "max_output_chars"}
    run = Runner(tool, local_env(tmp_path), SessionConfig())
    out = await run(command="printf 'A%.0s' $(seq 1 500); printf 'Z%.0s' $(seq 1 500)", max_output_chars=100)
    assert "Tool output was truncated" in out.content
    assert "A" * 50 in out.content and "Z" * 50 in out.content and "A" * 51 not in out.content
    out = await run(command="echo small", max_output_chars=1000, workdir=".")
    assert out.content.endswith("Output:\nsmall") and not out.is_error
    out = await run(command="echo x", max_output_chars=0)
    assert out.is_error and "max_output_chars" in out.content


async def test_max_output_chars_cuts_only_the_models_copy(tmp_path: Path) -> None:
    """The host (TOOL_CALL_END, the trajectory) gets the whole output, marked truncated; only what
    the model reads is cut to max_output_chars."""
    run = Runner(shell_command_tool(), local_env(tmp_path), SessionConfig())
    out = await run(command="printf 'A%.0s' $(seq 1 500); printf 'Z%.0s' $(seq 1 500)", max_output_chars=100)
    assert "A" * 500 + "Z" * 500 in out.full_output and "truncated" not in out.full_output
    assert "A" * 51 not in out.content and out.truncated
    ended = run.sink.ended[-1]
    assert ended.full_output == out.full_output and ended.truncated


async def test_shell_command_gets_shell_truncation_limits(tmp_path: Path) -> None:
    run = Runner(shell_command_tool(), local_env(tmp_path), SessionConfig())
    out = await run(command="seq 1 1000")
    assert "lines omitted" in out.content  # 256-line limit like shell
    assert out.full_output.count("\n") > 1000

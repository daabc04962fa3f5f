"""The project's import graph, read from the sources with ``ast``: circles, upward imports
(a lower part importing a higher one) and deferred imports (inside a function or under
``TYPE_CHECKING``), counted. ``python scripts/import_graph.py`` prints them."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("data", "crawler", "model", "serve", "bench")
# A part may import only from parts earlier in this list (the crawler and the data stage sit
# below the model, the model below the service).
ORDER = {"data": 0, "crawler": 1, "model": 1, "serve": 2, "bench": 3}


def _may_import(a: str, b: str) -> bool:
    top_a, top_b = a.split(".")[0], b.split(".")[0]
    return top_a == top_b or ORDER[top_b] < ORDER[top_a]


@dataclass
class Graph:
    edges: dict[str, set[str]] = field(default_factory=dict)  # module -> modules, imported at the top
    deferred: list[tuple[str, str, str]] = field(default_factory=list)  # (module, imported, where)

    def all_edges(self) -> dict[str, set[str]]:
        out = {k: set(v) for k, v in self.edges.items()}
        for a, b, _ in self.deferred:
            out.setdefault(a, set()).add(b)
        return out

    def circles(self) -> list[list[str]]:
        """Groups of modules that reach each other (deferred imports included)."""
        edges, index, low, stack, on, found = self.all_edges(), {}, {}, [], set(), []

        def visit(v: str) -> None:
            index[v] = low[v] = len(index)
            stack.append(v)
            on.add(v)
            for w in edges.get(v, ()):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    found.append(sorted(group))

        for v in list(edges):
            if v not in index:
                visit(v)
        return found

    def upward(self) -> list[tuple[str, str]]:
        """Imports of a higher layer, or of a sibling on the same level (the crawler and the
        model both stand on data/ alone)."""
        return sorted((a, b) for a, bs in self.all_edges().items() for b in bs if not _may_import(a, b))


def modules(root: Path) -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def read_graph(root: Path) -> Graph:
    mods, graph = modules(root), Graph()

    def resolve(name: str) -> str:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)}
        typing_only = {
            id(s)
            for n in ast.walk(tree)
            if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
            for s in ast.walk(n)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for target in {resolve(t) for t in targets} - {"", name}:
                if id(node) in top:
                    graph.edges.setdefault(name, set()).add(target)
                else:
                    where = "TYPE_CHECKING" if id(node) in typing_only else "function"
                    graph.deferred.append((name, target, where))
    return graph


def main() -> int:
    graph = read_graph(Path(__file__).resolve().parent.parent)
    circles, upward = graph.circles(), graph.upward()
    print(f"import circles: {len(circles)}")
    for group in circles:
        print("  " + " <-> ".join(group))
    print(f"upward imports: {len(upward)}")
    for a, b in upward:
        print(f"  {a} -> {b}")
    for package in PACKAGES:
        mine = [d for d in graph.deferred if d[0].split(".")[0] == package]
        print(f"deferred project imports in {package}/: {len(mine)}")
        for a, b, where in mine:
            print(f"  {a} -> {b} ({where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

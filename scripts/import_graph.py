"""The project's import graph, read from the sources with ``ast``: circles, upward imports
(a lower part or layer importing a higher one) and deferred imports (inside a function or
under ``TYPE_CHECKING``), counted. ``python scripts/import_graph.py`` prints them.

Two orders are checked. Between the project's parts: data/ at the bottom, the crawler and
the model on it, the in-process service and the command line (duilian/) on the model, the
site (serve/) on that, the benchmarks on top. Inside model/, its layers
(docs/ARCHITECTURE.md, "Model layers", ``MODEL_LAYERS``): ``model.spec`` at the bottom,
``model.net`` and ``model.decoding`` on it (siblings: neither imports the other),
``model.training`` and ``model.store`` on those, ``model.export`` on them, ``model.release`` on
all, and the command-line entry modules (``model.train``, ``model.evaluate``...) on top. And
which parts import PyTorch (``PYTORCH``): one that does not never imports one that does.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("data", "crawler", "model", "duilian", "serve", "bench")
# A part may import only from parts earlier in this list (the crawler and the data stage sit
# below the model, the model below the in-process service and its command line (duilian/),
# that below the site (serve/)).
ORDER = {"data": 0, "crawler": 1, "model": 1, "duilian": 2, "serve": 3, "bench": 4}


# model/'s layers; a module of model/ outside them (an entry module) sits above them all
MODEL_LAYERS = {
    "model.spec": 0,  # what the nets and the engines agree on: configuration, capabilities
    "model.net": 1,  # the PyTorch modules
    "model.decoding": 1,  # the search, on ONNX Runtime and numpy (never imports model.net)
    "model.training": 2,  # on model.net
    "model.store": 2,  # reading a bundle, on model.decoding's tables
    "model.export": 3,  # PyTorch models to and from ONNX graphs, engines and bundle files
    "model.release": 4,  # evaluation, cards, blind sheets, writing and finishing bundles
}
ENTRY = 5
# The deferred imports of model/ that are there for a reason other than a circle, each with it.
ALLOWED_DEFERRED = {
    ("model.train", "model.release.finish"): "the release steps need pypinyin and pyahocorasick, "
    "which the lent GPU machine's image lacks; there model.train runs with --no-eval --no-export",
    ("model.ship", "model.release.finish"): "likewise: `model.ship pack` runs on the device image, "
    "`model.ship finish` here",
}

# PyTorch on one side (docs/ARCHITECTURE.md, "PyTorch on one side"): whether each part imports
# it. A part that does not never imports PyTorch nor a part that does, but for the deferred
# imports listed in TORCH_ON_DEMAND.
PYTORCH = {
    "data": False,
    "crawler": False,
    "model.spec": False,
    "model.net": True,
    "model.decoding": False,
    "model.training": True,
    "model.store": False,
    "model.export": True,
    "model.release": True,
    "model": True,  # the entry modules (python -m model.train, model.bundle ...)
    "duilian": False,
    "serve": False,
    "bench": True,
}
TORCH_PACKAGES = ("torch", "safetensors.torch")
TORCH_ON_DEMAND = {
    ("duilian.engine", "model.export.models"): "a decoder whose graphs are not cached yet: its "
    "models are read into PyTorch and their graphs exported, once per model and machine",
}


def part(module: str) -> str:
    """The key of ``PYTORCH`` a project module belongs to (``model.store``, ``duilian`` ...)."""
    top = module.split(".")[0]
    return model_layer(module) if top == "model" else top


def model_layer(module: str) -> str:
    """The layer of a module of model/ (``model.net``...), or ``model`` for the entry modules."""
    layer = ".".join(module.split(".")[:2])
    return layer if layer in MODEL_LAYERS else "model"


def _rank(layer: str) -> int:
    return MODEL_LAYERS.get(layer, ENTRY)


def _may_import(a: str, b: str) -> bool:
    top_a, top_b = a.split(".")[0], b.split(".")[0]
    if top_a != top_b:
        return ORDER[top_b] < ORDER[top_a]
    if top_a != "model":
        return True
    la, lb = model_layer(a), model_layer(b)
    return la == lb or _rank(lb) < _rank(la)


@dataclass
class Graph:
    edges: dict[str, set[str]] = field(default_factory=dict)  # module -> modules, imported at the top
    deferred: list[tuple[str, str, str]] = field(default_factory=list)  # (module, imported, where)
    external: list[tuple[str, str, str]] = field(default_factory=list)  # the same, other packages

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

    def deferred_in(self, package: str) -> list[tuple[str, str, str]]:
        return [d for d in self.deferred if d[0].split(".")[0] == package]

    def unjustified_deferred(self, package: str = "model") -> list[tuple[str, str, str]]:
        """Deferred imports of ``package`` that ALLOWED_DEFERRED does not explain."""
        return [d for d in self.deferred_in(package) if (d[0], d[1]) not in ALLOWED_DEFERRED]

    def torch_crossings(self) -> list[tuple[str, str]]:
        """(module, import) where a part without PyTorch (``PYTORCH``) imports PyTorch or a
        part with it, at the top or in a function (not for type checking), less
        ``TORCH_ON_DEMAND``."""
        found = set()
        imports = [(a, b, "top") for a, bs in self.edges.items() for b in bs] + self.deferred + self.external
        for a, b, where in imports:
            if where == "TYPE_CHECKING" or PYTORCH[part(a)] or (a, b) in TORCH_ON_DEMAND:
                continue
            outside = b.split(".")[0] not in PACKAGES
            torch = any(b == t or b.startswith(t + ".") for t in TORCH_PACKAGES)
            if (outside and torch) or (not outside and PYTORCH[part(b)]):
                found.add((a, b))
        return sorted(found)

    def upward(self) -> list[tuple[str, str]]:
        """Imports of a higher part or layer, or of a sibling on the same level (the crawler
        and the model both stand on data/ alone; the training and decoding layers both on
        model.net)."""
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
            where = "top" if id(node) in top else "TYPE_CHECKING" if id(node) in typing_only else "function"
            graph.external += [(name, t, where) for t in targets if t.split(".")[0] not in PACKAGES]
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
        mine = graph.deferred_in(package)
        print(f"deferred project imports in {package}/: {len(mine)}")
        for a, b, where in mine:
            why = ALLOWED_DEFERRED.get((a, b)) if package == "model" else None
            print(f"  {a} -> {b} ({where})" + (f": {why}" if why else ""))
    print(f"deferred imports in model/ without a listed reason: {len(graph.unjustified_deferred())}")
    crossings = graph.torch_crossings()
    print(f"imports of PyTorch, or of a part with it, from a part without it: {len(crossings)}")
    for a, b in crossings:
        print(f"  {a} -> {b}")
    layers: dict[tuple[str, str], int] = {}
    for a, bs in graph.edges.items():
        for b in bs:
            if a.startswith("model.") and b.startswith("model."):
                key = (model_layer(a), model_layer(b))
                layers[key] = layers.get(key, 0) + 1
    print("imports between model/'s layers (at the top of a module):")
    for (a, b), n in sorted(layers.items(), key=lambda kv: (-_rank(kv[0][0]), _rank(kv[0][1]))):
        if a != b:
            print(f"  {a} -> {b}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The project's import graph, read from the sources with ``ast``: circles, upward imports
(a lower part or layer importing a higher one) and deferred imports (inside a function or
under ``TYPE_CHECKING``), counted. ``python scripts/import_graph.py`` prints them.

Two orders are checked. Between the project's parts: data/ at the bottom, the crawler and
the model on it, the in-process service and the command line (duilian/) on the model, the
site (serve/) on that, the benchmarks on top. Inside model/, its layers
(docs/ARCHITECTURE.md, "Model layers"): ``model.net`` at the bottom, ``model.training`` and
``model.decoding`` on it (siblings: neither imports the other), ``model.release`` on both,
and the command-line entry modules (``model.train``, ``model.evaluate``...) on top.
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
MODEL_LAYERS = {"model.net": 0, "model.training": 1, "model.decoding": 1, "model.release": 2}
ENTRY = 3
# The deferred imports of model/ that are there for a reason other than a circle, each with it.
ALLOWED_DEFERRED = {
    ("model.train", "model.release.finish"): "the release steps need pypinyin and pyahocorasick, "
    "which the lent GPU machine's image lacks; there model.train runs with --no-eval --no-export",
    ("model.ship", "model.release.finish"): "likewise: `model.ship pack` runs on the device image, "
    "`model.ship finish` here",
}

# Modules that import PyTorch, and the modules on the serving path that import them only where
# a model is read, written or exported (inside a function, or for type checking): a decoder on
# cached ONNX graphs, the command line's and a decode worker's, imports no PyTorch
# (docs/ARCHITECTURE.md, "Decoding").
TORCH_MODULES = {
    "model.net.checkpoint",
    "model.net.scorer",
    "model.net.tagger",
    "model.net.transformer",
    "model.decoding.quantize",
    "model.decoding.torch_engine",
    "model.decoding.onnx_export",
    "model.decoding.onnx_templates",
    "model.release.scorer",
}
TORCH_FREE = {
    "model.release.weights": "reads configurations and arrays; builds a model only when asked to",
    "model.release.bundle": "reads a bundle's other files; its models on first use",
    "model.decoding.decoder": "runs ONNX engines; names PyTorch's model classes only for type checking",
    "model.decoding.engines": "runs ONNX engines; wraps or copies a PyTorch model when given one",
    "model.decoding.onnx_engine": "runs cached graphs (onnx_graphs); exports (onnx_export) only on a miss",
    "model.decoding.reranking": "runs the scorer's cached graph; exports (onnx_export) only on a miss",
}


def torch_deferred(item: tuple[str, str, str]) -> bool:
    """Whether a deferred import is a serving module's import of PyTorch (``TORCH_FREE``)."""
    return item[0] in TORCH_FREE and item[1] in TORCH_MODULES


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
        """Deferred imports of ``package`` that ALLOWED_DEFERRED or TORCH_FREE does not explain."""
        return [
            d
            for d in self.deferred_in(package)
            if (d[0], d[1]) not in ALLOWED_DEFERRED and not torch_deferred(d)
        ]

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

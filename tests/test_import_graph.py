"""The import rule, read from the sources: the data stage and the crawler never import the
model or the service (the rule checks they share with the decoder live in data/); inside
model/, a layer imports only the layers under it (net < training, decoding < release <
the entry modules), with no circle and no deferred import but the listed ones."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
assert spec is not None and spec.loader is not None
import_graph = importlib.util.module_from_spec(spec)
sys.modules["import_graph"] = import_graph
spec.loader.exec_module(import_graph)


GRAPH = import_graph.read_graph(ROOT)


def test_no_upward_imports() -> None:
    assert GRAPH.upward() == []


def test_no_import_circles() -> None:
    assert GRAPH.circles() == []


def test_model_defers_no_import_but_the_listed_ones() -> None:
    assert GRAPH.unjustified_deferred("model") == []
    deferred = GRAPH.deferred_in("model")
    torch = [d for d in deferred if import_graph.torch_deferred(d)]
    assert len(deferred) - len(torch) == len(import_graph.ALLOWED_DEFERRED) == 2
    # every serving module listed defers PyTorch somewhere (no stale entry)
    assert {d[0] for d in torch} == set(import_graph.TORCH_FREE)


def test_every_module_of_model_is_in_a_layer_or_an_entry() -> None:
    entries = {
        "model",
        "model.train",
        "model.evaluate",
        "model.card",
        "model.ship",
        "model.blind",
        "model.bundle",
        "model.rerank",
    }
    modules = {m for m in import_graph.modules(ROOT) if m.split(".")[0] == "model"}
    assert {m for m in modules if import_graph.model_layer(m) == "model"} == entries


def test_model_layers_import_only_downward() -> None:
    edges = {
        "model.net.a": {"model.training.b", "data.vocab"},  # up
        "model.training.b": {"model.decoding.c", "model.net.a"},  # a sibling
        "model.decoding.c": {"model.release.d"},  # up
        "model.release.d": {"model.net.a", "model.training.b", "model.decoding.c"},
        "model.train": {"model.release.d", "model.net.a"},
    }
    graph = import_graph.Graph(edges=edges)
    assert graph.upward() == [
        ("model.decoding.c", "model.release.d"),
        ("model.net.a", "model.training.b"),
        ("model.training.b", "model.decoding.c"),
    ]


def test_a_deferred_import_not_listed_is_counted() -> None:
    graph = import_graph.Graph(
        deferred=[
            ("model.train", "model.release.finish", "function"),
            ("model.release.x", "model.net.y", "function"),
        ]
    )
    assert graph.unjustified_deferred() == [("model.release.x", "model.net.y", "function")]


def test_the_graph_finds_a_circle() -> None:
    graph = import_graph.Graph(edges={"model.a": {"model.b"}}, deferred=[("model.b", "model.a", "function")])
    assert graph.circles() == [["model.a", "model.b"]]
    assert graph.upward() == []


def test_a_sibling_import_is_upward() -> None:
    edges = {"crawler.extract": {"model.decoding.decoder", "data.rules"}, "model.x": {"data.a"}}
    graph = import_graph.Graph(edges=edges)
    assert graph.upward() == [("crawler.extract", "model.decoding.decoder")]

"""The import rule, read from the sources: the data stage and the crawler never import the
model or the service (the rule checks they share with the decoder live in data/)."""

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


def test_no_upward_imports() -> None:
    assert import_graph.read_graph(ROOT).upward() == []


def test_the_graph_finds_a_circle() -> None:
    graph = import_graph.Graph(edges={"model.a": {"model.b"}}, deferred=[("model.b", "model.a", "function")])
    assert graph.circles() == [["model.a", "model.b"]]
    assert graph.upward() == []


def test_a_sibling_import_is_upward() -> None:
    edges = {"crawler.extract": {"model.decode", "data.rules"}, "model.x": {"data.a"}}
    graph = import_graph.Graph(edges=edges)
    assert graph.upward() == [("crawler.extract", "model.decode")]

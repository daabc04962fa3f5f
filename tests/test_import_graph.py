"""The import rule, read from the sources: the data stage and the crawler never import the
model or the service (the rule checks they share with the decoder live in data/); inside
model/, a layer imports only the layers under it (scripts/import_graph.py's MODEL_LAYERS),
with no circle and no deferred import but the listed ones; and the parts that serve never
import PyTorch (``PYTORCH``)."""

from __future__ import annotations

import importlib.util
import subprocess
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
    assert len(GRAPH.deferred_in("model")) == len(import_graph.ALLOWED_DEFERRED) == 2


def test_pytorch_stays_on_its_side() -> None:
    """Each part says whether it imports PyTorch (``PYTORCH``, a line a part); one that does
    not imports neither PyTorch nor a part that does, but where TORCH_ON_DEMAND says why."""
    parts = {import_graph.part(m) for m in import_graph.modules(ROOT)}
    assert parts == set(import_graph.PYTORCH)
    assert GRAPH.torch_crossings() == []
    deferred = {(a, b) for a, b, where in GRAPH.deferred if where == "function"}
    assert set(import_graph.TORCH_ON_DEMAND) <= deferred  # no stale entry


def test_a_part_without_pytorch_that_imports_it_is_found() -> None:
    graph = import_graph.Graph(
        edges={"model.decoding.x": {"model.export.y", "model.store.z"}, "model.export.y": {"model.net.w"}},
        deferred=[("serve.a", "model.net.b", "function"), ("serve.c", "model.net.d", "TYPE_CHECKING")],
        external=[("model.store.z", "torch.nn", "top"), ("model.store.z", "torchaudio", "top")],
    )
    assert graph.torch_crossings() == [
        ("model.decoding.x", "model.export.y"),
        ("model.store.z", "torch.nn"),
        ("serve.a", "model.net.b"),
    ]


def test_the_parts_without_pytorch_import_without_it() -> None:
    """What the rule says, run: every module of the parts without PyTorch imported in a fresh
    process leaves ``torch`` out of ``sys.modules``."""
    names = sorted(m for m in import_graph.modules(ROOT) if not import_graph.PYTORCH[import_graph.part(m)])
    names = [m for m in names if not m.endswith("__main__") and m != "serve.worker_preload"]
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in names)
    code += "print(len(sys.modules), 'torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "False" and len(names) > 120


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
        "model.decoding.c": {"model.net.a", "model.release.d", "model.spec.e"},  # a sibling; up
        "model.store.s": {"model.training.b", "model.decoding.c"},  # a sibling
        "model.release.d": {"model.net.a", "model.training.b", "model.decoding.c", "model.export.x"},
        "model.train": {"model.release.d", "model.net.a"},
    }
    graph = import_graph.Graph(edges=edges)
    assert graph.upward() == [
        ("model.decoding.c", "model.net.a"),
        ("model.decoding.c", "model.release.d"),
        ("model.net.a", "model.training.b"),
        ("model.store.s", "model.training.b"),
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

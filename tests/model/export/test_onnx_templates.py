"""A graph is traced once a model's shape (its template) and finished with each model's weights:
the graph of a second model of the same shape is made without tracing, byte for byte the graph
its own trace gives; a template whose trace took a value from the other model's weights is
caught by its outputs and traced again."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch import Tensor, nn

from data.vocab import Vocab
from model.export import onnx_templates
from model.export.onnx_export import exporter, tagger_specs, transformer_specs
from model.net.checkpoint import build_model
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer, ModelConfig
from tests.model.decoding.fixtures import decode_vocab, reverse_of

SHAPE: dict[str, Any] = {"d_model": 32, "n_heads": 2, "n_enc_layers": 1, "n_dec_layers": 2, "d_ff": 64}


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    return decode_vocab(tmp_path_factory.mktemp("template_vocab"), pairs)


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The modules traced in the test (their class names), this process's templates forgotten
    first: the real tracing, counted."""
    monkeypatch.setattr(onnx_templates, "_KEPT", {})
    seen: list[str] = []
    real = onnx_templates.traced

    def counted(module: nn.Module, *args: Any) -> bytes:
        seen.append(type(module).__name__)
        return real(module, *args)

    monkeypatch.setattr(onnx_templates, "traced", counted)
    return seen


def model(vocab: Vocab, seed: int) -> CoupletTransformer:
    torch.manual_seed(seed)
    m = build_model(ModelConfig(vocab_size=len(vocab), **SHAPE))
    assert isinstance(m, CoupletTransformer)
    return m.eval()


def graphs(
    m: CoupletTransformer, folder: Path, names: tuple[str, ...] = ("encode", "step")
) -> dict[str, bytes]:
    specs = transformer_specs(m)
    return {name: exporter(specs[name], folder)() for name in names}


def run(graph: bytes, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    return list(ort.InferenceSession(graph, providers=["CPUExecutionProvider"]).run(None, feed))


@pytest.mark.slow
def test_a_second_model_of_a_shape_is_not_traced_and_gets_the_graph_its_own_trace_gives(
    vocab: Vocab, tmp_path: Path, traces: list[str]
) -> None:
    first, second = model(vocab, 11), model(vocab, 12)
    graphs(first, tmp_path / "shared")
    assert len(traces) == 2
    assert len(list((tmp_path / "shared").glob("template-*.onnx"))) == 2
    from_template = graphs(second, tmp_path / "shared")
    assert len(traces) == 2  # finished from the first model's templates
    onnx_templates._KEPT.clear()
    own = graphs(second, tmp_path / "alone")
    assert len(traces) == 4
    assert from_template == own
    src = np.array([vocab.encode("春风得意")], dtype=np.int64)
    (memory,) = run(from_template["encode"], {"src": src})
    with torch.no_grad():
        want = second.encode(torch.from_numpy(src)).numpy()
        other = first.encode(torch.from_numpy(src)).numpy()
    assert np.allclose(memory, want, atol=1e-5) and not np.allclose(memory, other, atol=1e-3)


@pytest.mark.slow
def test_the_template_is_read_from_the_folder_by_a_process_that_has_none(
    vocab: Vocab, tmp_path: Path, traces: list[str]
) -> None:
    cfg = ModelConfig(vocab_size=len(vocab), kind="tagger", **SHAPE)
    taggers = []
    for seed in (3, 4):
        torch.manual_seed(seed)
        t = build_model(cfg)
        assert isinstance(t, CoupletTagger)
        taggers.append(t.eval())
    made = exporter(tagger_specs(taggers[0])["tag"], tmp_path)()
    onnx_templates._KEPT.clear()  # as a new process: only the folder
    again = exporter(tagger_specs(taggers[1])["tag"], tmp_path)()
    assert len(traces) == 1
    assert made != again  # other weights, the same shape


class Folded(nn.Module):
    """A graph whose trace takes a table made from the weights as a constant (a tensor that is
    neither a parameter nor a buffer): a template traced from another module holds its table."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.lin = nn.Linear(4, 3)
        self.table = self.lin.weight.detach().sum(0) * 2  # not in the state: baked into the trace

    def forward(self, x: Tensor) -> Tensor:
        return self.lin(x * self.table)


def folded_graph(module: Folded, folder: Path) -> Callable[[], bytes]:
    x = torch.ones(2, 4)
    return exporter(lambda: (module, (x,), ["x"], ["y"], {"x": {0: "N"}}), folder)


@pytest.mark.slow
def test_a_template_that_took_a_value_from_other_weights_is_traced_again(
    tmp_path: Path, traces: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    one, two = Folded(1), Folded(2)
    folded_graph(one, tmp_path)()
    with caplog.at_level(logging.WARNING, logger=onnx_templates.__name__):
        graph = folded_graph(two, tmp_path)()
    assert len(traces) == 2
    assert "traced again" in caplog.text
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    (y,) = run(graph, {"x": x})
    with torch.no_grad():
        assert np.allclose(y, two(torch.from_numpy(x)).numpy(), atol=1e-5)


@pytest.mark.slow
def test_a_folder_that_cannot_be_written_only_is_not_used(tmp_path: Path, traces: list[str]) -> None:
    blocked = tmp_path / "a file"
    blocked.write_text("not a folder")
    lin = nn.Linear(3, 2).eval()
    graph = exporter(lambda: (lin, (torch.ones(2, 3),), ["x"], ["y"], {"x": {0: "N"}}), blocked / "cache")()
    x = np.ones((5, 3), dtype=np.float32)
    (y,) = run(graph, {"x": x})
    with torch.no_grad():
        assert np.allclose(y, lin(torch.from_numpy(x)).numpy(), atol=1e-6)
    assert traces == ["Linear"]


def test_a_setting_kept_outside_any_repr_makes_another_shape(vocab: Vocab) -> None:
    """Two encoders that differ only in their head count (kept as plain attributes, in no
    ``repr`` and no parameter's shape) are two shapes, not one."""
    keys = set()
    for heads in (2, 4):
        torch.manual_seed(1)
        m = build_model(ModelConfig(vocab_size=len(vocab), **{**SHAPE, "n_heads": heads}))
        assert isinstance(m, CoupletTransformer)
        keys.add(onnx_templates.template_key(*transformer_specs(m.eval())["encode"]()))
    assert len(keys) == 2


@pytest.mark.slow
def test_a_damaged_template_is_traced_again(tmp_path: Path, traces: list[str]) -> None:
    lin = nn.Linear(3, 2).eval()
    made = exporter(lambda: (lin, (torch.ones(2, 3),), ["x"], ["y"], {"x": {0: "N"}}), tmp_path)
    first = made()
    (template,) = tmp_path.glob("template-*.onnx")
    template.write_bytes(b"not a graph")
    onnx_templates._KEPT.clear()
    assert made() == first
    assert traces == ["Linear", "Linear"]


@pytest.mark.slow
def test_a_reverse_model_takes_the_forward_models_templates(
    vocab: Vocab, tmp_path: Path, traces: list[str]
) -> None:
    """The direction is read by no computation of the net (``ModelConfig.UNTRACED``): a reverse
    model of the forward model's shape is finished from its templates, with its own weights."""
    forward = model(vocab, 11)
    backward = reverse_of(forward, seed=7, scale=0.2)
    graphs(forward, tmp_path, ("prepare",))  # a graph whose module holds the model's ``cfg``
    assert traces == ["_Prepare"]
    made = graphs(backward, tmp_path, ("prepare",))
    assert traces == ["_Prepare"]
    module, args, inputs, _, _ = transformer_specs(backward)["prepare"]()
    feed = {n: torch.randn(a.shape).numpy() for n, a in zip(inputs, args, strict=True)}
    got = run(made["prepare"], feed)
    with torch.no_grad():
        want = module(*(torch.from_numpy(feed[n]) for n in inputs))
        other = transformer_specs(forward)["prepare"]()[0](*(torch.from_numpy(feed[n]) for n in inputs))
    assert all(np.allclose(g, w.numpy(), atol=1e-5) for g, w in zip(got, want, strict=True))
    assert not all(np.allclose(g, o.numpy(), atol=1e-3) for g, o in zip(got, other, strict=True))


def test_no_computation_reads_an_untraced_setting() -> None:
    """What ``UNTRACED`` promises, kept: neither the nets nor the modules the graphs are traced
    from name the direction (the template check runs on example ids, so a branch on it that only
    some ids meet could pass the check)."""
    root = Path(__file__).resolve().parents[3]
    sources = [*(root / "model" / "net").glob("*.py"), root / "model" / "export" / "onnx_export.py"]
    for path in sources:
        if path.name == "config.py":  # where the field is declared
            continue
        text = path.read_text(encoding="utf-8")
        for name in (*ModelConfig.UNTRACED, "reverse"):  # the field, or the property read from it
            assert not re.search(rf"\b{name}\b", text), (path, name)

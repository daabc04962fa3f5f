"""The export of the models' inference graphs to ONNX, for model/decoding/onnx_engine.py.

The graphs are exported from the PyTorch modules with the ``torch.export``-based exporter
(several seconds a model's shape, traced once and finished with each model's weights:
model/export/onnx_templates.py; ``onnx_engine.GraphCache`` keeps the graphs between runs). The
export traces one path through the Python code, so the traced functions branch on nothing but
fixed settings. Only this module and the templates' import PyTorch: a process whose graphs are all
cached runs the engine without it.

Shapes: N requests, B beam rows, S source length, P decoded positions, L decoder layers,
H heads, dh head width, d model width, V vocabulary, M listed columns.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch
from torch import Tensor, nn

from model.decoding.graph_keys import traced_digest
from model.export import onnx_templates
from model.export.onnx_templates import Axes
from model.net.scorer import PairScorer
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer, EncoderLayer


def _dynamic_shapes(module: nn.Module, inputs: list[str], axes: Axes) -> tuple[Any, ...]:
    """``axes`` as ``torch.export`` takes them: one ``Dim`` per name, shared by every input
    whose dimension bears it (so the exporter knows those sizes are equal), shaped like the
    arguments of ``module.forward`` (its ``*args`` one tuple). Any dimension may be 0 (the empty
    KV cache of the first step)."""
    dims = {name: torch.export.Dim(name, min=0) for named in axes.values() for name in named.values()}
    specs = [{d: dims[name] for d, name in axes[i].items()} if i in axes else None for i in inputs]
    params = inspect.signature(module.forward).parameters.values()
    if not any(p.kind is p.VAR_POSITIONAL for p in params):
        return tuple(specs)
    fixed = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    return (*specs[:fixed], tuple(specs[fixed:]))


def _export(
    module: nn.Module,
    args: tuple[Tensor, ...],
    inputs: list[str],
    outputs: list[str],
    axes: Axes,
    templates: Path | None = None,
) -> bytes:
    """The ONNX graph of ``module(*args)`` with the named inputs and outputs, the dimensions
    ``axes`` names dynamic: traced once for the module's shape and finished with its weights
    (model/export/onnx_templates.py; ``templates``: the folder that keeps the traced programs)."""
    # one tensor object given for two inputs is taken for one input aliased twice (the graph
    # would read the first layer's cache for every layer): every input its own copy
    args = tuple(a.clone() for a in args)
    dynamic = _dynamic_shapes(module, inputs, axes)
    return onnx_templates.graph_of(module, args, inputs, outputs, axes, dynamic, templates)


def model_key(model: nn.Module) -> str:
    """A digest of everything an exported graph of an in-memory ``model`` depends on: its
    configuration and weights, the traced code, the exporter's and the runtime's versions
    (a few ms a model). A bundle's models are keyed by their files instead
    (``onnx_engine.files_key``), which needs no PyTorch."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr(getattr(model, "cfg", None)).encode())
    h.update(traced_digest().encode())
    for name, tensor in model.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


# ---- the modules exported ----------------------------------------------------------------


class _NormedStates(nn.Module):
    """The decoder's teacher-forced states, normalised (``dec_norm``): memory (N, S, d), src
    (N, S), tgt_in (N, T) -> (N, T, d), whose product with a row of the output layer is that
    token's logit (the fast mode's rescoring)."""

    def __init__(self, model: CoupletTransformer) -> None:
        super().__init__()
        self.m = model

    def forward(self, memory: Tensor, src: Tensor, tgt_in: Tensor) -> Tensor:
        return cast(Tensor, self.m.dec_norm(self.m.decode_states(memory, src, tgt_in)))


class _Encoder(nn.Module):
    """An encoder stack without a source mask, for unpadded sources: src (N, S) -> the
    normalised states (N, S, d), or with ``head`` its logits (N, S, V). The same function as
    ``CoupletTransformer.encode`` (with ``CoupletTagger.tag``'s head), written out for a
    source without padding: no mask, heads split by reshapes. Exported from the masked
    ``scaled_dot_product_attention``, the optimised int8 graphs had 262 nodes (the six-layer
    tagger) and 114 (the three-layer encoder); written out, 161 and 88, and a pass over a
    7-character line takes 1.37 instead of 1.71 ms and 0.51 instead of 0.60 ms on one thread.
    (The query and key-value projections stay apart: fused, their int8 weights would share
    one scale and the query's lose precision.)"""

    def __init__(
        self,
        embed: nn.Module,
        pos: nn.Module,
        stack: nn.ModuleList,
        norm: nn.Module,
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        attn = cast(EncoderLayer, stack[0]).attn
        self.embed, self.pos, self.layers, self.norm = embed, pos, stack, norm
        self.head = None if head is None else _Projection(head)
        self.h, self.dh = attn.h, attn.dh

    def forward(self, src: Tensor) -> Tensor:
        return self.stack(self.embed(src) + self.pos(torch.arange(src.size(1))))  # (N, S, d)

    def stack(self, x: Tensor) -> Tensor:
        """The embedded source (N, S, d) through the layers and the final norm (and head)."""
        n, s, _ = x.shape
        h, dh = self.h, self.dh
        for module in self.layers:
            layer = cast(EncoderLayer, module)
            y = layer.norm1(x)
            q = layer.attn.q(y).reshape(n, s, h, dh).transpose(1, 2)  # (N, H, S, dh)
            k, v = layer.attn.kv(y).reshape(n, s, 2, h, dh).unbind(2)  # (N, S, H, dh) each
            att = torch.softmax((q @ k.permute(0, 2, 3, 1)) * dh**-0.5, dim=-1)  # (N, H, S, S)
            x = x + layer.attn.out((att @ v.transpose(1, 2)).transpose(1, 2).reshape(n, s, h * dh))
            x = x + layer.ff(layer.norm2(x))
        x = self.norm(x)
        return x if self.head is None else self.head(x)


class _RegisteredEncoder(_Encoder):
    """``_Encoder`` of a model with registers (``ModelConfig.n_registers``): src (N, S) and
    register (N,), the register each line is written in (data.text.REGISTERS), whose learned
    vector is added to every source position as ``CoupletTransformer.encode`` adds it."""

    def __init__(self, model: CoupletTransformer) -> None:
        super().__init__(model.embed, model.src_pos, model.encoder, model.enc_norm)
        self.register_embed = cast(nn.Embedding, model.register_embed)

    def forward(self, src: Tensor, register: Tensor) -> Tensor:  # type: ignore[override]
        x = self.embed(src) + self.pos(torch.arange(src.size(1)))  # (N, S, d)
        return self.stack(x + self.register_embed(register)[:, None, :])


class _Projection(nn.Module):
    """A linear layer with its weight stored transposed, (d, V), for the exporter. A head tied
    to the embedding is exported as a product with the embedding's weight transposed inside
    the graph; the exporter's optimiser folds no constant that large (the tagger's 7,683 x 192),
    so the product's weight is no initializer and dynamic quantisation leaves it in fp32: 2.4
    of the tagger's 4.1 ms on one thread. A weight of its own, already transposed, is an
    initializer (one more copy in the graph, none in the bundle)."""

    def __init__(self, linear: nn.Module) -> None:
        super().__init__()
        lin = cast(nn.Linear, linear)
        self.weight_t = nn.Parameter(lin.weight.detach().t().contiguous(), requires_grad=False)
        self.bias = None if lin.bias is None else nn.Parameter(lin.bias.detach().clone(), requires_grad=False)

    def forward(self, x: Tensor) -> Tensor:
        y = x @ self.weight_t
        return y if self.bias is None else y + self.bias


class _Prepare(nn.Module):
    """memory (N, S, d) -> the aligned encoder state (N, S, d), then each decoder layer's
    cross-attention keys, transposed, (N, H, dh, S), then each layer's values (N, H, S, dh)."""

    def __init__(self, model: CoupletTransformer) -> None:
        super().__init__()
        self.m = model

    def forward(self, memory: Tensor) -> tuple[Tensor, ...]:
        kv = [layer.cross_attn.keys_values(memory) for layer in self.m.decoder_layers()]
        aligned = self.m.align(memory) if self.m.align is not None else torch.zeros_like(memory)
        return aligned, *(k.transpose(2, 3) for k, _ in kv), *(v for _, v in kv)


def _scaled_linear(parts: list[nn.Linear], scale: list[float]) -> nn.Linear:
    """One linear layer computing ``parts`` side by side, each output scaled."""
    weight = torch.cat([p.weight.detach() * s for p, s in zip(parts, scale, strict=True)])
    bias = torch.cat([cast(Tensor, p.bias).detach() * s for p, s in zip(parts, scale, strict=True)])
    fused = nn.Linear(weight.size(1), weight.size(0))
    with torch.no_grad():
        fused.weight.copy_(weight)
        fused.bias.copy_(bias)
    return fused


class _Step(nn.Module):
    """One decoder position for B rows: prev (B,) tokens, pos (1,), aligned (B, d), then
    per decoder layer the past self-attention keys, transposed, (B, H, dh, P), the past values
    (B, H, P, dh), the cross keys and the cross values from ``_Prepare`` -> the normalised
    state (B, d), then per layer the present keys (B, H, dh, P+1) and values (B, H, P+1, dh).
    (One input per layer and tensor: a stacked cache was split and stacked again at every
    step, copies that took about an eighth of a step of 112 rows, less of a smaller one;
    docs/EXPERIMENTS.md §10.)

    The same function as ``DecoderLayer.step``, written for one query so that the exported
    graph is small: the query, key and value projections in one product (the query scaled
    by 1/sqrt(dh) in its weights), heads split by reshapes alone, keys kept transposed."""

    def __init__(self, model: CoupletTransformer) -> None:
        super().__init__()
        self.m = model
        cfg = model.cfg
        self.h, self.dh, self.d = cfg.n_heads, cfg.d_model // cfg.n_heads, cfg.d_model
        scale = self.dh**-0.5
        layers = model.decoder_layers()
        self.qkv = nn.ModuleList(
            _scaled_linear([la.self_attn.q, la.self_attn.kv], [scale, 1.0]) for la in layers
        )
        self.cross_q = nn.ModuleList(_scaled_linear([la.cross_attn.q], [scale]) for la in layers)

    def forward(self, prev: Tensor, pos: Tensor, aligned: Tensor, *cache: Tensor) -> tuple[Tensor, ...]:
        m, h, dh, d = self.m, self.h, self.dh, self.d
        n = len(cache) // 4
        past_k, past_v, ck, cv = (cache[i * n : (i + 1) * n] for i in range(4))
        x = m.tgt_embed(prev) + m.tgt_pos(pos) + aligned  # (B, d)
        present_k, present_v = [], []
        # shapes by -1, never by B: no shape arithmetic in the graph
        for i, layer in enumerate(m.decoder_layers()):
            q, k, v = self.qkv[i](layer.norm1(x)).split(d, dim=-1)  # (B, d) each
            ks = torch.cat([past_k[i], k.reshape(-1, h, dh, 1)], 3)  # (B, H, dh, P+1)
            vs = torch.cat([past_v[i], v.reshape(-1, h, 1, dh)], 2)  # (B, H, P+1, dh)
            present_k.append(ks)
            present_v.append(vs)
            att = torch.softmax(q.reshape(-1, h, 1, dh) @ ks, dim=-1)  # (B, H, 1, P+1)
            x = x + layer.self_attn.out((att @ vs).reshape(-1, d))
            q = self.cross_q[i](layer.norm2(x))
            att = torch.softmax(q.reshape(-1, h, 1, dh) @ ck[i], dim=-1)  # (B, H, 1, S)
            x = x + layer.cross_attn.out((att @ cv[i]).reshape(-1, d))
            x = x + layer.ff(layer.norm3(x))
        return m.dec_norm(x), *present_k, *present_v


class _ScoredStep(_Step):
    """``_Step`` with the output layer of a shortlist: prev, pos, aligned, then the listed rows
    of the output layer, transposed, weight (N, d, M), and bias (N, 1, M) (-inf at a list's
    padding), then the cache -> log-probabilities (B, M) over each request's list, the rows
    of a request together (B = N * beams), then the present keys and values. What
    ``Shortlist.log_probs`` does after a step in three PyTorch calls, inside the graph."""

    def forward(self, prev: Tensor, pos: Tensor, aligned: Tensor, *rest: Tensor) -> tuple[Tensor, ...]:
        weight, bias, *cache = rest
        state, *present = super().forward(prev, pos, aligned, *cache)
        n, d, m = weight.shape
        logits = state.reshape(n, -1, d) @ weight + bias  # (N, beams, M)
        return torch.log_softmax(logits, dim=-1).reshape(-1, m), *present


# ---- what each graph is exported from ---------------------------------------------------------

GraphSpec = tuple[nn.Module, tuple[Tensor, ...], list[str], list[str], "Axes"]


def exporter(spec: Callable[[], GraphSpec], templates: Path | None = None) -> Callable[[], bytes]:
    """The export of a graph whose module, example arguments, input and output names and
    dynamic axes ``spec`` gives (built only when the graph is exported); ``templates``: the folder
    that keeps the traced programs (the graph cache's)."""
    return lambda: _export(*spec(), templates=templates)


def transformer_specs(model: CoupletTransformer) -> dict[str, Callable[[], GraphSpec]]:
    """The encoder-decoder's graphs (onnx_engine.TRANSFORMER_GRAPHS), each as what it is
    exported from."""
    model = model.eval()  # fp32 weights: the graphs take and give float32
    cfg = model.cfg
    h, dh, n_layers = cfg.n_heads, cfg.d_model // cfg.n_heads, cfg.n_dec_layers
    layers = range(n_layers)
    src = torch.full((2, 3), 5, dtype=torch.long)  # any ids: shapes are what the export records

    def memory() -> Tensor:
        with torch.no_grad():
            return cast(Tensor, model.encode(src))

    # B = 4 rows of N = 2 requests, P = 2 past positions: every dynamic size at least 2 and
    # the sizes that may differ different (the exporter would take a 1 for a constant)
    rows = torch.full((4,), 5, dtype=torch.long)
    key, value = torch.zeros(4, h, dh, 2), torch.zeros(4, h, 2, dh)
    cross_k, cross_v = torch.zeros(4, h, dh, 3), torch.zeros(4, h, 3, dh)
    cache = [key] * n_layers + [value] * n_layers + [cross_k] * n_layers + [cross_v] * n_layers
    cache_names = [f"{name}{i}" for name in ("past_k", "past_v", "ck", "cv") for i in layers]
    present = [*(f"k{i}" for i in layers), *(f"v{i}" for i in layers)]
    axes: Axes = {"prev": {0: "B"}, "aligned": {0: "B"}}
    for i in layers:
        axes |= {f"past_k{i}": {0: "B", 3: "P"}, f"past_v{i}": {0: "B", 2: "P"}}
        axes |= {f"ck{i}": {0: "B", 3: "S"}, f"cv{i}": {0: "B", 2: "S"}}
    listed = {"weight": {0: "N", 2: "M"}, "bias": {0: "N", 2: "M"}}
    step_args = (rows, torch.tensor([2]), torch.zeros(4, cfg.d_model))
    encoder: GraphSpec = (
        (_Encoder(model.embed, model.src_pos, model.encoder, model.enc_norm), (src,), ["src"], ["memory"], {})
        if model.register_embed is None
        else (_RegisteredEncoder(model), (src, torch.tensor([0, 1])), ["src", "register"], ["memory"], {})
    )
    encoder[4].update({"src": {0: "N", 1: "S"}, "register": {0: "N"}})
    return {
        "encode": lambda: encoder,
        "prepare": lambda: (
            _Prepare(model),
            (memory(),),
            ["memory"],
            ["aligned", *(f"ck{i}" for i in layers), *(f"cv{i}" for i in layers)],
            {"memory": {0: "N", 1: "S"}},
        ),
        "step": lambda: (
            _Step(model),
            (*step_args, *cache),
            ["prev", "pos", "aligned", *cache_names],
            ["state", *present],
            axes,
        ),
        "scored_step": lambda: (
            _ScoredStep(model),
            (*step_args, torch.zeros(2, cfg.d_model, 5), torch.zeros(2, 1, 5), *cache),
            ["prev", "pos", "aligned", "weight", "bias", *cache_names],
            ["logp", *present],
            axes | listed,
        ),
        "decode_states": lambda: (
            _NormedStates(model),
            (memory(), src, torch.full((2, 4), 5, dtype=torch.long)),
            ["memory", "src", "tgt_in"],
            ["states"],
            {"memory": {0: "N", 1: "S"}, "src": {0: "N", 1: "S"}, "tgt_in": {0: "N", 1: "T"}},
        ),
        "head": lambda: (
            _Projection(model.head),
            (torch.zeros(4, cfg.d_model),),
            ["state"],
            ["logits"],
            {"state": {0: "B"}},
        ),
    }


def tagger_specs(model: CoupletTagger) -> dict[str, Callable[[], GraphSpec]]:
    """The tagger's one graph (onnx_engine.TAGGER_GRAPHS): its pass, logits (N, S, V)."""
    model = model.eval()
    src = torch.full((2, 3), 5, dtype=torch.long)
    return {
        "tag": lambda: (
            _Encoder(model.embed, model.src_pos, model.encoder, model.enc_norm, model.head),
            (src,),
            ["src"],
            ["logits"],
            {"src": {0: "N", 1: "S"}},
        )
    }


class _Scorer(_Encoder):
    """The reranker's scorer for ONNX Runtime: upper, lower (B, S) -> scores (B,), as
    ``PairScorer.forward`` computes them for rows without padding (the candidates of one answer
    have one length; ``reranking.Reranker.scores`` calls it once per length). Each side's map of
    the shared table and its own small table are folded into one table of d numbers a character,
    and the layer is ``_Encoder``'s written-out stack: scores within 4e-6 of PyTorch's, about 15%
    sooner (docs/EXPERIMENTS.md §45)."""

    def __init__(self, scorer: PairScorer) -> None:
        r = scorer.upper_own.weight.shape[1]
        with torch.no_grad():
            own = scorer.own_up.weight  # (d, 2r): the upper side's columns, then the lower's
            upper = scorer.upper_map(scorer.embed.weight) + scorer.upper_own.weight @ own[:, :r].T
            lower = scorer.lower_map(scorer.embed.weight) + scorer.lower_own.weight @ own[:, r:].T
        super().__init__(nn.Embedding.from_pretrained(upper), scorer.src_pos, scorer.encoder, scorer.enc_norm)
        self.lower, self.out = nn.Embedding.from_pretrained(lower), scorer.out

    def forward(self, upper: Tensor, lower: Tensor) -> Tensor:  # type: ignore[override]
        x = self.embed(upper) + self.lower(lower) + self.pos(torch.arange(upper.size(1)))
        return cast(Tensor, self.out(self.stack(x).mean(1)).squeeze(-1))


def scorer_specs(model: PairScorer) -> dict[str, Callable[[], GraphSpec]]:
    """The reranker's scorer's one graph (reranking.SCORER_GRAPHS): upper, lower (B, S) -> scores
    (B,), for rows without padding (``_Scorer``)."""
    model = model.eval()
    upper, lower = torch.full((4, 3), 5, dtype=torch.long), torch.full((4, 3), 6, dtype=torch.long)
    axes: Axes = {"upper": {0: "B", 1: "S"}, "lower": {0: "B", 1: "S"}}
    return {"score": lambda: (_Scorer(model).eval(), (upper, lower), ["upper", "lower"], ["scores"], axes)}

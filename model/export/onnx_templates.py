"""A graph's traced ONNX program, kept and used again for every model of the same shape.

Tracing a module (``torch.export``, then the ONNX translation) takes seconds a graph and does not
depend on the weights: models of one shape (another seed, a later step, a fine-tune) trace to the
same program but for the values of its initializers, which the exporter names after the module's
parameters and buffers. So a graph is made in two parts:

- the *template*: the program as traced, before the optimiser, its initializers still named after
  the module's state (``traced``); kept in this process and, where there is a graph cache, beside
  it as ``template-<key>.onnx``, keyed by everything the trace depends on but the weights
  (``template_key``);
- the *finish*: this module's weights put into the template, then the optimiser (constant folding,
  fusions), as the exporter itself runs it after tracing (``finished``).

A template traced from another module is checked before its graph is given: run on arguments of
the example shapes (floats drawn at random), the graph must give what the module gives (a value
the trace had read from the other module's weights would differ), or this module is traced
afresh; so is a template file that cannot be read as a graph. The graph of a model is the same
whichever module of its shape was traced: the same operations on the same values.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir
import onnxruntime as ort
import torch
from torch import Tensor, nn

from data.files import atomic_file, held_lock
from model.decoding.graph_keys import OPSET, traced_digest

log = logging.getLogger(__name__)

Axes = dict[str, dict[int, str]]  # input name -> {dimension: its name}
_KEPT: dict[str, bytes] = {}  # this process's templates, by key (small ones: ``_KEEP_BYTES``)
_KEEP_BYTES = 16 << 20
# the exporter's loggers: about 100 INFO lines a graph, a warning per operator it lacks
_LOGGERS = ("torch.onnx", "onnxscript", "onnx_ir")


def template_key(
    module: nn.Module, args: tuple[Tensor, ...], inputs: list[str], outputs: list[str], axes: Axes
) -> str:
    """What a traced program depends on but the weights: the module's code and structure (its
    classes, their settings as ``repr`` gives them, each ``cfg`` less its ``UNTRACED`` fields, and
    every submodule's plain settings: a head count kept as ``self.h`` is in no ``repr``), the
    names, shapes and kinds of its state and which names share a tensor, the example arguments'
    shapes and kinds, the inputs, outputs and dynamic axes, the exporter's versions and the opset."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{traced_digest()};{OPSET};{type(module).__qualname__};{module!r};".encode())
    for name, sub in module.named_modules(remove_duplicate=False):
        plain = sorted(
            (k, v)
            for k, v in vars(sub).items()
            if isinstance(v, int | float | str | bool) and k != "training"
        )
        h.update(f"{name}:{type(sub).__qualname__}:{plain};".encode())
        if (cfg := getattr(sub, "cfg", None)) is not None:
            h.update(_settings(cfg).encode())
    first: dict[tuple[int, int], str] = {}
    for name, tensor in _state(module):
        shared = first.setdefault((tensor.data_ptr(), tensor.numel()), name)
        h.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}:{shared};".encode())
    for a in args:
        h.update(f"{a.dtype}:{tuple(a.shape)};".encode())
    h.update(f"{inputs};{outputs};{sorted((k, sorted(v.items())) for k, v in axes.items())}".encode())
    return h.hexdigest()


def _settings(cfg: object) -> str:
    """``cfg``'s ``repr``, less the fields it names as read by no computation (``UNTRACED``)."""
    untraced = getattr(cfg, "UNTRACED", ())
    if not untraced or not dataclasses.is_dataclass(cfg):
        return repr(cfg)
    kept = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in untraced}
    return f"{type(cfg).__qualname__}{kept!r}"


def _state(module: nn.Module) -> Iterator[tuple[str, Tensor]]:
    """Every parameter and buffer under each of its names (a tied table under both)."""
    yield from module.named_parameters(remove_duplicate=False)
    yield from module.named_buffers(remove_duplicate=False)


@contextmanager
def _quiet() -> Iterator[None]:
    """The exporter's and its optimiser's log lines and warnings silenced, no gradients recorded."""
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def traced(
    module: nn.Module, args: tuple[Tensor, ...], inputs: list[str], outputs: list[str], dynamic: Any
) -> bytes:
    """The template of ``module(*args)``: ``torch.export`` traces it (non-strict: the Python runs
    as it is, its tensor operations recorded; every dynamic dimension of ``args`` at least 2, since
    a size of 0 or 1 would be taken for a constant), then the ``torch.export``-based ONNX exporter
    translates the program, without its optimiser."""
    with _quiet():
        exported = torch.export.export(module.eval(), args, dynamic_shapes=dynamic, strict=False)
        program = torch.onnx.export(
            exported,
            input_names=inputs,
            output_names=outputs,
            opset_version=OPSET,
            dynamo=True,
            external_data=False,
            optimize=False,
            verbose=False,
        )
    if program is None:  # only the TorchScript exporter, writing to a file, returns None
        raise RuntimeError("the ONNX exporter gave no program")
    return bytes(program.model_proto.SerializeToString())


def finished(template: bytes, module: nn.Module) -> bytes:
    """The graph of ``module``: its weights in ``template``'s initializers of the same names, then
    the exporter's own optimiser (``ONNXProgram.optimize``: constant folding, fusions)."""
    program = torch.onnx.ONNXProgram(onnx_ir.from_proto(onnx.load_from_string(template)), None)
    named = program.model.graph.initializers
    with _quiet():
        program.apply_weights({name: t.detach() for name, t in _state(module) if name in named})
        program.optimize()
    return bytes(program.model_proto.SerializeToString())


def agrees(graph: bytes, module: nn.Module, args: tuple[Tensor, ...], inputs: list[str]) -> bool:
    """Whether ``graph`` on ONNX Runtime gives what ``module`` gives (to 1e-3) on ``args`` with
    every float argument drawn at random (seeded): the example arguments are mostly zeros, on
    which a wrong table or scale can give the right numbers. Ids are kept as they are (their
    valid range is the model's)."""
    draw = torch.Generator().manual_seed(0)
    args = tuple(torch.randn(a.shape, generator=draw) if a.is_floating_point() else a for a in args)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    got = session.run(None, {n: a.numpy() for n, a in zip(inputs, args, strict=True) if n in names})
    with torch.no_grad():
        out = module.eval()(*args)
    want = [out] if isinstance(out, Tensor) else list(out)
    return len(got) == len(want) and all(
        g.shape == w.shape and np.allclose(g, w.numpy(), rtol=1e-3, atol=1e-4, equal_nan=True)
        for g, w in zip(got, want, strict=True)
    )


def graph_of(
    module: nn.Module,
    args: tuple[Tensor, ...],
    inputs: list[str],
    outputs: list[str],
    axes: Axes,
    dynamic: Any,
    folder: Path | None,
) -> bytes:
    """``module``'s graph from its shape's template (traced here when there is none yet, in this
    process or in ``folder``), finished with its weights; a template traced from another module
    that does not give this module's outputs is traced again from this one."""
    key = template_key(module, args, inputs, outputs, axes)
    path = folder / f"template-{key}.onnx" if folder is not None else None
    with _locked(path):
        template = _KEPT.get(key) or _read(path)
        if template is not None:
            try:
                graph = finished(template, module)
                if agrees(graph, module, args, inputs):
                    return graph
                log.warning("ONNX: a template of this shape gave other outputs; traced again")
            except Exception as exc:  # a damaged file: ONNX's and ONNX Runtime's errors share no type
                log.warning("ONNX: template %s not usable (%s); traced again", key, exc)
        template = traced(module, args, inputs, outputs, dynamic)
        _keep(key, template, path)
    return finished(template, module)


def _read(path: Path | None) -> bytes | None:
    try:
        return path.read_bytes() if path is not None else None
    except OSError:
        return None


def _keep(key: str, template: bytes, path: Path | None) -> None:
    if len(template) <= _KEEP_BYTES:
        _KEPT[key] = template
    if path is None:
        return
    try:
        with atomic_file(path) as f:
            f.write(template)
    except OSError as exc:
        log.warning("ONNX template not kept in %s: %s", path.parent, exc)


@contextmanager
def _locked(path: Path | None) -> Iterator[None]:
    """Held while a template is read or traced: another process tracing the same shape waits and
    reads it. Without a folder it is done without."""
    if path is None:
        yield
        return
    with held_lock(path.with_suffix(".lock")):
        yield

"""The register embedding (ModelConfig.n_registers): read from train.tsv's third column,
learned in training, and what the encoder adds for each register."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from data.text import REGISTERS
from model.net.checkpoint import load_model
from model.net.transformer import CoupletTransformer, ModelConfig
from model.train import main
from model.training.errors import UsageError
from model.training.pairs import load_data, read_registered
from tests.model.training.test_train import cli


@pytest.fixture
def registered(tmp_path: Path, data_folder: Path) -> Path:
    """The fixture pairs with a register column: every third formal, every third classical."""
    folder = tmp_path / "data"
    shutil.copytree(data_folder, folder)
    lines = (data_folder / "train.tsv").read_text(encoding="utf-8").splitlines()
    marked = [line + ("", "\tclassical", "\tformal")[i % 3] for i, line in enumerate(lines)]
    (folder / "train.tsv").write_text("\n".join(marked) + "\n", encoding="utf-8")
    return folder


def test_the_third_column_is_read_as_a_register_index(registered: Path, tmp_path: Path) -> None:
    pairs, registers = read_registered(registered / "train.tsv")
    assert registers[:6] == [0, 1, 2, 0, 1, 2] and len(pairs) == len(registers)
    assert all("\t" not in lower for _, lower in pairs)
    _, train, valid = load_data(registered, 64, 512)
    assert train.collate([0, 1, 2]).register.tolist() == [0, 1, 2]  # type: ignore[union-attr]
    assert set(valid.registers.tolist()) == {0}  # two columns: general
    bad = tmp_path / "bad.tsv"
    bad.write_text("春风\t秋月\tpoetic\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"bad\.tsv:1: unknown register 'poetic'"):
        read_registered(bad)


def test_the_encoder_adds_its_registers_vector_and_none_reads_as_general() -> None:
    torch.manual_seed(0)
    model = CoupletTransformer(ModelConfig(vocab_size=50, d_model=16, n_heads=2, n_enc_layers=1,
                                           n_dec_layers=1, d_ff=32, dropout=0.0, n_registers=3))  # fmt: skip
    assert model.register_embed is not None
    src = torch.tensor([[5, 6, 7], [8, 9, 10]])
    zero = model.encode(src, torch.tensor([2, 1]))
    assert torch.equal(zero, model.encode(src))  # initialised to zero: no register changes nothing
    with torch.no_grad():
        model.register_embed.weight.normal_()
    general = model.encode(src, torch.tensor([0, 0]))
    assert torch.equal(general, model.encode(src))
    formal = model.encode(src, torch.tensor([2, 2]))
    assert not torch.allclose(general, formal)
    assert torch.allclose(model.encode(src, torch.tensor([2, 0]))[0], formal[0])
    with pytest.raises(ValueError, match="n_registers must be in"):
        ModelConfig(n_registers=len(REGISTERS) + 1)


def test_a_register_model_learns_its_register_vectors(registered: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(cli(registered, out, 20, "--set", "model.n_registers=3")) == 0
    model, _, _ = load_model(sorted((out / "checkpoints").glob("step-*.pt"))[-1])
    weights = model.state_dict()["register_embed.weight"]
    assert weights.shape[0] == 3 and bool((weights.abs().sum(1) > 0).all())  # each register was seen

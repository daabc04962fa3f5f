"""The lent-GPU-machine chain on the CPU: scripts/device_prepare.sh → device_train.sh → device_finish.sh
(docs/TRAINING.md, "On a lent GPU machine"), with the tiny presets in place of gpu and tagger_gpu."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from data.vocab import Vocab
from model.export.models import models_of
from model.net.checkpoint import build_model, load_checkpoint, save
from model.net.tagger import CoupletTagger
from model.net.transformer import ModelConfig
from model.store.bundle import load_bundle
from model.training.errors import UsageError
from model.training.pack import is_packed, pack, unpack

ROOT = Path(__file__).resolve().parents[3]
SCRIPTS = ROOT / "scripts"
LIMIT = 16 * 2**20  # the device tool returns files of at most 16 MiB, 8 of them
SETS = (
    "eval_every=20",
    "save_every=20",
    "threads=1",
    "amp=off",
    # the tiny preset's shape and test_train's chain's dropout (a setting, so part of a graph
    # template's key): the finishing evaluation's graphs are made from the templates one of the
    # two traced (model/export/onnx_templates.py)
    "model.dropout=0",
)


def carried_source(folder: Path, data_folder: Path) -> Path:
    """The data stage's folder as device_prepare.sh expects it (the fixture lacks three files)."""
    shutil.copytree(data_folder, folder)
    shutil.copy(folder / "test.tsv", folder / "test_leakfree.tsv")
    (folder / "report.json").write_text("{}", encoding="utf-8")
    (folder / "DATA_CARD.md").write_text("# data card (fixture)\n", encoding="utf-8")
    return folder


def device_image_path(folder: Path) -> str:
    """A PYTHONPATH entry where pypinyin and ahocorasick fail to import, as on the device image."""
    (folder / "pypinyin").mkdir(parents=True)
    (folder / "pypinyin" / "__init__.py").write_text("raise ImportError('not on the device image')\n")
    (folder / "ahocorasick.py").write_text("raise ImportError('not on the device image')\n")
    return str(folder)


def script(name: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHON": sys.executable, **env}
    return subprocess.run(
        ["bash", str(SCRIPTS / name), *args], cwd=ROOT, env=full, capture_output=True, text=True, timeout=540
    )


@pytest.mark.slow
def test_prepare_train_finish_chain_bundles_a_model_with_its_proposer(
    tmp_path: Path, data_folder: Path, pairs: list[tuple[str, str]]
) -> None:
    carry, out = tmp_path / "carry" / "data", tmp_path / "out"
    src = carried_source(tmp_path / "work_data", data_folder)
    prep = script("device_prepare.sh", DEVICE_SOURCE_DATA=str(src), DEVICE_DATA=str(carry))
    assert prep.returncode == 0, prep.stdout + prep.stderr
    assert (carry / "train.tsv.xz").is_file() and not (carry / "train.tsv").exists()

    train = script(
        "device_train.sh",
        OUT=str(out),
        PYTHONPATH=device_image_path(tmp_path / "image"),
        DEVICE_PRESET="tiny",
        DEVICE_PROPOSER="tagger_tiny",
        DEVICE_DATA=str(carry),
        DEVICE_RUN_DIR=str(tmp_path / "runs"),
        DEVICE_REQUIRE_CUDA="0",
        DEVICE_MINUTES="4",
        DEVICE_PART_MIB="0.4",  # the tiny run's tar (~1 MB) is cut into parts, as the gpu run's (~32 MiB)
        DEVICE_TRAIN_ARGS=" ".join(["--max-steps 40", *(f"--set {o}" for o in SETS)]),
    )
    assert train.returncode == 0, train.stdout + train.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= 8 and all(p.stat().st_size <= LIMIT for p in files)
    assert len(list(out.glob("run.tar.part-*"))) >= 2 and (out / "device_train.log").is_file()
    assert "proposer: training the 'tagger_tiny' preset first" in (out / "device_train.log").read_text()

    into = tmp_path / "finished"
    fin = script(
        "device_finish.sh", str(out), "--into", str(into), "--eval-limit", "10", DEVICE_DATA=str(carry)
    )
    assert fin.returncode == 0, fin.stdout + fin.stderr
    bundle = load_bundle(into / "run" / "bundle")
    assert isinstance(models_of(bundle).proposer, CoupletTagger)
    assert bundle.meta["preset"] == "tiny" and bundle.meta["step"] == 40
    assert bundle.eval["full"]["pairs"] == 10 and "fast_mode" in bundle.eval  # the proposer's figures
    assert bundle.in_training_data(pairs[0][0])
    assert "## Proposer" in bundle.model_card and "trained 40 steps" in bundle.model_card
    device = json.loads((into / "run" / "device.json").read_text())
    assert device["proposer_preset"] == "tagger_tiny" and device["train_exit"] == "0"


def test_device_train_refuses_a_folder_without_the_carried_data(tmp_path: Path) -> None:
    run = script("device_train.sh", OUT=str(tmp_path / "out"), DEVICE_DATA=str(tmp_path / "nothing"))
    assert run.returncode == 2
    assert "lacks" in run.stdout and (tmp_path / "out" / "device_train.log").is_file()


def test_pack_halves_the_checkpoints_and_unpack_joins_the_parts(tmp_path: Path, vocab: Vocab) -> None:
    run = tmp_path / "run"
    torch.manual_seed(0)
    s2s = build_model(ModelConfig(vocab_size=len(vocab), d_model=32, n_enc_layers=1, n_dec_layers=1, d_ff=64))
    tagger = build_model(
        ModelConfig(vocab_size=len(vocab), d_model=32, n_enc_layers=1, d_ff=64, kind="tagger")
    )
    save(run / "best.pt", s2s, vocab, step=7, best_valid=1.5)
    save(run / "proposer" / "checkpoints" / "step-00000003.pt", tagger, vocab, step=3, optimizer={"x": 1})
    (run / "train_log.csv").write_text("step,minutes\n1,0.1\n")
    files, record = pack(run, tmp_path / "out", {"preset": "tiny"}, part_bytes=20_000)
    assert len(files) > 1 and all(f.stat().st_size <= 20_000 for f in files)
    assert record["model"]["step"] == 7 and record["proposer"]["source"] == "step-00000003.pt"
    assert is_packed(tmp_path / "out") and not is_packed(run)
    back = unpack(tmp_path / "out", tmp_path / "back")
    assert (back / "train_log.csv").read_text() == "step,minutes\n1,0.1\n"
    for path, model in ((back / "best.pt", s2s), (back / "proposer" / "best.pt", tagger)):
        ckpt = load_checkpoint(path)
        assert "optimizer" not in ckpt
        for name, value in model.state_dict().items():
            assert ckpt["state_dict"][name].dtype == torch.float16
            assert torch.allclose(ckpt["state_dict"][name].float(), value, atol=1e-3)
    assert load_checkpoint(back / "best.pt")["best_valid"] == 1.5
    with pytest.raises(UsageError, match="not empty"):
        unpack(tmp_path / "out", tmp_path)  # holds other things, no unpacked run
    with pytest.raises(UsageError, match=f"not empty.*finish {back}$"):  # a rerun after a failed finish
        unpack(tmp_path / "out", tmp_path / "back")
    for f in files[1:]:  # parts missing: the archive is cut short inside a member
        f.unlink()
    with pytest.raises(UsageError, match="not a whole"):
        unpack(tmp_path / "out", tmp_path / "cut")
    assert not (tmp_path / "cut").exists()  # nothing half-unpacked left behind


def test_pack_refuses_a_part_size_below_one_mib_and_a_missing_run(tmp_path: Path, capsys) -> None:
    from model.ship import main

    (tmp_path / "run").mkdir()
    assert main(["pack", str(tmp_path / "run"), str(tmp_path / "out"), "--part-mib", "0"]) == 2
    assert "--part-mib" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main(["pack", str(tmp_path / "none"), str(tmp_path / "out")]) == 2
    assert "no such run folder" in capsys.readouterr().err and not (tmp_path / "out").exists()

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from data.banners import BANNERS_FILE
from data.pairing import PairingTable
from data.vocab import Vocab
from model.decoding.blocked import BlockedWords
from model.export.models import models_of
from model.net.checkpoint import (
    CHECKSUM_KEY,
    CorruptCheckpoint,
    build_model,
    load_checkpoint,
    load_model,
    make_checkpoint,
    save,
    save_checkpoint,
    verified,
)
from model.net.transformer import CoupletTransformer, ModelConfig
from model.release.bundle_cli import main as bundle_main
from model.release.export import export_bundle
from model.store.bundle import check_models, load_bundle, model_meta
from model.store.fingerprint import FingerprintIndex, KnownLowers, fingerprint
from model.store.layout import (
    CONFIG_FILE,
    DOC_FILES,
    FINGERPRINTS_FILE,
    KNOWN_FILE,
    MANIFEST_FILE,
    MODEL_CARD,
    PAIRING_FILE,
    PAYLOAD_FILES,
    PROPOSER_CONFIG,
    PROPOSER_WEIGHTS,
    REVERSE_CONFIG,
    REVERSE_WEIGHTS,
    SCORER_WEIGHTS,
    VOCAB_FILE,
    WEIGHTS_FILE,
    BundleError,
    file_sha256,
    install_bundle,
    read_manifest,
    verify_bundle,
    write_manifest,
)
from tests.model.decoding.fixtures import reverse_of, tiny_model
from tests.model.release.test_reranker import add_small_scorer

ROOT = Path(__file__).resolve().parents[3]


def make_model(vocab: Vocab) -> CoupletTransformer:
    return tiny_model(vocab, seed=1)


def test_checkpoint_round_trip(tmp_path, vocab: Vocab) -> None:
    model = make_model(vocab)
    path = save(tmp_path / "c.pt", model, vocab, step=7, best_valid=3.5, trainer={"epoch": 2})
    loaded, v2, meta = load_model(path)
    assert v2.to_bytes() == vocab.to_bytes()
    assert meta["step"] == 7 and meta["best_valid"] == 3.5 and meta["trainer"] == {"epoch": 2}
    assert loaded.cfg == model.cfg
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temporary file left


def test_checkpoint_rejects_unknown_format(tmp_path) -> None:
    torch.save({"format_version": 99}, tmp_path / "x.pt")
    with pytest.raises(ValueError, match="format"):
        load_checkpoint(tmp_path / "x.pt")


def test_fingerprint_index() -> None:
    idx = FingerprintIndex.from_lines(["天增岁月人增寿", "明月松间照", "明月松间照"])
    assert len(idx) == 2
    assert idx.contains("明月松间照") and idx.contains(" 明月松间照 ")
    assert not idx.contains("清泉石上流")
    assert idx.hashes.dtype == np.uint64 and np.all(np.diff(idx.hashes.astype(np.float64)) > 0)
    assert fingerprint("春，夏") == fingerprint("春,夏")  # ASCII punctuation folded


def test_bundle_round_trip(tmp_path, vocab: Vocab, pairs) -> None:
    model = make_model(vocab)
    uppers = [u for u, _ in pairs]
    sens = np.array([5, 3, 9], dtype=np.uint64)
    out = export_bundle(
        tmp_path / "bundle",
        model,
        vocab,
        train_uppers=uppers,
        sensitive_hashes=sens,
        sensitive_max_len=2,
        model_card="# card",
        data_card="# data",
        eval_result={"bleu4": 1.0},
        step=3,
    )
    b = load_bundle(out)
    assert b.in_training_data(uppers[0]) and not b.in_training_data("无此上联")
    assert b.model_card == "# card" and b.data_card == "# data" and b.eval == {"bleu4": 1.0}
    assert np.array_equal(b.sensitive_hashes, sens)
    assert b.meta["sensitive_max_len"] == 2
    assert b.meta["step"] == 3
    assert not (out / "model.pt").exists()
    raw = load_file(out / WEIGHTS_FILE)  # the weights in fp16, the tied table stored once
    assert all(v.dtype == torch.float16 for v in raw.values() if v.is_floating_point())
    assert "embed.weight" in raw and "tgt_embed.weight" not in raw and "head.weight" not in raw
    assert set(raw) | {"tgt_embed.weight", "head.weight"} == set(model.state_dict())
    config = json.loads((out / CONFIG_FILE).read_text(encoding="utf-8"))
    assert ModelConfig.from_dict(config) == model.cfg and config["architectures"] == ["CoupletTransformer"]
    assert config["tied_weights"] == {"tgt_embed.weight": "embed.weight", "head.weight": "embed.weight"}
    assert config["training"] == {"step": 3, "best_valid": None, "sensitive_max_len": 2}
    assert (out / VOCAB_FILE).read_bytes() == vocab.to_bytes()  # the sentencepiece file as it is
    assert Vocab.from_file(out / VOCAB_FILE).encode("明月松间照") == vocab.encode("明月松间照")
    src = torch.tensor([vocab.encode("明月松间照")])
    tgt = torch.tensor([[vocab.bos_id, *vocab.encode("清泉石上流")]])
    with torch.no_grad():
        torch.testing.assert_close(models_of(b).model(src, tgt), model(src, tgt), atol=0.05, rtol=0.05)
    export_bundle(out, model, vocab, train_uppers=["x"])  # replacing an existing bundle
    assert len(load_bundle(out).fingerprints) == 1


def test_bundle_carries_the_known_lower_lines(tmp_path, vocab: Vocab, pairs) -> None:
    model = make_model(vocab)
    (u0, l0), (u1, l1) = pairs[0], pairs[1]
    train = [(u0, l0), (u1, l1), (u0, "另一下联"), (u0, l0)]  # a repeated pair is listed once
    out = export_bundle(tmp_path / "bundle", model, vocab, train_pairs=train)
    b = load_bundle(out)
    assert b.in_training_data(u0) and b.known_lowers(u0) == [l0, "另一下联"]
    assert b.known_lowers(f" {u1} ") == [l1]  # looked up by the fingerprint's light normalisation
    assert b.known_lowers("无此上联") == []
    assert len(b.fingerprints) == 2
    plain = export_bundle(tmp_path / "plain", model, vocab, train_uppers=[u0])
    assert load_bundle(plain).known_lowers(u0) == [] and not (plain / KNOWN_FILE).exists()
    lazy = load_bundle(out, lazy=True)  # the command line's: read on the first lookup
    assert lazy.known_lowers(u0) == [l0, "另一下联"] and lazy.known_lowers("无此上联") == []
    (out / KNOWN_FILE).write_bytes(b"not a block file")
    write_manifest(out)  # a bundle made with a bad file, not one damaged afterwards
    with pytest.raises(ValueError, match="not a file of known lower lines"):
        load_bundle(out)
    lazy = load_bundle(out, lazy=True)
    assert lazy.known_lowers("无此上联") == []  # no training line: the file is not read
    with pytest.raises(ValueError, match="not a file of known lower lines"):
        lazy.known_lowers(u0)
    (out / KNOWN_FILE).write_bytes(KnownLowers.encode(FingerprintIndex.from_lines(["x"]), []))
    write_manifest(out)
    with pytest.raises(ValueError, match="1 records for 2 fingerprints"):
        load_bundle(out)


@pytest.mark.slow
def test_an_earlier_formats_bundle_is_refused_saying_how_to_convert(tmp_path, vocab: Vocab, pairs) -> None:
    """Bundles made before safetensors (model.pt) or before blocks (known_lowers.txt.xz) are not
    read: the refusal names the file and the commit that converts them, on the command line too."""
    out = export_bundle(tmp_path / "bundle", make_model(vocab), vocab, train_pairs=pairs)
    (out / KNOWN_FILE).rename(out / "known_lowers.txt.xz")
    write_manifest(out)
    with pytest.raises(BundleError, match=r"earlier format \(known_lowers\.txt\.xz\).*7d8a4da.*--convert"):
        load_bundle(out)
    old = tmp_path / "old"
    old.mkdir()
    (old / "model.pt").write_bytes(b"a checkpoint")
    with pytest.raises(FileNotFoundError, match=r"earlier format \(model\.pt\)"):
        load_bundle(old)
    r = subprocess.run(
        [sys.executable, "-m", "model.bundle", "--check", str(old)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2 and "model.pt" in r.stderr and "Traceback" not in r.stderr


def test_bundle_carries_the_pairing_table_of_its_training_pairs(tmp_path, vocab: Vocab, pairs) -> None:
    model = make_model(vocab)
    out = export_bundle(tmp_path / "bundle", model, vocab, train_pairs=pairs)
    b = load_bundle(out)
    assert b.pairing is not None and len(b.pairing) > 0
    counted = PairingTable.count(pairs)
    for name in ("upper", "indptr", "lower", "score"):
        assert np.array_equal(getattr(b.pairing, name), getattr(counted, name))
    plain = export_bundle(tmp_path / "plain", model, vocab, train_uppers=[pairs[0][0]])
    assert load_bundle(plain).pairing is None and not (plain / PAIRING_FILE).exists()
    assert not (out / BANNERS_FILE).exists()
    phrases = tmp_path / "phrases.npz"
    phrases.write_bytes(b"a banners table")
    with_banners = export_bundle(tmp_path / "banners", model, vocab, train_uppers=["x"], banners=phrases)
    assert (with_banners / BANNERS_FILE).read_bytes() == b"a banners table"
    (out / PAIRING_FILE).write_bytes(b"not a table")
    write_manifest(out)
    with pytest.raises(ValueError, match="not a pairing table"):
        load_bundle(out)


def test_load_bundle_missing(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="make train"):
        load_bundle(tmp_path)


def test_half_checkpoint_stores_tied_weights_once(vocab: Vocab) -> None:

    model = CoupletTransformer(ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=2, d_ff=64))
    state = make_checkpoint(model, vocab, half=True)["state_dict"]
    tied = [v for k, v in state.items() if v.shape == model.embed.weight.shape]
    assert len(tied) >= 2 and all(t.dtype == torch.float16 for t in tied)
    assert len({t.data_ptr() for t in tied}) == 1


def test_checkpoint_refuses_bytes_changed_inside_a_tensor(tmp_path, vocab: Vocab) -> None:
    """Bytes overwritten inside a tensor's data load silently with torch.load; the payload's
    sum, written with the checkpoint, catches them."""
    model = make_model(vocab)
    path = save(
        tmp_path / "c.pt", model, vocab, step=7, best_valid=float("inf"), rng={"torch": torch.get_rng_state()}
    )
    assert verified(load_checkpoint(path))
    weight = model.state_dict()["embed.weight"]
    data = bytearray(path.read_bytes())
    at = data.find(weight.numpy().tobytes())
    assert at > 0
    data[at + 64 : at + 64 + 256] = random.Random(0).randbytes(256)
    path.write_bytes(bytes(data))
    assert not torch.equal(torch.load(path, weights_only=True)["state_dict"]["embed.weight"], weight)
    with pytest.raises(CorruptCheckpoint, match=r"c\.pt: damaged checkpoint: its payload's sha256"):
        load_checkpoint(path)


def test_checkpoint_refuses_random_bytes_and_truncation(tmp_path, vocab: Vocab) -> None:
    path = save(tmp_path / "c.pt", make_model(vocab), vocab, step=1)
    good = path.read_bytes()
    middle = len(good) // 2
    path.write_bytes(good[:middle] + random.Random(1).randbytes(4096) + good[middle + 4096 :])
    with pytest.raises(CorruptCheckpoint, match=r"c\.pt: ") as damaged:
        load_checkpoint(path)
    path.write_bytes(good[:middle])
    with pytest.raises(CorruptCheckpoint, match=r"c\.pt: not a checkpoint") as truncated:
        load_checkpoint(path)
    for e in (damaged, truncated):
        assert "\n" not in str(e.value)


def test_a_changed_payload_needs_a_new_sum_and_old_checkpoints_load_unverified(
    tmp_path, vocab: Vocab
) -> None:
    path = save(tmp_path / "c.pt", make_model(vocab), vocab, step=1)
    ckpt = load_checkpoint(path)
    ckpt["step"] = 2
    torch.save(ckpt, path)  # the old sum with a new payload
    with pytest.raises(CorruptCheckpoint, match="damaged"):
        load_checkpoint(path)
    save_checkpoint(ckpt, path)
    assert load_checkpoint(path)["step"] == 2
    del ckpt[CHECKSUM_KEY]
    torch.save(ckpt, path)  # as written before checkpoints carried sums
    old = load_checkpoint(path)
    assert old["step"] == 2 and not verified(old)
    assert CHECKSUM_KEY not in load_model(path)[2]


def export_small(out: Path, vocab: Vocab, pairs: list[tuple[str, str]], **kw: Any) -> Path:
    from model.net.tagger import CoupletTagger

    cfg = ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=4, n_enc_layers=1, d_ff=64, kind="tagger")
    model = make_model(vocab)
    return export_bundle(
        out, model, vocab, train_pairs=pairs, proposer=CoupletTagger(cfg), reverse=reverse_of(model), **kw
    )


def test_bundle_manifest_lists_the_payload_and_refuses_a_damaged_file(tmp_path, vocab: Vocab, pairs) -> None:
    phrases = tmp_path / "phrases.npz"
    phrases.write_bytes(b"a banners table")
    blocked = BlockedWords.from_words(["明月"], vocab.pieces)
    out = export_small(
        tmp_path / "bundle", vocab, pairs, banners=phrases, data_report={"pairs": 3}, blocked=blocked
    )
    add_small_scorer(out, tmp_path)  # the reranker's scorer is added to an exported bundle
    written = {p.name for p in out.iterdir()}
    payload = set(PAYLOAD_FILES)
    assert written == {*payload, *DOC_FILES, MANIFEST_FILE}  # a new file is payload or a document
    assert read_manifest(out) == {name: file_sha256(out / name) for name in payload}
    assert verify_bundle(out)
    (out / MODEL_CARD).write_text("# a card written again", encoding="utf-8")  # documents are free
    load_bundle(out)
    names = (
        WEIGHTS_FILE, CONFIG_FILE, VOCAB_FILE, PROPOSER_WEIGHTS, PROPOSER_CONFIG, REVERSE_WEIGHTS,
        SCORER_WEIGHTS, FINGERPRINTS_FILE,
    )  # fmt: skip
    for name in names:
        good = (out / name).read_bytes()
        middle = len(good) // 2
        (out / name).write_bytes(good[:middle] + random.Random(2).randbytes(64) + good[middle + 64 :])
        with pytest.raises(BundleError, match=rf"bundle/{re.escape(name)}: damaged or replaced"):
            load_bundle(out)
        (out / name).write_bytes(good)
    load_bundle(out)
    (out / KNOWN_FILE).unlink()
    with pytest.raises(BundleError, match=r"known_lowers\.blocks: listed in SHA256SUMS but missing"):
        load_bundle(out)


def test_the_reverse_model_shares_the_models_embeddings(tmp_path, vocab: Vocab, pairs) -> None:
    model = make_model(vocab)
    reverse = reverse_of(model)
    out = export_bundle(
        tmp_path / "b", model, vocab, train_pairs=pairs, reverse=reverse, reverse_meta={"step": 9}
    )
    stored = load_file(out / REVERSE_WEIGHTS)
    assert "embed.weight" not in stored and "embed.weight" in load_file(out / WEIGHTS_FILE)
    config = json.loads((out / REVERSE_CONFIG).read_text("utf-8"))
    assert (
        config["shared_weights"] == {"embed.weight": WEIGHTS_FILE} and config["direction"] == "lower_to_upper"
    )
    assert config["training"]["step"] == 9
    # what it saves: the embedding table (vocabulary x width, fp16), about half a small model
    table = model.embed.weight.numel() * 2
    assert (out / WEIGHTS_FILE).stat().st_size - (out / REVERSE_WEIGHTS).stat().st_size > 0.9 * table
    models = models_of(load_bundle(out))
    assert models.reverse is not None and models.reverse.cfg.reverse
    expect = {k: v.half().float() for k, v in reverse.state_dict().items()}
    got = models.reverse.state_dict()
    assert all(torch.equal(got[k], expect[k]) for k in expect)  # every tensor, the shared one too
    assert models.reverse.embed.weight.data_ptr() != models.model.embed.weight.data_ptr()
    assert model_meta(out, reverse=True)["step"] == 9
    check_models(out)
    assert load_bundle(export_small(tmp_path / "plain", vocab, pairs)).has_reverse
    assert export_bundle(tmp_path / "none", model, vocab, train_uppers=["x"]) and (
        not load_bundle(tmp_path / "none").has_reverse
    )


def test_a_reverse_model_that_cannot_share_is_refused(tmp_path, vocab: Vocab) -> None:
    model = make_model(vocab)
    other = reverse_of(model)
    with torch.no_grad():
        other.embed.weight.add_(0.1)  # trained without freeze_embeddings
    with pytest.raises(ValueError, match=r"embed\.weight differs from the model's"):
        export_bundle(tmp_path / "b", model, vocab, train_uppers=["x"], reverse=other)
    with pytest.raises(ValueError, match="lower_to_upper"):
        export_bundle(tmp_path / "c", model, vocab, train_uppers=["x"], reverse=make_model(vocab))
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_bundle_payload_must_be_listed_and_old_bundles_load_with_a_warning(
    tmp_path, vocab: Vocab, pairs, caplog: pytest.LogCaptureFixture
) -> None:
    out = export_bundle(tmp_path / "bundle", make_model(vocab), vocab, train_uppers=["x"])
    shutil.copy(out / WEIGHTS_FILE, out / "stray.safetensors")  # not a bundle file: ignored
    load_bundle(out)
    shutil.copy(out / WEIGHTS_FILE, out / PAIRING_FILE)  # a payload file nobody listed
    with pytest.raises(BundleError, match=r"pairing\.npz: not listed in SHA256SUMS"):
        load_bundle(out)
    (out / PAIRING_FILE).unlink()
    (out / MANIFEST_FILE).unlink()
    with caplog.at_level(logging.WARNING):
        assert load_bundle(out).meta["step"] == 0
    assert "has no SHA256SUMS" in caplog.text and "--write-manifest" in caplog.text
    with pytest.raises(BundleError, match="SHA256SUMS: line 1"):
        (out / MANIFEST_FILE).write_text("junk\n")
        load_bundle(out)


@pytest.mark.slow
def test_the_manifest_command_writes_and_checks(tmp_path, vocab: Vocab, pairs) -> None:
    out = export_small(tmp_path / "bundle", vocab, pairs)
    (out / MANIFEST_FILE).unlink()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "model.bundle", *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)

    assert command("--check", str(out)).returncode == 1
    wrote = command("--write-manifest", str(out))
    assert wrote.returncode == 0 and "11 files" in wrote.stdout, wrote.stderr
    assert command("--check", str(out)).returncode == 0
    shutil.copy(out / WEIGHTS_FILE, out / PROPOSER_WEIGHTS)
    r = command("--check", str(out))
    assert r.returncode == 1 and "proposer.safetensors: damaged or replaced" in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    if shutil.which("sha256sum"):  # the coreutils tool reads the same file
        assert subprocess.run(["sha256sum", "--quiet", "-c", MANIFEST_FILE], cwd=out).returncode == 1


def test_install_refuses_a_bundle_that_differs_from_its_manifest(tmp_path, vocab: Vocab) -> None:
    out = export_bundle(tmp_path / "bundle", make_model(vocab), vocab, train_uppers=["x"], step=1)
    installed = install_bundle(out, tmp_path / "default")
    assert load_bundle(installed).meta["step"] == 1
    export_bundle(out, make_model(vocab), vocab, train_uppers=["x"], step=2)
    (out / FINGERPRINTS_FILE).write_bytes(b"damaged")
    with pytest.raises(BundleError, match=r"fingerprints\.npy: damaged"):
        install_bundle(out, tmp_path / "default")
    assert load_bundle(installed).meta["step"] == 1  # the installed one untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "default"]


def test_the_weights_refuse_damage_without_a_manifest(tmp_path, vocab: Vocab, pairs) -> None:
    """The sum in the safetensors metadata catches bytes changed inside a tensor even where no
    SHA256SUMS is; a file that is not safetensors or JSON is named in one line."""
    out = export_small(tmp_path / "bundle", vocab, pairs)
    (out / MANIFEST_FILE).unlink()
    good = (out / WEIGHTS_FILE).read_bytes()
    at = good.find(load_file(out / WEIGHTS_FILE)["embed.weight"].numpy().tobytes())
    assert at > 0
    (out / WEIGHTS_FILE).write_bytes(good[: at + 64] + bytes(256) + good[at + 320 :])
    with pytest.raises(CorruptCheckpoint, match=r"model\.safetensors: damaged weights"):
        check_models(out)  # the server's check, without PyTorch
    with pytest.raises(CorruptCheckpoint, match=r"model\.safetensors: damaged weights"):
        models_of(load_bundle(out))  # read into PyTorch
    (out / WEIGHTS_FILE).write_bytes(good[: len(good) // 2])
    with pytest.raises(CorruptCheckpoint, match=r"model\.safetensors: not a safetensors file") as e:
        check_models(out)
    assert "\n" not in str(e.value)
    (out / WEIGHTS_FILE).write_bytes(good)
    check_models(out)
    config = (out / CONFIG_FILE).read_text(encoding="utf-8")
    (out / CONFIG_FILE).write_text(config[:-20], encoding="utf-8")
    with pytest.raises(CorruptCheckpoint, match=r"config\.json: not a model configuration"):
        load_bundle(out)
    changed = json.loads(config) | {"vocab_sha256": "0" * 64}
    (out / CONFIG_FILE).write_text(json.dumps(changed), encoding="utf-8")
    with pytest.raises(ValueError, match="made for another vocabulary"):
        load_bundle(out)
    (out / CONFIG_FILE).write_text(config, encoding="utf-8")
    shutil.copy(out / CONFIG_FILE, out / PROPOSER_CONFIG)  # an encoder-decoder where the tagger belongs
    with pytest.raises(ValueError, match="must be an encoder-only tagger"):
        check_models(out)
    with pytest.raises(ValueError, match="must be an encoder-only tagger"):
        models_of(load_bundle(out))


def test_a_fingerprint_file_is_taken_as_it_is_when_sorted_and_sorted_when_not(tmp_path) -> None:
    lines = ["春风得意", "山高水长", "花开富贵", "明月照窗前"]
    index = FingerprintIndex.from_lines(lines)
    index.save(tmp_path / "sorted.npy")
    loaded = FingerprintIndex.load(tmp_path / "sorted.npy")
    assert np.array_equal(loaded.hashes, index.hashes) and all(loaded.contains(x) for x in lines)
    np.save(tmp_path / "unsorted.npy", np.concatenate([index.hashes[::-1], index.hashes[:1]]))
    unsorted = FingerprintIndex.load(tmp_path / "unsorted.npy")
    assert np.array_equal(unsorted.hashes, index.hashes) and all(unsorted.contains(x) for x in lines)
    assert not unsorted.contains("无此上联")


def test_a_reverse_model_is_added_to_a_bundle_in_place(
    tmp_path, vocab: Vocab, pairs, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--add-reverse``: a reverse run's checkpoint joins a bundle made without one (as the
    shipped bundle got its reverse model); a checkpoint that cannot share is refused, the bundle
    left as it was."""
    model = make_model(vocab)
    out = export_bundle(tmp_path / "b", model, vocab, train_pairs=pairs)
    reverse = reverse_of(model)
    good = save(tmp_path / "rev.pt", reverse, vocab, step=12, best_valid=3.7)
    assert bundle_main(["--add-reverse", str(out), "--checkpoint", str(good)]) == 0
    assert "reverse.safetensors" in capsys.readouterr().out
    loaded = models_of(load_bundle(out)).reverse
    assert loaded is not None and verify_bundle(out)
    assert all(torch.equal(v.half().float(), loaded.state_dict()[k]) for k, v in reverse.state_dict().items())
    assert model_meta(out, reverse=True)["step"] == 12
    other = reverse_of(model, seed=6)
    with torch.no_grad():
        other.embed.weight.mul_(2)
    bad = save(tmp_path / "bad.pt", other, vocab, step=1)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert bundle_main(["--add-reverse", str(out), "--checkpoint", str(bad)]) == 1
    assert "differs from the model's" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert bundle_main(["--add-reverse", str(out)]) == 2


def test_a_bundles_models_export_as_training_checkpoints(
    tmp_path, vocab: Vocab, pairs, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--export-checkpoint``: each of a bundle's models (the shipped one, to train further)
    comes back as a checkpoint that loads with the bundle's weights and vocabulary and starts a
    run with ``--init-from`` (every tensor copied); a role the bundle lacks is refused."""
    from model.training.run import warm_start

    out = export_small(tmp_path / "b", vocab, pairs, step=41, best_valid=3.25)
    bundle = load_bundle(out)
    for role, want in (
        ("model", models_of(bundle).model),
        ("proposer", models_of(bundle).proposer),
        ("reverse", models_of(bundle).reverse),
    ):
        assert want is not None, role
        path = tmp_path / f"{role}.pt"
        assert bundle_main(["--export-checkpoint", str(out), "--role", role, "--out", str(path)]) == 0
        assert str(path) in capsys.readouterr().out
        got, got_vocab, _ = load_model(path)
        assert got_vocab.pieces == vocab.pieces and got.cfg == want.cfg
        theirs = want.state_dict()
        assert all(torch.equal(v, theirs[k]) for k, v in got.state_dict().items())
        fresh = build_model(want.cfg)
        copied, new = warm_start(fresh, path, vocab)
        assert new == [] and copied == len(fresh.state_dict())
    assert load_model(tmp_path / "model.pt")[2]["step"] == 41
    bare = export_bundle(tmp_path / "bare", make_model(vocab), vocab, train_pairs=pairs)
    assert (
        bundle_main(["--export-checkpoint", str(bare), "--role", "proposer", "--out", str(tmp_path / "x.pt")])
        == 1
    )
    assert "has no proposer model" in capsys.readouterr().err
    assert not (tmp_path / "x.pt").exists()
    assert bundle_main(["--export-checkpoint", str(bare)]) == 2


def test_a_slim_checkpoint_keeps_weights_and_progress_without_optimizer_state(
    tmp_path, vocab: Vocab, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--slim``: a training checkpoint's weights come back in fp16 (each within fp16's rounding),
    with the step, trainer state and configuration, no optimizer or random state, a valid sum,
    and a run starts from it with ``--init-from`` (every tensor copied); the file is smaller."""
    from model.training.run import warm_start

    model = make_model(vocab)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.tensor([[5, 6, 7]]), torch.tensor([[1, 6, 7]]))[0].sum().backward()
    opt.step()
    full = save(
        tmp_path / "step-00000050.pt", model, vocab, step=50, best_valid=2.5, optimizer=opt.state_dict(),
        trainer={"step": 50, "elapsed": 61.0}, rng={"torch": torch.get_rng_state()},
        train_config={"lr": 1e-3},
    )  # fmt: skip
    slim = tmp_path / "slim.pt"
    assert bundle_main(["--slim", str(full), "--out", str(slim)]) == 0
    assert f"--init-from {slim}" in capsys.readouterr().out
    ckpt = load_checkpoint(slim)
    assert verified(ckpt) and "optimizer" not in ckpt and "rng" not in ckpt
    assert ckpt["step"] == 50 and ckpt["best_valid"] == 2.5 and ckpt["trainer"]["elapsed"] == 61.0
    assert ckpt["train_config"] == {"lr": 1e-3}
    assert all(v.dtype == torch.float16 for v in ckpt["state_dict"].values() if v.is_floating_point())
    got = load_model(slim)[0].state_dict()
    for k, v in model.state_dict().items():
        assert torch.allclose(got[k], v, rtol=1e-3, atol=1e-4), k
    assert slim.stat().st_size < full.stat().st_size / 3
    fresh = make_model(vocab)
    copied, new = warm_start(fresh, slim, vocab)
    assert new == [] and copied == len(fresh.state_dict())
    assert bundle_main(["--slim", str(full)]) == 2
    assert bundle_main(["--slim", str(full), "--out", str(full)]) == 2
    assert "is the checkpoint itself" in capsys.readouterr().err
    assert bundle_main(["--slim", str(tmp_path / "none.pt"), "--out", str(tmp_path / "x.pt")]) == 1
    assert not (tmp_path / "x.pt").exists()


def test_a_bundles_graph_key_follows_its_files_through_the_manifest(tmp_path, vocab: Vocab, pairs) -> None:
    """``graph_key`` takes each file's digest from the manifest ``load_bundle`` has just checked
    (no second read of the weights): two bundles with other weights get other keys, the same
    files the same key wherever they lie, and a bundle without a manifest is keyed by reading
    its files (a key of its own, stable)."""
    from model.store.bundle import graph_key

    a = export_bundle(tmp_path / "a", make_model(vocab), vocab, train_pairs=pairs)
    other = CoupletTransformer(make_model(vocab).cfg)  # fresh random weights, same shape
    b = export_bundle(tmp_path / "b", other, vocab, train_pairs=pairs)
    copy = Path(shutil.copytree(a, tmp_path / "copy"))
    key_a = graph_key(load_bundle(a), "model")
    assert key_a is not None and load_bundle(a).sums[WEIGHTS_FILE] == file_sha256(a / WEIGHTS_FILE)
    assert graph_key(load_bundle(b), "model") != key_a
    assert graph_key(load_bundle(copy), "model") == key_a
    (copy / MANIFEST_FILE).unlink()
    unlisted = load_bundle(copy)
    assert unlisted.sums == {} and graph_key(unlisted, "model") == graph_key(load_bundle(copy), "model")
    assert graph_key(unlisted, "model") != key_a
    # the same weights released again (another version and step) are the same graphs; another
    # setting of the model is not
    again = export_bundle(tmp_path / "v2", make_model(vocab), vocab, train_pairs=pairs, version="2", step=9)

    def record(bundle: Path) -> dict[str, Any]:
        return dict(json.loads((bundle / CONFIG_FILE).read_text())["training"])

    assert record(again) != record(a)
    assert graph_key(load_bundle(again), "model") == key_a
    key_unlisted, config = graph_key(unlisted, "model"), json.loads((copy / CONFIG_FILE).read_text())
    (copy / CONFIG_FILE).write_text(json.dumps(config | {"dropout": 0.25}))
    assert graph_key(load_bundle(copy), "model") != key_unlisted


def test_the_same_model_exports_to_the_same_files(tmp_path, pairs) -> None:
    """A bundle's files are a function of its model and vocabulary: no folder name in the
    vocabulary, the weights' metadata in one order (safetensors writes it in a random one), so
    the manifest, and the graph-cache keys made of it, are found again by the next export."""
    from safetensors.torch import load, save

    from model.store.weights import canonical_header

    lines = [line for pair in pairs for line in pair]
    vocabs = [Vocab.train(lines, tmp_path / name / "spm") for name in ("one", "two")]
    assert vocabs[0].to_bytes() == vocabs[1].to_bytes()
    assert b"one" not in vocabs[0].to_bytes() and str(tmp_path).encode() not in vocabs[0].to_bytes()
    bundles = [
        export_bundle(tmp_path / f"b{i}", make_model(v), v, train_pairs=pairs) for i, v in enumerate(vocabs)
    ]
    assert read_manifest(bundles[0]) == read_manifest(bundles[1])

    blob = save({"w": torch.ones(2, 3)}, metadata={"format": "pt", "b": "1", "a": "2"})
    size = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + size])
    shuffled = {"__metadata__": {"format": "pt", "b": "1", "a": "2"}, **{"w": header["w"]}}
    text = json.dumps(shuffled, separators=(",", ":")).encode().ljust(size)
    other = blob[:8] + text + blob[8 + size :]
    assert canonical_header(other) == canonical_header(blob)
    got = json.loads(canonical_header(other)[8 : 8 + size])
    assert list(got["__metadata__"]) == ["a", "b", "format"] and got["w"] == header["w"]
    assert load(canonical_header(other))["w"].equal(torch.ones(2, 3))

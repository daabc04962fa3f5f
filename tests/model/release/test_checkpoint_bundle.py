from __future__ import annotations

import numpy as np
import pytest
import torch

from data.banners import BANNERS_FILE
from data.pairing import PairingTable
from data.vocab import Vocab
from model.net.checkpoint import load_checkpoint, load_model, save
from model.net.transformer import CoupletTransformer, ModelConfig
from model.release.bundle import KNOWN_FILE, PAIRING_FILE, export_bundle, load_bundle
from model.release.fingerprint import FingerprintIndex, KnownLowers, fingerprint


def make_model(vocab: Vocab) -> CoupletTransformer:
    torch.manual_seed(1)
    cfg = ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=4, n_enc_layers=1, n_dec_layers=1, d_ff=64)
    return CoupletTransformer(cfg).eval()


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
    raw = load_checkpoint(out / "model.pt")
    assert all(v.dtype == torch.float16 for v in raw["state_dict"].values() if v.is_floating_point())
    src = torch.tensor([vocab.encode("明月松间照")])
    tgt = torch.tensor([[vocab.bos_id, *vocab.encode("清泉石上流")]])
    with torch.no_grad():
        torch.testing.assert_close(b.model(src, tgt), model(src, tgt), atol=0.05, rtol=0.05)
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
    (out / KNOWN_FILE).write_bytes(b"not lzma")
    with pytest.raises(ValueError, match="not an lzma file"):
        load_bundle(out)
    (out / KNOWN_FILE).write_bytes(KnownLowers.encode(FingerprintIndex.from_lines(["x"]), []))
    with pytest.raises(ValueError, match="1 records for 2 fingerprints"):
        load_bundle(out)


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
    with pytest.raises(ValueError, match="not a pairing table"):
        load_bundle(out)


def test_load_bundle_missing(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="make train"):
        load_bundle(tmp_path)


def test_half_checkpoint_stores_tied_weights_once(vocab: Vocab) -> None:
    from model.net.checkpoint import make_checkpoint

    model = CoupletTransformer(ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=2, d_ff=64))
    state = make_checkpoint(model, vocab, half=True)["state_dict"]
    tied = [v for k, v in state.items() if v.shape == model.embed.weight.shape]
    assert len(tied) >= 2 and all(t.dtype == torch.float16 for t in tied)
    assert len({t.data_ptr() for t in tied}) == 1

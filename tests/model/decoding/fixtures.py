"""For the decoding tests: a vocabulary of the 50 fixture couplets plus a few hand-written
lines with punctuation (the fixture couplets have none), so the mirrored marks are real ids;
and tiny randomly initialised models on it."""

from __future__ import annotations

from pathlib import Path

import torch

from data.vocab import Vocab
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer, ModelConfig

LINES_WITH_PUNCTUATION = [
    "天对地，雨对风。大陆对长空！",
    "山花对海树，赤日对苍穹？",
    "雷隐隐，雾蒙蒙；日下对天中、",
    "风高秋月白：雨霁晚霞红……",
]


def decode_vocab(folder: Path, pairs: list[tuple[str, str]]) -> Vocab:
    lines = [x for pair in pairs for x in pair] + LINES_WITH_PUNCTUATION
    return Vocab.train(lines, folder / "spm", vocab_size=0, minloglevel=2)


def tiny_model(vocab: Vocab, seed: int = 0) -> CoupletTransformer:
    """A one-layer encoder-decoder, seeded, in eval mode."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=len(vocab), d_model=32, n_heads=2, n_enc_layers=1, n_dec_layers=1, d_ff=64, dropout=0.0
    )
    return CoupletTransformer(cfg).eval()


def reverse_of(model: CoupletTransformer, seed: int = 5, scale: float = 0.05) -> CoupletTransformer:
    """A lower_to_upper model beside ``model`` as `make train` makes one: its embeddings kept
    (a bundle shares them), every other tensor moved by ``scale`` times seeded noise (0: the
    model's own weights read the other way)."""
    reverse = CoupletTransformer(model.cfg.with_(direction="lower_to_upper")).eval()
    reverse.load_state_dict(model.state_dict())
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in reverse.named_parameters():
            if "embed" not in name:
                p.add_(scale * torch.randn(p.shape, generator=g))
    return reverse


def tiny_tagger(vocab: Vocab, seed: int) -> CoupletTagger:
    """A tagger of the same width, seeded, in eval mode."""
    torch.manual_seed(seed)
    return CoupletTagger(
        ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=2, d_ff=64, kind="tagger")
    ).eval()

"""For the tests' randomly initialised models: one vocabulary, the 50 fixture couplets of
tests/model/fixtures plus a few hand-written lines (with punctuation, which the fixture couplets
lack, so the mirrored marks are real ids; the blind sheets' lines; the service's ``PAIRS`` and
``EXTRA_CHARS``), and one shape of tiny models on it (``SMALL``).

One vocabulary and one shape, because a graph is traced once a model's shape
(model/export/onnx_templates.py): every fixture model of this shape gets its ONNX graphs from
the run's one trace, where each file's own vocabulary or width cost a trace of every graph."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
# the blind sheets' own lines (tests/model/release/test_blind.py) that the couplets lack
SHEET_LINES = ["春风得意马蹄疾，秋月扬辉桂子香", "夏雨滋润稻花香"]
# the service's pairs (the fixture bundles' training pairs, tests/serve/conftest.py) and more
# characters for its tests (坏蛋: its listed word); 鑫, 淼 and 𣃁 stay out (unknown characters)
PAIRS = [
    ("春风得意", "秋月生辉"),
    ("山高水长", "海阔天空"),
    ("花开富贵", "竹报平安"),
    ("明月照窗前", "清风入户来"),
    ("一帆风顺年年好", "万事如意步步高"),
    ("绿水青山，千秋画卷", "红梅白雪，万里诗篇"),
    ("书山有路勤为径", "学海无涯苦作舟"),
    ("天天向上", "步步登高"),
    ("莺歌燕舞", "虎跃龙腾"),
    ("桃红柳绿", "鸟语花香"),
]
EXTRA_CHARS = "坏蛋好人东西南北金木火土日夜晴雨云雷霜露江河湖泊松柏梅兰菊草木虫鱼鸟兽"
NORMALISED = "乾干后发"  # 乾 kept as typed; 後 and 發 asked as 后 and 发 (tests/serve/test_api.py)
# the fixture models' shape: one layer a side (a trace takes longer the more layers it unrolls;
# the ONNX engine's tests exercise the per-layer paths on two, ``DEEP``)
SMALL: dict[str, Any] = {
    "d_model": 32,
    "n_heads": 2,
    "n_enc_layers": 1,
    "n_dec_layers": 1,
    "d_ff": 64,
    "dropout": 0.0,
}
DEEP: dict[str, Any] = {**SMALL, "n_enc_layers": 2, "n_dec_layers": 2}


def decode_vocab(folder: Path, pairs: list[tuple[str, str]]) -> Vocab:
    """The vocabulary of ``pairs`` (the 50 fixture couplets: the tests' one vocabulary; more: a
    vocabulary of the test's own) and the lines above."""
    service = [x for pair in PAIRS for x in pair] + [EXTRA_CHARS, NORMALISED]
    lines = [x for pair in pairs for x in pair] + LINES_WITH_PUNCTUATION + SHEET_LINES + service
    return Vocab.train(lines, folder / "spm", vocab_size=0, minloglevel=2)


def tiny_model(vocab: Vocab, seed: int = 0) -> CoupletTransformer:
    """An encoder-decoder of the ``SMALL`` shape, seeded, in eval mode."""
    torch.manual_seed(seed)
    return CoupletTransformer(ModelConfig(vocab_size=len(vocab), **SMALL)).eval()


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
    return CoupletTagger(ModelConfig(vocab_size=len(vocab), kind="tagger", **SMALL)).eval()

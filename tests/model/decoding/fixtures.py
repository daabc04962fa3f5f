"""A vocabulary for the decoding tests: the 50 fixture couplets plus a few hand-written lines
with punctuation (the fixture couplets have none), so the mirrored marks are real ids."""

from __future__ import annotations

from pathlib import Path

from data.vocab import Vocab

LINES_WITH_PUNCTUATION = [
    "天对地，雨对风。大陆对长空！",
    "山花对海树，赤日对苍穹？",
    "雷隐隐，雾蒙蒙；日下对天中、",
    "风高秋月白：雨霁晚霞红……",
]


def decode_vocab(folder: Path, pairs: list[tuple[str, str]]) -> Vocab:
    lines = [x for pair in pairs for x in pair] + LINES_WITH_PUNCTUATION
    return Vocab.train(lines, folder / "spm", vocab_size=0, minloglevel=2)

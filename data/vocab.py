"""The character vocabulary: a sentencepiece model of type ``char``, one id per character.

Lines are encoded character by character so that position i of the ids is position i of
the line (couplets are aligned); a character the model does not know becomes ``unk_id``
and is never dropped.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


class Vocab:
    """Character <-> id mapping backed by a sentencepiece ``char`` model."""

    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    def __init__(self, model_proto: bytes) -> None:
        self._proto = bytes(model_proto)
        self._sp = spm.SentencePieceProcessor(model_proto=self._proto)
        if (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id()) != (
            PAD_ID,
            UNK_ID,
            BOS_ID,
            EOS_ID,
        ):
            raise ValueError("vocabulary must use pad=0, unk=1, bos=2, eos=3")
        self._pieces = [self._sp.id_to_piece(i) for i in range(self._sp.get_piece_size())]
        self._ids = {p: i for i, p in enumerate(self._pieces) if i > EOS_ID}

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Vocab:
        return cls(Path(path).read_bytes())

    @classmethod
    def train(cls, lines: Iterable[str], model_prefix: str | os.PathLike[str], **options: Any) -> Vocab:
        """Train a ``char`` model on ``lines`` and write ``<prefix>.model`` / ``.vocab``. The model
        is taken from sentencepiece in memory, so its bytes do not name the folder it was
        written to (a model written to a file records that path): the same lines give the same
        file anywhere, and what is keyed on its bytes (the ONNX graph cache) is found again."""
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=model,
            model_type="char",
            character_coverage=1.0,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            add_dummy_prefix=False,
            remove_extra_whitespaces=False,
            normalization_rule_name="identity",
            vocab_size=options.pop("vocab_size", 0) or 8000,
            hard_vocab_limit=False,
            **options,
        )
        vocab = cls(model.getvalue())
        Path(model_prefix).parent.mkdir(parents=True, exist_ok=True)
        Path(f"{model_prefix}.model").write_bytes(vocab.to_bytes())
        scores = [f"{vocab._sp.id_to_piece(i)}\t{vocab._sp.get_score(i):g}\n" for i in range(len(vocab))]
        Path(f"{model_prefix}.vocab").write_text("".join(scores), encoding="utf-8")
        return vocab

    def to_bytes(self) -> bytes:
        return self._proto

    def same_as(self, other: Vocab) -> bool:
        """Whether ``other`` gives every character the same id: the same pieces in the same
        order. Not the same bytes: a model file also records how it was trained (a vocabulary
        trained before session 28 names the folder it was written to)."""
        return self._pieces == other._pieces

    def __len__(self) -> int:
        return len(self._pieces)

    def __contains__(self, ch: str) -> bool:
        return ch in self._ids

    def encode(self, line: str) -> list[int]:
        return [self._ids.get(ch, UNK_ID) for ch in line]

    def unknown(self, line: str) -> list[str]:
        """Characters of ``line`` outside the vocabulary, in order of first appearance."""
        return list(dict.fromkeys(ch for ch in line if ch not in self._ids))

    def piece(self, idx: int) -> str:
        return self._pieces[idx]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self._pieces[i] for i in ids if i > EOS_ID)

    @property
    def pieces(self) -> list[str]:
        return list(self._pieces)

"""The training pairs: TSV files (plain, or xz / gzip as carried to a lent GPU machine) read
into ``PairData``, encoded pairs in flat arrays that hand out length-bucketed batches."""

from __future__ import annotations

import gzip
import lzma
import subprocess
import sys
from pathlib import Path
from typing import IO

import numpy as np

from data.text import REGISTERS
from data.vocab import Vocab
from model.net.batch import Batch, collate
from model.training.batches import bucket_batches
from model.training.errors import UsageError


def open_text(path: Path) -> IO[str]:
    """A UTF-8 text file, read through xz or gzip when its name ends in ``.xz`` or ``.gz``."""
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def data_file(folder: Path, name: str) -> Path:
    """``folder/name``, else its compressed copy ``name.xz`` or ``name.gz`` (as carried to a
    lent GPU machine, scripts/device_prepare.sh)."""
    for candidate in (name, f"{name}.xz", f"{name}.gz"):
        if (folder / candidate).is_file():
            return folder / candidate
    return folder / name


def read_tsv(path: Path) -> list[tuple[str, str]]:
    return read_registered(path)[0]


def read_registered(path: Path) -> tuple[list[tuple[str, str]], list[int]]:
    """The pairs of ``upper<TAB>lower[<TAB>register]`` lines and each pair's register index
    (data.text.REGISTERS; a line without one is general, 0)."""
    pairs, registers = [], []
    index = {name: i for i, name in enumerate(REGISTERS)}
    with open_text(path) as f:
        for number, line in enumerate(f, 1):
            upper, sep, rest = line.rstrip("\n").partition("\t")
            lower, _, register = rest.partition("\t")
            if sep and upper and lower:
                if register and register not in index:
                    raise UsageError(
                        f"{path}:{number}: unknown register {register!r} (known: {', '.join(REGISTERS)})"
                    )
                pairs.append((upper, lower))
                registers.append(index.get(register, 0))
    return pairs, registers


class PairData:
    """Encoded pairs in two flat arrays with offsets (compact for 700k pairs)."""

    def __init__(
        self,
        pairs: list[tuple[str, str]],
        vocab: Vocab,
        max_len: int,
        batch_tokens: int,
        registers: list[int] | None = None,
    ) -> None:
        regs = registers if registers is not None else [0] * len(pairs)
        kept = [i for i, (u, lo) in enumerate(pairs) if len(u) == len(lo) and len(u) < max_len]
        keep = [pairs[i] for i in kept]
        self.registers = np.array([regs[i] for i in kept], dtype=np.int64)
        self.pairs = keep
        self.batch_tokens = batch_tokens
        lens = np.array([len(u) for u, _ in keep], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(lens)])
        self.src = np.fromiter(
            (i for u, _ in keep for i in vocab.encode(u)), dtype=np.int32, count=int(lens.sum())
        )
        self.tgt = np.fromiter(
            (i for _, lo in keep for i in vocab.encode(lo)), dtype=np.int32, count=int(lens.sum())
        )
        self.lengths = (lens + 1).tolist()

    def __len__(self) -> int:
        return len(self.pairs)

    def epoch_batches(self, epoch: int, seed: int) -> list[list[int]]:
        return bucket_batches(self.lengths, self.batch_tokens, seed, epoch)

    def collate(self, indices: list[int]) -> Batch:
        o = self.offsets
        pairs = [(self.src[o[i] : o[i + 1]], self.tgt[o[i] : o[i + 1]]) for i in indices]
        return collate(pairs, self.registers[indices])

    def fixed_batches(self, indices: list[int]) -> list[Batch]:
        """Batches of ``indices`` in length order (for validation)."""
        order = sorted(indices, key=lambda i: self.lengths[i])
        return [self.collate(part) for part in _cut_by_tokens(order, self.lengths, self.batch_tokens)]


def _cut_by_tokens(order: list[int], lengths: list[int], budget: int) -> list[list[int]]:
    out: list[list[int]] = [[]]
    for i in order:
        if out[-1] and lengths[i] * 2 * (len(out[-1]) + 1) > budget:
            out.append([])
        out[-1].append(i)
    return [b for b in out if b]


def run_data_stage() -> None:
    """`python -m data` rebuilds work/data only when its inputs changed."""
    result = subprocess.run([sys.executable, "-m", "data"], check=False)
    if result.returncode != 0:
        print(
            f"note: the data stage exited with status {result.returncode}; using the files present",
            flush=True,
        )


def load_data(
    folder: Path, max_len: int, batch_tokens: int, reverse: bool = False
) -> tuple[Vocab, PairData, PairData]:
    """The vocabulary and the training and validation pairs of ``folder``; with ``reverse``
    each pair's lines swap roles (the lower line is the source, the upper the target: a
    ``lower_to_upper`` model's data), each line's characters in their own order."""
    needed = [data_file(folder, n) for n in ("spm.model", "train.tsv", "valid.tsv")]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        raise UsageError(f"missing data file(s): {', '.join(missing)}; run `make data` first")
    try:
        vocab = Vocab.from_file(needed[0])
    except (RuntimeError, OSError) as e:  # sentencepiece's loader on a file that is not a model
        raise UsageError(f"{needed[0]}: not a sentencepiece model ({e}); run `make data` again") from e

    def read(path: Path) -> PairData:
        pairs, registers = read_registered(path)
        pairs = [(lo, u) for u, lo in pairs] if reverse else pairs
        return PairData(pairs, vocab, max_len, batch_tokens, registers)

    train, valid = read(needed[1]), read(needed[2])
    if not len(train) or not len(valid):
        raise UsageError(f"no usable pairs in {folder}/train.tsv or valid.tsv")
    return vocab, train, valid

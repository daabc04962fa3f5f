"""Configuration of the data stage: which sources go in, and every threshold."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from data.formal import FORMAL_FILE, FORMAL_SOURCE
from data.paths import corpus_dir, data_dir, work_dir
from data.sources import Source
from data.text import REGISTERS

# The wb14123 release folder in the corpus folder, as `python -m data.corpora` lays it out.
WB14123_RELEASE = "wb14123"
# The corpus files a formal pair must stand in none of to be held out.
FORMAL_OTHERS = (
    "wb14123_train.tsv.gz",
    "wb14123_test.tsv",
    "poetry_lvshi.tsv.gz",
    "classical_duiyun.tsv",
    "poetry_couplets_more.tsv.gz",
    "poetry_lines.tsv.gz",
)
CLASSICAL_SOURCES = ("poetry_lvshi", "classical_duiyun", "poetry_couplets_more")


def default_sources() -> tuple[Source, ...]:
    """The shared corpora, then the crawler's and the service's output when they exist.

    Without the shared wb14123 TSVs, the public release folder that ``python -m data.corpora``
    downloads (``wb14123/train|test/in.txt, out.txt``) is read in their place.
    """
    release = WB14123_RELEASE
    return (
        Source(
            "wb14123_train",
            "tsv",
            "wb14123_train.tsv.gz",
            fallback=Source("wb14123_train", "wb14123", release, split="train"),
        ),
        Source(
            "wb14123_test",
            "tsv",
            "wb14123_test.tsv",
            role="test",
            fallback=Source("wb14123_test", "wb14123", release, role="test", split="test"),
        ),
        Source("poetry_lvshi", "tsv", "poetry_lvshi.tsv.gz"),
        Source("classical_duiyun", "tsv", "classical_duiyun.tsv"),
        Source("poetry_couplets_more", "tsv", "poetry_couplets_more.tsv.gz"),
        # Formal couplets (楹联丛话, 巧对, 幼学琼林): its pairs in no other file are held out
        # (data/formal.py), the rest train.
        Source(FORMAL_SOURCE, "tsv", FORMAL_FILE),
        # wb14123 training pairs that other collections also print: a weight, not new pairs
        # (deduplicated against wb14123_train, they are written as often as --repeat says).
        Source("wb14123_collected", "tsv", "wb14123_collected.tsv.gz"),
        Source("crawl", "jsonl", str(work_dir() / "crawl" / "*.jsonl")),
        Source("feedback", "feedback", str(work_dir() / "feedback" / "*.tsv")),
    )


@dataclass
class DataConfig:
    corpus_dir: Path = field(default_factory=corpus_dir)
    out_dir: Path = field(default_factory=data_dir)
    sources: tuple[Source, ...] = field(default_factory=default_sources)
    min_len: int = 2  # characters per line, inclusive
    max_len: int = 32
    valid_size: int = 5000  # pairs, carved by upper line
    valid_sources: tuple[str, ...] = ("wb14123_train",)  # valid should look like the test set
    # A second validation split in the classical register (valid_classical.tsv), carved the
    # same way from these sources: what blind comparisons and classical figures are read on.
    classical_valid_size: int = 1000
    classical_sources: tuple[str, ...] = CLASSICAL_SOURCES
    # Training pairs of a source written this many times into train.tsv (after dedup and
    # the splits), to weight a register up; sources not named are written once.
    repeat: dict[str, int] = field(default_factory=dict)
    # The register (data.text.REGISTERS) of a source's training pairs, written as train.tsv's
    # third column for a model with a register embedding; a pair in several sources takes the
    # last register of REGISTERS among them, a source not named is general (no column written).
    registers: dict[str, str] = field(default_factory=dict)
    # An existing sentencepiece model to use as the vocabulary instead of building one (so
    # a model can be trained further on new data: its vocabulary must stay the same).
    vocab_from: Path | None = None
    # The formal yardstick (data/formal.py): pairs of this file (in corpus_dir) that stand in
    # none of ``formal_others`` become valid_formal.tsv and test_formal.tsv; their lines are
    # dropped from every training source. Absent file: both are empty.
    formal_file: str = FORMAL_FILE
    formal_others: tuple[str, ...] = FORMAL_OTHERS
    max_lowers_per_upper: int = 10
    near_dup: bool = True
    t2s: bool = True
    badwords: str = "badwords.txt"  # in corpus_dir; filtering is off when absent
    allow_list: Path = field(default_factory=lambda: Path(__file__).with_name("sensitive_allow.txt"))
    min_char_count: int = 2  # a character enters the vocabulary when seen this often in train
    seed: int = 0

    def validate(self) -> None:
        """Raise ValueError naming the first setting out of range."""
        checks = {
            "min-len": self.min_len >= 1,
            "max-len": self.max_len >= self.min_len,
            "valid-size": self.valid_size >= 0,
            "max-lowers": self.max_lowers_per_upper >= 1,
            "min-char-count": self.min_char_count >= 1,
            "classical-valid-size": self.classical_valid_size >= 0,
            "repeat": all(k >= 1 for k in self.repeat.values()),
            "register": set(self.registers.values()) <= set(REGISTERS),
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"--{name} is out of range")

    def as_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["sources"] = [asdict(s) for s in self.sources]
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}

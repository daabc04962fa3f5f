"""The data stage: read → normalise → filter → dedup → split → vocabulary → report.

Everything runs in one process on lists of short strings. Every per-character scan runs
in numpy over a whole source at once (data/chars.py) and the rest iterates in C (dict,
set, map, itertools), so Python code touches only the few lines a scan flags: that is
what keeps the whole corpus (~930K pairs) well under the 60 s budget on two cores.
"""

from __future__ import annotations

import gc
import hashlib
import itertools
import json
import operator
import random
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import cast

import numpy as np

from data.banners import BANNERS_FILE, build_banners
from data.chars import CharBatch
from data.config import DataConfig
from data.dedup import Deduper
from data.files import atomic_file
from data.filters import PairFilter
from data.formal import FormalSplit, carve_formal, read_pairs
from data.normalize import STEPS, VARIANTS, Normalizer
from data.sensitive import SensitiveFilter, read_words
from data.sources import Pair, Source, read_source, read_wb14123, source_present
from data.text import REGISTERS
from data.vocab import Vocab

OUTPUTS = (
    "train.tsv",
    "valid.tsv",
    "valid_classical.tsv",
    "valid_formal.tsv",
    "test_formal.tsv",
    "test.tsv",
    "test_leakfree.tsv",
    "test_leak.txt",
    "spm.model",
    "spm.vocab",
    "report.json",
    "DATA_CARD.md",
)
SAMPLE_HITS = 30


class Timer:
    """Wall-clock and CPU seconds per named stage, for the report (the machine is shared:
    CPU seconds show the work, wall seconds what a user waits)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start, cpu = time.perf_counter(), time.process_time()
        yield
        self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - start, 3)
        self.cpu_seconds[name] = round(self.cpu_seconds.get(name, 0.0) + time.process_time() - cpu, 3)


def source_files(config: DataConfig, source: Source) -> list[Path]:
    return [p for p in source.files(config.corpus_dir) if source_present(source, p)]


def resolve(config: DataConfig, source: Source) -> tuple[Source, list[Path]]:
    """The source to read and its files: the source itself, or its fallback when only the
    fallback's files are there."""
    files = source_files(config, source)
    if not files and source.fallback is not None:
        fallback_files = source_files(config, source.fallback)
        if fallback_files:
            return source.fallback, fallback_files
    return source, files


def stamp(config: DataConfig) -> str:
    """Hash of the configuration, every input file's size and mtime, and this stage's code."""
    h = hashlib.sha256(json.dumps(config.as_dict(), sort_keys=True).encode())
    inputs = [p for s in config.sources for p in resolve(config, s)[1]]
    # A release folder's files (its path is a folder, whose mtime misses an edited file).
    inputs = [f for p in inputs for f in (sorted(p.rglob("*.txt")) if p.is_dir() else [p])]
    inputs += [config.corpus_dir / name for name in (config.formal_file, *config.formal_others) if name]
    inputs += [config.corpus_dir / config.badwords, config.allow_list, VARIANTS]
    inputs += [config.vocab_from] if config.vocab_from is not None else []
    inputs += sorted(Path(__file__).parent.glob("*.py"))
    for path in inputs:
        if path.exists():
            st = path.stat()
            h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def is_fresh(config: DataConfig) -> bool:
    """True when every output exists and report.json carries the current stamp."""
    out = config.out_dir
    if not all((out / name).exists() for name in OUTPUTS):
        return False
    try:
        return json.loads((out / "report.json").read_text(encoding="utf-8")).get("stamp") == stamp(config)
    except (OSError, ValueError):
        return False


def load_sensitive(config: DataConfig) -> SensitiveFilter | None:
    """The filter the stage uses: the corpus folder's word list and our allow-list."""
    words_file = config.corpus_dir / config.badwords
    if not words_file.is_file():
        return None
    allow = read_words(config.allow_list) if config.allow_list.is_file() else []
    return SensitiveFilter(read_words(words_file), allow=allow)


def read_train_sources(config: DataConfig, report: dict) -> list[tuple[str, list[Pair]]]:
    """Raw pairs per training source; a malformed line is counted and dropped."""
    out = []
    for source in config.sources:
        if source.role != "train":
            continue
        source, files = resolve(config, source)
        read: list[Pair | None] = []
        for path in files:
            try:
                read.extend(read_source(source, path))
            except (OSError, EOFError, UnicodeDecodeError) as e:  # EOFError: a truncated .gz
                raise ValueError(f"{path}: cannot be read ({type(e).__name__}: {e})") from e
        malformed = read.count(None)
        pairs = [p for p in read if p is not None] if malformed else cast(list[Pair], read)
        report["sources"][source.name] = {
            "kind": source.kind,
            "files": [str(p) for p in files],
            "present": bool(files),
            "pairs_read": len(pairs),
            "malformed": malformed,
        }
        if pairs:
            out.append((source.name, pairs))
    return out


def normalise(pairs: list[Pair], norm: Normalizer) -> list[Pair]:
    uppers = norm.normalize_many(list(map(itemgetter(0), pairs)))
    lowers = norm.normalize_many(list(map(itemgetter(1), pairs)))
    return list(zip(uppers, lowers, strict=True))


def read_test(config: DataConfig, report: dict) -> tuple[list[str], Path | None]:
    """The test lines exactly as given (raw text, one pair per line), and their file."""
    tests = [s for s in config.sources if s.role == "test"]
    if len(tests) > 1:
        raise ValueError("only one test source is supported")
    if not tests:
        return [], None
    source, files = resolve(config, tests[0])
    if not files:
        # Training from other sources alone is allowed; the test files are then empty.
        report["sources"][source.name] = {"kind": source.kind, "files": [], "present": False}
        return [], None
    if source.kind == "wb14123" and len(files) == 1:
        # The release folder: its test half as upper<TAB>lower lines (test.tsv is written
        # from them, there being no TSV to copy).
        pairs = read_wb14123(files[0], source.split)
        if None in pairs:
            raise ValueError(f"{files[0] / source.split}: in.txt and out.txt differ in length")
        lines = [f"{u}\t{w}" for u, w in cast(list[Pair], pairs)]
        report["sources"][source.name] = {
            "kind": "wb14123",
            "files": [str(files[0])],
            "pairs_read": len(lines),
        }
        return lines, None
    if len(files) != 1 or source.kind == "jsonl":
        raise ValueError(f"test source {source.name!r} must be exactly one TSV file, found {len(files)}")
    text = files[0].read_text(encoding="utf-8").replace("\r\n", "\n").removesuffix("\n")
    lines = text.split("\n") if text else []
    report["sources"][source.name] = {"kind": "tsv", "files": [str(files[0])], "pairs_read": len(lines)}
    return lines, files[0]


def split_by_upper(pairs: list[Pair], uppers: set[str]) -> tuple[list[Pair], list[Pair]]:
    """(pairs whose upper line is in ``uppers``, the others), order kept; iterated in C."""
    inside = list(map(uppers.__contains__, map(itemgetter(0), pairs)))
    return list(itertools.compress(pairs, inside)), list(
        itertools.compress(pairs, map(operator.not_, inside))
    )


def carve_valid(
    pairs: list[Pair], candidates: set[str], size: int, seed: int
) -> tuple[list[Pair], list[Pair], set[str]]:
    """(valid, rest, valid uppers): whole upper lines drawn at random from ``candidates``."""
    # Ordered by first appearance (not set order, which changes with the hash seed).
    pool = list(filter(candidates.__contains__, dict.fromkeys(map(itemgetter(0), pairs))))
    drawn = random.Random(seed).sample(pool, k=min(len(pool), size))
    sample, rest = split_by_upper(pairs, set(drawn))
    per_upper = Counter(map(itemgetter(0), sample))
    chosen: set[str] = set()
    total = 0
    for upper in drawn:
        if total >= size:
            break
        chosen.add(upper)
        total += per_upper[upper]
    valid, back = split_by_upper(sample, chosen)
    return valid, rest + back, chosen


def write_lines(path: Path, lines: list[str]) -> None:
    """Write whole or not at all, so a reader never sees half a file."""
    with atomic_file(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n" if lines else "")


def copy_file(source: Path | None, path: Path) -> None:
    """The file byte for byte (an empty file when there is no source), whole or not at all."""
    with atomic_file(path) as f:
        if source is not None:
            with open(source, "rb") as src:
                shutil.copyfileobj(src, f)


def write_pairs(path: Path, pairs: list[Pair]) -> None:
    write_lines(path, list(map("\t".join, pairs)))


@dataclass
class Kept:
    """What the filters kept: the pairs of every source in order, the upper lines each
    validation split may draw from, and how often a pair of a weighted source is written."""

    pairs: list[Pair]
    candidates: set[str]
    classical_candidates: set[str]
    repeat: dict[Pair, int]
    register: dict[Pair, int] = field(default_factory=dict)  # index in REGISTERS, when not general


def filter_sources(
    sources: list[tuple[str, list[Pair]]], config: DataConfig, pf: PairFilter, report: dict
) -> Kept:
    kept = Kept([], set(), set(), {})
    for name, pairs in sources:
        before = len(kept.pairs)
        kept.pairs.extend(pf.keep_batch(pairs))
        report["sources"][name]["pairs_kept_by_filters"] = len(kept.pairs) - before
        if name in config.valid_sources:
            kept.candidates.update(map(itemgetter(0), kept.pairs[before:]))
        if name in config.classical_sources:
            kept.classical_candidates.update(map(itemgetter(0), kept.pairs[before:]))
        if config.repeat.get(name, 1) > 1:
            times = config.repeat[name]
            kept.repeat.update((pair, max(times, kept.repeat.get(pair, 1))) for pair in kept.pairs[before:])
        if config.registers.get(name, "general") != "general":
            level = REGISTERS.index(config.registers[name])
            kept.register.update(
                (pair, max(level, kept.register.get(pair, 0))) for pair in kept.pairs[before:]
            )
    return kept


def repeated(train: list[Pair], repeat: dict[Pair, int]) -> list[Pair]:
    """``train`` with each pair of a weighted source written as often as its weight says."""
    if not repeat:
        return train
    return [pair for pair in train for _ in range(repeat.get(pair, 1))]


def split_test(test_lines: list[str], norm: Normalizer, train_uppers: set[str]) -> tuple[list[int], set[str]]:
    """Leak flags per test line (its upper line is a training upper line) and the test uppers."""
    uppers = norm.normalize_many([line.split("\t", 1)[0] for line in test_lines])
    return [int(u in train_uppers) for u in uppers], set(uppers)


def shuffled(pairs: list[Pair], seed: int) -> list[Pair]:
    """A seeded permutation, so training order mixes the sources."""
    order = np.random.default_rng(seed).permutation(len(pairs))
    return list(map(pairs.__getitem__, order.tolist()))


def build_vocab(train: list[Pair], config: DataConfig, report: dict) -> Vocab:
    """A char model trained on the training split's character counts.

    A sentencepiece char model depends only on how often each character occurs, so it is
    given those counts (TSV input: ``char<TAB>count``) rather than 1.5M sentences:
    the same model in milliseconds instead of seconds. Characters rarer than
    ``min_char_count`` stay out and become the unknown token.
    """
    counts = CharBatch(list(map("".join, train))).counts()
    if config.vocab_from is not None:
        return reused_vocab(config.vocab_from, counts, config, report)
    kept = {ch: n for ch, n in counts.items() if n >= config.min_char_count and not ch.isspace()}
    if not kept:
        raise ValueError(f"no character occurs {config.min_char_count} times in the training split")
    try:
        vocab = Vocab.train(
            (f"{ch}\t{n}" for ch, n in kept.items()),
            config.out_dir / "spm",
            vocab_size=len(kept) + 4,
            input_format="tsv",
            minloglevel=2,
        )
    except RuntimeError as e:  # sentencepiece's trainer refuses what it cannot build
        raise ValueError(f"the vocabulary could not be built: {e}") from e
    report["vocab"] = {
        "size": len(vocab),
        "train_distinct_chars": len(counts),
        "min_char_count": config.min_char_count,
    }
    return vocab


def reused_vocab(path: Path, counts: dict[str, int], config: DataConfig, report: dict) -> Vocab:
    """``--vocab-from``: the given sentencepiece model as the vocabulary, copied into the
    outputs; training characters it lacks become the unknown token (counted)."""
    try:
        vocab = Vocab(path.read_bytes())
    except (OSError, RuntimeError) as e:
        raise ValueError(f"--vocab-from {path}: not a sentencepiece model ({e})") from e
    copy_file(path, config.out_dir / "spm.model")
    write_lines(config.out_dir / "spm.vocab", [f"{piece}\t0" for piece in vocab.pieces])
    unknown = {ch: n for ch, n in counts.items() if ch not in vocab and not ch.isspace()}
    report["vocab"] = {
        "size": len(vocab),
        "train_distinct_chars": len(counts),
        "min_char_count": config.min_char_count,
        "from": str(path),
        "train_unknown_types": len(unknown),
        "train_unknown_tokens": sum(unknown.values()),
    }
    return vocab


def coverage(vocab: Vocab, lines: list[str]) -> dict[str, float | int]:
    text = "".join(lines).replace("\t", "")
    counts = Counter(text)
    known = sum(n for ch, n in counts.items() if ch in vocab)
    return {
        "test_char_coverage": round(known / max(1, len(text)), 6),
        "test_type_coverage": round(sum(ch in vocab for ch in counts) / max(1, len(counts)), 6),
        "test_unknown_types": sum(ch not in vocab for ch in counts),
    }


@contextmanager
def no_gc() -> Iterator[None]:
    """The stage builds millions of tuples and no cycles; the cyclic collector would rescan
    them again and again as they pile up (measured: ~10% of the stage's CPU), so it waits."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def run(config: DataConfig) -> dict:
    """Build every output into ``config.out_dir`` and return the report."""
    with no_gc():
        return _run(config)


@dataclass
class TestSet:
    """The test lines as given, their file, and per line whether its upper line leaked."""

    lines: list[str]
    file: Path | None
    leak: list[int]
    uppers: set[str]


def _run(config: DataConfig) -> dict:
    timer = Timer()
    report: dict = {"stamp": stamp(config), "config": config.as_dict(), "sources": {}}
    config.out_dir.mkdir(parents=True, exist_ok=True)
    # The report marks the outputs complete: gone until this run has written them all, so a
    # run that fails half-way leaves them stale, never mixed outputs passing for fresh ones.
    (config.out_dir / "report.json").unlink(missing_ok=True)
    sources, test = _read_and_normalise(config, report, timer)
    with timer("formal"):
        formal = formal_split(config, report)
        before = sum(len(pairs) for _, pairs in sources)
        sources = [(name, formal.drop_held(pairs)) for name, pairs in sources]
        report["formal"]["training_pairs_dropped"] = before - sum(len(pairs) for _, pairs in sources)
        write_pairs(config.out_dir / "valid_formal.tsv", formal.valid)
        write_pairs(config.out_dir / "test_formal.tsv", formal.test)
    with timer("filter"):
        pf = PairFilter(config.min_len, config.max_len, load_sensitive(config))
        kept = filter_sources(sources, config, pf, report)
    report["filter"] = {reason: pf.counts.get(reason, 0) for reason in PairFilter.reasons()}
    report["filter"]["kept"] = len(kept.pairs)
    report["sensitive_sample_hits"] = dict(pf.sensitive_hits.most_common(SAMPLE_HITS))
    report["sensitive_examples"] = pf.sensitive_examples
    with timer("dedup"):
        dedup = Deduper(config.max_lowers_per_upper, config.near_dup)
        kept.pairs = dedup(kept.pairs)
    report["dedup"] = {k: dedup.counts.get(k, 0) for k in Deduper.reasons()} | {"kept": len(kept.pairs)}
    report["dedup_examples"] = dict(dedup.examples)
    with timer("split"):
        train = _split_and_write(kept, test, config, report)
    with timer("banners"):  # 横批: phrases and character vectors from the vetted training pairs
        banners = build_banners(train, pf.sensitive).save(config.out_dir / BANNERS_FILE)
    report["banners"] = {"file": banners.name, "bytes": banners.stat().st_size}
    with timer("vocab"):
        vocab = build_vocab(train, config, report)
        # as the model meets them: normalised like every input (a served upper line too)
        sides = [side for line in test.lines for side in line.split("\t")]
        report["vocab"] |= coverage(vocab, Normalizer(t2s=config.t2s).normalize_many(sides))
    report["seconds"] = timer.seconds | {"total": round(sum(timer.seconds.values()), 3)}
    report["cpu_seconds"] = timer.cpu_seconds | {"total": round(sum(timer.cpu_seconds.values()), 3)}
    write_lines(config.out_dir / "DATA_CARD.md", [data_card(report)])
    # Last: its stamp is what marks the outputs complete and fresh.
    write_lines(config.out_dir / "report.json", [json.dumps(report, ensure_ascii=False, indent=1)])
    return report


def formal_split(config: DataConfig, report: dict) -> FormalSplit:
    """The formal valid and test pairs (data/formal.py), normalised as inputs are; none when
    the formal file is absent."""
    path = config.corpus_dir / config.formal_file
    if not config.formal_file or not path.is_file():
        report["formal"] = {"file": str(path), "present": False, "valid": 0, "test": 0}
        return FormalSplit()
    norm = Normalizer(t2s=config.t2s)
    formal = normalise(read_pairs(path), norm)
    others = [p for p in (config.corpus_dir / name for name in config.formal_others) if p.is_file()]
    split = carve_formal(formal, (read_pairs(p) for p in others))
    report["formal"] = {
        "file": str(path),
        "present": True,
        "pairs_read": len(formal),
        "checked_against": [p.name for p in others],
        "valid": len(split.valid),
        "test": len(split.test),
    }
    return split


def _read_and_normalise(
    config: DataConfig, report: dict, timer: Timer
) -> tuple[list[tuple[str, list[Pair]]], TestSet]:
    with timer("read"):
        sources = read_train_sources(config, report)
        test_lines, test_file = read_test(config, report)
    if not sources:
        where = f"{config.corpus_dir} (check DUILIAN_CORPUS_DIR, --sources)"
        raise ValueError(f"no training pairs found in {where}")
    norm = Normalizer(t2s=config.t2s)
    with timer("normalise"):
        sources = [(name, normalise(pairs, norm)) for name, pairs in sources]
        # Leakage is judged against every training-source upper line, before any filter.
        train_uppers = set().union(*(map(itemgetter(0), ps) for _, ps in sources))
        leak, test_uppers = split_test(test_lines, norm, train_uppers)
    report["normalise"] = {
        "lines": 2 * sum(len(ps) for _, ps in sources),
        **{f"changed_{k}": norm.counts.get(k, 0) for k in STEPS},
    }
    return sources, TestSet(test_lines, test_file, leak, test_uppers)


def _split_and_write(kept: Kept, test: TestSet, config: DataConfig, report: dict) -> list[Pair]:
    """Write train, both validation splits and the test files; return the training pairs
    (each once: the weighted copies are only in train.tsv)."""
    removed, train = split_by_upper(kept.pairs, test.uppers)
    valid, train, valid_uppers = carve_valid(train, kept.candidates, config.valid_size, config.seed)
    classical, train, classical_uppers = carve_valid(
        train, kept.classical_candidates - valid_uppers, config.classical_valid_size, config.seed
    )
    if not train:
        raise ValueError(
            f"{len(valid) + len(classical)} pairs left after filtering, all taken by the validation "
            f"splits (valid_size {config.valid_size}, classical_valid_size {config.classical_valid_size}): "
            "too few to train on; pass a smaller --valid-size or --classical-valid-size"
        )
    written = shuffled(repeated(train, kept.repeat), config.seed)
    out = config.out_dir
    if kept.register:  # a third column where the register is not general
        regs = kept.register
        write_lines(
            out / "train.tsv",
            [
                f"{u}\t{lo}\t{REGISTERS[regs[(u, lo)]]}" if (u, lo) in regs else f"{u}\t{lo}"
                for u, lo in written
            ],
        )
        report["registers"] = dict(Counter(REGISTERS[regs.get(pair, 0)] for pair in written))
    else:
        write_pairs(out / "train.tsv", written)
    write_pairs(out / "valid.tsv", valid)
    write_pairs(out / "valid_classical.tsv", classical)
    if test.file is not None:
        copy_file(test.file, out / "test.tsv")
    else:
        write_lines(out / "test.tsv", test.lines)
    write_lines(out / "test_leakfree.tsv", [t for t, f in zip(test.lines, test.leak, strict=True) if not f])
    write_lines(out / "test_leak.txt", [str(f) for f in test.leak])
    report["split"] = {
        "train": len(written),
        "train_distinct": len(train),
        "valid": len(valid),
        "valid_uppers": len(valid_uppers),
        "valid_classical": len(classical),
        "valid_classical_uppers": len(classical_uppers),
        "test": len(test.lines),
        "test_leak": sum(test.leak),
        "test_leakfree": len(test.lines) - sum(test.leak),
        "train_removed_test_upper": len(removed),
    }
    return train


def _table(title: str, counts: dict[str, int]) -> list[str]:
    return [f"| {title} | pairs |", "|---|---|", *(f"| {k} | {v} |" for k, v in counts.items()), ""]


def _repeat_lines(repeat: dict[str, int], sp: dict) -> list[str]:
    if not repeat:
        return []
    weights = ", ".join(f"{name} ×{k}" for name, k in repeat.items())
    return [f"train holds {sp['train_distinct']} distinct pairs, those of {weights} written that often,"]


def _vocab_lines(vo: dict) -> list[str]:
    if "from" in vo:
        return [
            f"Vocabulary: {vo['size']} pieces, reused from `{vo['from']}` (`--vocab-from`);",
            f"{vo['train_unknown_types']} training character types ({vo['train_unknown_tokens']} tokens)",
            "are not in it and map to the unknown token.",
        ]
    return [
        f"Vocabulary: {vo['size']} pieces (sentencepiece char model; characters seen at least",
        f"{vo['min_char_count']} times in train; others map to the unknown token, never dropped).",
    ]


def _formal_lines(fo: dict) -> list[str]:
    if not fo.get("present"):
        return []
    return [
        f"Formal yardstick: valid_formal {fo['valid']}, test_formal {fo['test']}: the pairs of",
        f"`{Path(fo['file']).name}` that stand in none of {', '.join(fo['checked_against'])}",
        "(Han characters only, either orientation; data/formal.py). Training pairs with one of their",
        f"lines were removed: {fo['training_pairs_dropped']}.",
    ]


def data_card(report: dict) -> str:
    """A short human-readable summary of the report (the bundle ships it as DATA_CARD.md)."""
    sources = {
        f"{name} ({s['kind']})": s.get("pairs_read", 0)
        for name, s in report["sources"].items()
        if s.get("files")
    }
    sp, vo, norm = report["split"], report["vocab"], report["normalise"]
    changed = ", ".join(f"{k.removeprefix('changed_')} {v}" for k, v in norm.items() if k != "lines")
    return "\n".join(
        [
            "# Data card",
            "",
            "Couplet pairs (`upper<TAB>lower`) built by `make data` (`python -m data`); every",
            "count below is from `report.json`. Licences: wb14123 AGPL-3.0 (so is a model trained",
            "on it); the regulated-verse and primer pairs MIT.",
            "",
            *_table("source read", sources),
            f"Normalisation (lines changed, of {norm['lines']}): {changed}. Whitespace removed,",
            "compatibility forms folded (full-width Chinese punctuation kept), ASCII punctuation",
            "to full-width (the corpus's `--` to `——`), traditional to simplified (OpenCC t2s),",
            "variant characters that OpenCC keeps to their standard form (`data/variants.txt`).",
            "",
            *_table("dropped by filter", report["filter"]),
            "Punctuation must be the same mark at the same positions (docs/COUPLET_RULES.md, rule 2).",
            "Sensitive words: the shared list minus the allow-list in `data/sensitive_allow.txt`.",
            "",
            *_table("removed as duplicate", report["dedup"]),
            "Near duplicates: the same pair without punctuation; the same upper line with a lower",
            "line one character away from a kept one (lines of 5+ characters). At most",
            f"{report['config']['max_lowers_per_upper']} lower lines per upper line.",
            "",
            f"Splits: train {sp['train']}, valid {sp['valid']} ({sp['valid_uppers']} whole upper lines),",
            f"valid_classical {sp.get('valid_classical', 0)} (classical sources, "
            f"{sp.get('valid_classical_uppers', 0)} whole upper lines),",
            *_repeat_lines(report["config"].get("repeat") or {}, sp),
            f"test {sp['test']}: the standard wb14123 test set byte for byte, {sp['test_leakfree']} of it",
            f"leak-free ({sp['test_leak']} test pairs have an upper line that is an upper line of the",
            "training sources).",
            "Training pairs whose upper line is a test upper line were removed:",
            f"{sp['train_removed_test_upper']}.",
            *_formal_lines(report.get("formal") or {}),
            "",
            *_vocab_lines(vo),
            f"Test character coverage {vo['test_char_coverage']:.4%},",
            f"{vo['test_unknown_types']} unknown",
            "character types in the test set (normalised as inputs are).",
            "",
            "Known limits: the sensitive-word list both misses and over-hits; about 3.8% of the",
            "original wb14123 pairs are missing upstream, so rare characters are under-represented.",
            "",
        ]
    )

"""The data stage's inputs: the training sources read and normalised, the test lines as
given, the formal yardstick's pairs, and the sensitive-word filter.
"""

from __future__ import annotations

from operator import itemgetter
from pathlib import Path
from typing import cast

from data.config import DataConfig
from data.formal import FormalSplit, carve_formal, han_rows, read_pairs
from data.normalize import Normalizer
from data.sensitive import SensitiveFilter, read_words
from data.sources import Pair, Source, read_source, read_wb14123, source_present


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
    rows: set[str] = set()
    for other in others:
        rows |= han_rows(other)
    split = carve_formal(formal, rows)
    report["formal"] = {
        "file": str(path),
        "present": True,
        "pairs_read": len(formal),
        "checked_against": [p.name for p in others],
        "valid": len(split.valid),
        "test": len(split.test),
    }
    return split

"""`python -m data.build_banners`: the 横批 table (data/banners.py) built from the corpora's
training sources, vetted as the data stage vets them (the data stage itself writes it too, as
work/data/banners.npz); a module of its own so that data.banners, which the data stage
imports, does not import the data stage back."""

from __future__ import annotations

import argparse
from pathlib import Path

from data.banners import BANNERS_FILE, BannerConfig, build_banners
from data.config import DataConfig
from data.inputs import load_sensitive, normalise, read_test, read_train_sources
from data.normalize import Normalizer


def main(argv: list[str] | None = None) -> None:
    """Build banners.npz from the corpora's training sources, vetted as the data stage vets them."""
    parser = argparse.ArgumentParser(prog="python -m data.build_banners", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="the file to write (default: work/data/banners.npz)")
    parser.add_argument("--min-count", type=int, default=BannerConfig.min_count)
    args = parser.parse_args(argv)
    config = DataConfig()
    report: dict = {"sources": {}}
    sources = read_train_sources(config, report)
    if not sources:
        raise SystemExit(f"no training pairs in {config.corpus_dir} (DUILIAN_CORPUS_DIR)")
    norm = Normalizer(t2s=config.t2s)
    test_lines, _ = read_test(config, report)
    test_uppers = set(norm.normalize_many([t.split("\t")[0] for t in test_lines]))
    sensitive = load_sensitive(config)
    pairs = [
        p
        for _, ps in sources
        for p in normalise(ps, norm)
        if p[0] not in test_uppers and (sensitive is None or sensitive.is_clean(p[0] + "\t" + p[1]))
    ]
    table = build_banners(pairs, sensitive, BannerConfig(min_count=args.min_count))
    out = table.save(args.out or config.out_dir / BANNERS_FILE)
    print(f"{len(table.phrases)} phrases, {len(table.chars)} characters from {len(pairs)} pairs -> {out}")


if __name__ == "__main__":
    main()

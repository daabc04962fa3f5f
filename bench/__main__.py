"""`make bench`: run every benchmark module (or those named) and write JSON and Markdown.

Each module ``bench/<name>.py`` has ``run(args) -> dict[str, object]`` returning flat
figures; this runner times nothing itself, it only collects and writes them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
import time

import bench
from data.paths import work_dir


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_"))


def default() -> list[str]:
    """What a plain `make bench` runs: every benchmark but those whose module sets
    ``DEFAULT = False`` (they run only when named, e.g. the hour-long time to quality)."""
    return [
        name for name in available() if getattr(importlib.import_module(f"bench.{name}"), "DEFAULT", True)
    ]


def markdown(results: dict[str, dict[str, object]]) -> str:
    lines = ["| benchmark | figure | value |", "|---|---|---|"]
    for name, figures in results.items():
        for key, value in figures.items():
            shown = f"{value:.4g}" if isinstance(value, float) else str(value)
            lines.append(f"| {name} | {key} | {shown} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make bench", description=__doc__)
    parser.add_argument(
        "names",
        nargs="*",
        help=f"benchmarks to run, of {', '.join(available())} (default: {', '.join(default())})",
    )
    parser.add_argument("--quick", action="store_true", help="smaller inputs, for a smoke run")
    args = parser.parse_args(argv)
    names = args.names or default()
    unknown = sorted(set(names) - set(available()))
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    results: dict[str, dict[str, object]] = {}
    for name in names:
        print(f"== bench {name}", flush=True)
        module = importlib.import_module(f"bench.{name}")
        results[name] = module.run(args)
        print(json.dumps(results[name], ensure_ascii=False, indent=1), flush=True)
    out = work_dir() / "bench"
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out / f"bench-{stamp}.json").write_text(json.dumps(results, ensure_ascii=False, indent=1))
    (out / "latest.md").write_text(markdown(results))
    print(markdown(results))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    from model.training.omp import set_omp_wait_policy

    set_omp_wait_policy("bench")
    sys.exit(main())

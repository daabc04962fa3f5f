"""Crawler throughput: pages per second crawling the local mirror (both spiders), with one
process and with two processes sharing the crawl through Redis; each run is checked for
every pair exactly once.

Pages per second are counted by the mirror: pages served between its first and last
request, so process start-up and the distributed idle wait before closing do not count.
CPU milliseconds per page (the crawler processes' user + system time, start-up included)
say more than pages per second when other work shares the machine.

A resumed crawl: ``python -m crawler --mirror`` killed with SIGKILL once half the pairs are
written, then ``--mirror --resume`` (which serves the mirror on a new port): the pages the
resume fetched (its stats' ``downloader/response_count``), its download errors and its wall
time, over a few kills, as median and range. The resume must end with every pair once.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from crawler.couplet_lines import looks_like_couplet
from crawler.mirror.layouts import build_site
from crawler.mirror.pages import Site
from crawler.mirror.pairs import HAND_PAIRS, corpus_pairs
from crawler.mirror.server import MirrorServer
from data.paths import ROOT, corpus_dir

SPIDERS = ("sina", "prose")


def _cmd(out: Path, mirror: MirrorServer, site: Site, redis_url: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "crawler", *SPIDERS, "--fast", "--out", str(out)]
    for name in SPIDERS:
        cmd += ["-a", f"{name}:start_urls={mirror.url(site.start[name])}"]
    cmd += ["-a", "prose:follow=/wenzhang/", "-a", "prose:depth=5"]
    if redis_url:
        # A process that is early may wait a while for the first links to appear.
        cmd += ["--redis-url", redis_url, "-s", "DISTRIBUTED_IDLE_CLOSE=5"]
    return cmd


def _crawl(site: Site, outs: list[Path], redis_url: str | None) -> dict[str, Any]:
    # The mirror holds its answers until every process is up, so that all start together.
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with MirrorServer(site, held=True) as mirror:
        procs, logs = [], []
        for out in outs:
            out.mkdir(parents=True, exist_ok=True)
            logs.append(out.parent / f"{out.name}.log")  # kept for a look after a failed run
            with logs[-1].open("wb") as log:
                cmd = _cmd(out, mirror, site, redis_url)
                procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            opened = [log.read_text(errors="replace").count("Spider opened") for log in logs]
            if min(opened) >= len(SPIDERS):
                break
            time.sleep(0.02)
        mirror.release()
        codes = [p.wait(timeout=1800) for p in procs]
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    pages = sum(n for path, n in mirror.hits.items() if path.endswith(".html"))
    span = (mirror.last_hit or 0) - (mirror.first_hit or 0)
    exact = all(code == 0 for code in codes)
    per_process = []
    forms: Counter[str] = Counter()
    for name in SPIDERS:
        items = []
        for out in outs:
            if (out / f"{name}.jsonl").exists():
                with (out / f"{name}.jsonl").open(encoding="utf-8") as f:
                    items += [json.loads(line) for line in f]
        pairs = [(o["upper"], o["lower"]) for o in items]
        forms.update(o["form"] for o in items)
        exact &= len(pairs) == len(set(pairs)) and set(pairs) == site.expected[name]
    for out in outs:
        per_process.append(
            sum(
                json.loads((out / f"{n}.stats.json").read_text()).get("response_received_count", 0)
                if (out / f"{n}.stats.json").exists()
                else 0
                for n in SPIDERS
            )
        )
    return {
        "forms": forms,
        "pages": pages,
        "pages_per_s": pages / span,
        "cpu_ms_per_page": 1000 * cpu / pages,
        "exact": exact,
        "per_process": per_process,
    }


def _pairs_written(out: Path) -> int:
    total = 0
    for name in SPIDERS:
        path = out / f"{name}.jsonl"
        if path.exists():
            with path.open("rb") as f:
                total += sum(1 for line in f if line.endswith(b"\n"))
    return total


def resume_once(n_pairs: int, out: Path, root: Path = ROOT) -> dict[str, Any]:
    """``python -m crawler --mirror`` (the code under ``root``) killed with SIGKILL once half
    of the pairs are written, then resumed with ``--mirror --resume``: what the resume did."""
    pairs = corpus_pairs(n_pairs) or HAND_PAIRS  # the CLI's own mirror (same sample, seed 0)
    total = sum(len(v) for v in build_site(pairs).expected.values())
    cmd = [
        sys.executable,
        "-m",
        "crawler",
        *SPIDERS,
        "--mirror",
        "--mirror-pairs",
        str(n_pairs),
        "--out",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(root)}
    out.mkdir(parents=True, exist_ok=True)
    with (out / "first.log").open("wb") as log:
        proc = subprocess.Popen(cmd, cwd=root, stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 600
    while _pairs_written(out) < total // 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is not None:
        raise RuntimeError(f"the crawl ended before the kill: see {out / 'first.log'}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before_kill = _pairs_written(out)
    start = time.monotonic()
    with (out / "resume.log").open("wb") as log:
        code = subprocess.call([*cmd, "--resume"], cwd=root, stdout=log, stderr=subprocess.STDOUT, env=env)
    seconds = time.monotonic() - start
    stats = [json.loads((out / f"{name}.stats.json").read_text()) for name in SPIDERS]
    return {
        "pairs_before_kill": before_kill,
        "pages": [s.get("downloader/response_count", 0) for s in stats],
        "errors": sum(s.get("downloader/exception_count", 0) for s in stats),
        "crawl_seconds": max(s.get("elapsed_time_seconds", 0) for s in stats),  # the spiders run together
        "seconds": seconds,
        "exact": code == 0,  # the CLI checks the mirror's pairs: each once, none missing
    }


def _spread(values: list[float], digits: int = 1) -> str:
    """Median [min, max]."""
    mid, low, high = (round(v, digits) for v in (statistics.median(values), min(values), max(values)))
    return f"{mid} [{low}, {high}]"


def resume_figures(n_pairs: int, repeats: int, tmp: Path, root: Path = ROOT) -> dict[str, object]:
    runs = [resume_once(n_pairs, tmp / f"resume-{i}", root) for i in range(repeats)]
    return {
        "resume_mirror_pairs": n_pairs,
        "resume_runs": repeats,
        "resume_pages_fetched": _spread([sum(r["pages"]) for r in runs], 0),
        "resume_pages_fetched_per_spider": " / ".join(
            _spread([r["pages"][i] for r in runs], 0) for i in range(len(SPIDERS))
        ),
        "resume_download_errors": _spread([r["errors"] for r in runs], 0),
        "resume_wall_s": _spread([r["seconds"] for r in runs]),  # process start-up and mirror included
        "resume_crawl_s": _spread([r["crawl_seconds"] for r in runs]),  # Scrapy's elapsed time
        "resume_exact": all(r["exact"] for r in runs),
    }


def _adjacent_recall() -> float | None:
    """Share of the human test pairs that the strict two-bare-lines rule accepts."""
    path = corpus_dir() / "wb14123_test.tsv"
    if not path.exists():
        return None
    with path.open(encoding="utf-8") as f:
        pairs = [line.rstrip("\n").split("\t") for line in f]
    return sum(looks_like_couplet(p[0], p[1]) for p in pairs if len(p) == 2) / len(pairs)


def run(args: Any) -> dict[str, object]:
    n = 300 if args.quick else 3000
    pairs = corpus_pairs(n, seed=1) or HAND_PAIRS
    site = build_site(pairs, per_article=2 if args.quick else 4)
    tmp = Path(tempfile.mkdtemp(prefix="bench-crawl-"))
    try:
        one = _crawl(site, [tmp / "one"], None)
        figures: dict[str, object] = {
            "mirror_pages": site.n_pages,
            "mirror_pairs": sum(len(v) for v in site.expected.values()),
            "one_process_pages_per_s": round(one["pages_per_s"], 1),
            "one_process_exact": one["exact"],
            # CPU time of the crawler processes (start-up included) per page: steadier than
            # pages per second on a shared machine
            "one_process_cpu_ms_per_page": round(one["cpu_ms_per_page"], 2),
            **{f"extracted_{form}": n for form, n in sorted(one["forms"].items())},
        }
        figures.update(resume_figures(300 if args.quick else 3000, 1 if args.quick else 3, tmp))
        recall = _adjacent_recall()
        if recall is not None:
            figures["bare_line_rule_recall_wb14123_test"] = round(recall, 4)
        if shutil.which("redis-server") is None:
            figures["two_processes"] = "skipped: no redis-server"
            return figures
        from crawler.localredis import LocalRedis

        with LocalRedis() as url:
            two = _crawl(site, [tmp / "a", tmp / "b"], url)
        figures.update(
            two_processes_pages_per_s=round(two["pages_per_s"], 1),
            two_processes_exact=two["exact"],
            two_processes_cpu_ms_per_page=round(two["cpu_ms_per_page"], 2),
            two_processes_pages_each=" / ".join(map(str, two["per_process"])),
            speedup=round(two["pages_per_s"] / one["pages_per_s"], 2),
        )
        return figures
    finally:
        if not getattr(args, "keep", False):
            shutil.rmtree(tmp, ignore_errors=True)

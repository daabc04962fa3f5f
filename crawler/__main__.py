"""`make crawl`: crawl couplet pairs into work/crawl/<spider>.jsonl.

Examples::

    python -m crawler                       # both spiders, the real sites, politely
    python -m crawler --mirror              # offline demo: serve the local mirror, crawl it, check
    python -m crawler sina --resume         # continue a crawl that was stopped or killed
    python -m crawler --mirror --resume     # the same on the mirror (served on a new port)
    python -m crawler sina --redis-url redis://127.0.0.1:6379/0   # one of several processes
    python -m crawler site -a urls=https://example.org/lian/ -a allow=/lian/ -a depth=2
    python -m crawler site -a sitemap=https://example.org/robots.txt -a allow=/lian/
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from data.paths import work_dir

SPIDERS = ("sina", "prose", "site")
DEFAULT_SPIDERS = ("sina", "prose")  # the site spider runs when named, on the URLs it is given
SITE_SOURCES = ("urls", "urls_file", "sitemap", "start_urls")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m crawler", description=__doc__.split("\n")[0])
    p.add_argument(
        "spiders",
        nargs="*",
        help=f"spiders to run: {', '.join(SPIDERS)} (default: {', '.join(DEFAULT_SPIDERS)})",
    )
    p.add_argument(
        "--out", type=Path, default=work_dir() / "crawl", help="output folder (default %(default)s)"
    )
    p.add_argument("--resume", action="store_true", help="continue the crawl in --out (else start afresh)")
    p.add_argument(
        "--rebase",
        action="store_true",
        help="with --resume, when the site moved (another host or port): continue the crawl"
        " recorded at the old start URLs' origin at the new one (on with --mirror)",
    )
    p.add_argument("--redis-url", help="distributed mode: share the queue and dupe filter in this Redis")
    p.add_argument(
        "--flush-redis",
        action="store_true",
        help="clear the Redis keys of a finished crawl first (one process only)",
    )
    p.add_argument("--mirror", action="store_true", help="serve the local mirror and crawl it (offline demo)")
    p.add_argument("--mirror-pairs", type=int, default=300, help="corpus pairs in the mirror, if present")
    p.add_argument("--fast", action="store_true", help="no politeness delays (for loopback only)")
    p.add_argument("--cache", action="store_true", help="HTTP cache for development")
    p.add_argument("--start-url", action="append", default=[], help="start URL(s) instead of the default")
    p.add_argument(
        "-a",
        dest="spider_args",
        action="append",
        default=[],
        metavar="[SPIDER:]NAME=VALUE",
        help="spider argument",
    )
    p.add_argument(
        "-s", dest="settings", action="append", default=[], metavar="NAME=VALUE", help="Scrapy setting"
    )
    return p.parse_args(argv)


def pairs_in(path: Path) -> list[tuple[str, str]]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as f:
        return [(o["upper"], o["lower"]) for o in map(json.loads, f)]


def settings_for(args: argparse.Namespace) -> Any:
    from scrapy.utils.project import get_project_settings

    from crawler import settings as defaults

    settings = get_project_settings()
    out = args.out.resolve()
    feed = {"format": "jsonlines", "encoding": "utf-8", "overwrite": False}
    settings.set("FEEDS", {str(out / "%(name)s.jsonl"): feed})
    settings.set("STATS_FILE", str(out / "%(name)s.stats.json"))
    if args.fast or args.mirror:
        settings.update(defaults.FAST_SETTINGS)
    if args.cache:
        settings.set("HTTPCACHE_ENABLED", True)
    if args.redis_url:
        settings.set("REDIS_URL", args.redis_url)
    if args.rebase or args.mirror:  # the mirror is served on a new free port by every run
        settings.set("JOURNAL_REBASE", True)
    for pair in args.settings:
        key, _, value = pair.partition("=")
        settings.set(key, value, priority="cmdline")
    return settings


def prepare(args: argparse.Namespace, names: list[str], settings: Any) -> None:
    """Start afresh unless resuming: remove the outputs, journals and Redis keys."""
    out = args.out.resolve()
    if not args.resume:
        for name in names:
            for path in (out / f"{name}.jsonl", out / f"{name}.stats.json"):
                path.unlink(missing_ok=True)
            shutil.rmtree(out / "jobs" / name, ignore_errors=True)
    if args.redis_url and args.flush_redis:
        import redis

        server = redis.Redis.from_url(args.redis_url)
        for name in names:
            server.delete(
                f"{name}:requests", f"{name}:dupefilter", settings.get("DEDUP_REDIS_KEY") % {"spider": name}
            )


def crawl(args: argparse.Namespace, names: list[str], spider_args: dict[str, dict[str, Any]]) -> int:
    from scrapy.crawler import Crawler, CrawlerProcess
    from scrapy.spiderloader import SpiderLoader

    settings = settings_for(args)
    prepare(args, names, settings)
    loader = SpiderLoader.from_settings(settings)
    process = CrawlerProcess(settings)
    for i, name in enumerate(names):
        own = settings.copy()
        if not args.redis_url and not own.get("JOBDIR"):
            own.set("JOBDIR", str(args.out.resolve() / "jobs" / name))
        process.crawl(Crawler(loader.load(name), own, init_reactor=i == 0), **spider_args.get(name, {}))
    process.start()
    failed = [name for name in names if not report(args.out, name)]
    return 1 if process.bootstrap_failed or failed else 0


def policy_drops(stats: dict[str, Any]) -> dict[str, int]:
    """Pairs the validation pipeline refused, per rule (``validate/dropped/<reason>``)."""
    prefix = "validate/dropped/"
    return {k.removeprefix(prefix): int(v) for k, v in sorted(stats.items()) if k.startswith(prefix)}


def report(out: Path, name: str) -> bool:
    """Print one spider's outcome from its stats file; False when it fetched no page at all
    because every download failed (a wrong host, no network), which is not a finished crawl."""
    path = out / f"{name}.stats.json"
    if not path.exists():
        return True  # the spider never opened (bootstrap failure, reported by Scrapy)
    stats = json.loads(path.read_text(encoding="utf-8"))
    pages = stats.get("downloader/response_count", 0)
    errors = stats.get("downloader/exception_count", 0)
    print(
        f"{name}: {stats.get('item_scraped_count', 0)} pairs written, {pages} pages fetched, "
        f"{errors} download errors ({stats.get('finish_reason', '?')}) -> {out / f'{name}.jsonl'}",
        flush=True,
    )
    dropped = policy_drops(stats)
    if dropped:
        # pairs extracted but refused by a validation rule: not extraction misses
        counts = ", ".join(f"{reason} {n}" for reason, n in dropped.items())
        print(f"{name}: {sum(dropped.values())} pairs refused by validation ({counts})", flush=True)
    if pages or not errors:
        return True
    prefix = "downloader/exception_type_count/"
    kinds = sorted(k.removeprefix(prefix).rpartition(".")[2] for k in stats if k.startswith(prefix))
    print(
        f"{name}: no page could be fetched ({', '.join(kinds)}); check the start URL and the network",
        file=sys.stderr,
    )
    return False


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = list(args.spiders) or list(DEFAULT_SPIDERS)
    if set(names) - set(SPIDERS):
        sys.exit(f"unknown spider(s): {', '.join(sorted(set(names) - set(SPIDERS)))}")
    spider_args: dict[str, dict[str, Any]] = {name: {} for name in names}
    for pair in args.spider_args:
        key, _, value = pair.partition("=")
        only, _, key = key.rpartition(":")  # "sina:start_urls=..." is for one spider
        for name in names:
            if not only or only == name:
                spider_args[name][key] = value
    if args.start_url:
        urls = {u: urlparse(u) for u in args.start_url}
        bad = [u for u, parts in urls.items() if parts.scheme not in ("http", "https") or not parts.netloc]
        if bad:  # refused before the outputs of a fresh crawl are cleared
            sys.exit(f"--start-url takes http(s) URLs, not {', '.join(map(repr, bad))}")
        for name in names:
            spider_args[name]["start_urls"] = args.start_url
    if "site" in names and not args.mirror and not set(SITE_SOURCES) & set(spider_args["site"]):
        sys.exit("the site spider needs -a urls=URL,..., -a urls_file=FILE, -a sitemap=URL or --start-url")
    if args.out.exists() and not args.out.is_dir():
        sys.exit(f"--out {args.out} is a file; name a folder for the crawl's outputs")
    if args.redis_url and urlparse(args.redis_url).scheme not in ("redis", "rediss", "unix"):
        sys.exit(f"--redis-url takes redis://host:port (or rediss://, unix://), not {args.redis_url!r}")
    if not args.mirror:
        return crawl(args, names, spider_args)

    from crawler.mirror.layouts import build_site
    from crawler.mirror.pairs import HAND_PAIRS, corpus_pairs
    from crawler.mirror.server import MirrorServer

    pairs = corpus_pairs(args.mirror_pairs) or HAND_PAIRS
    site = build_site(pairs)
    with MirrorServer(site) as mirror:
        site.start["site"], site.expected["site"] = site.start["prose"], site.expected["prose"]
        for name in names:
            spider_args[name].setdefault("start_urls", mirror.url(site.start[name]))
        spider_args.get("prose", {}).update(follow="/wenzhang/", depth=5)
        spider_args.get("site", {}).update(allow="/wenzhang/", depth=5)
        print(f"mirror on {mirror.url()}: {site.summary()}", flush=True)
        ok = crawl(args, names, spider_args) == 0
    for name in names:
        got = pairs_in(args.out / f"{name}.jsonl")
        missing, extra = site.expected[name] - set(got), set(got) - site.expected[name]
        doubled = len(got) - len(set(got))
        ok &= not (missing or extra or doubled)
        print(
            f"{name}: {len(got)} pairs written, {len(site.expected[name])} on the mirror; "
            f"missing {len(missing)}, not on the mirror {len(extra)}, doubled {doubled}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

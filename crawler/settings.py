"""Scrapy settings of the duilian crawler (``SCRAPY_SETTINGS_MODULE=crawler.settings``).

Polite by default: robots.txt, a per-domain delay, AutoThrottle. Against the loopback
mirror, tests and benchmarks turn the delays off with ``FAST_SETTINGS`` (the CLI's
``--fast``, on with ``--mirror``).
"""

from __future__ import annotations

from data.paths import work_dir

BOT_NAME = "duilian"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"

PROJECT_URL = "https://github.com/duilian/duilian"  # where a site owner can read what we do
USER_AGENT = f"duilian-crawler/0.1 (Chinese couplet research; +{PROJECT_URL})"
ROBOTSTXT_OBEY = True

# Manners: one site at a time, gently.
CONCURRENT_REQUESTS = 16
CONCURRENT_ITEMS = 16  # a page holds a handful of pairs; 100 idle workers per page cost CPU
CONCURRENT_REQUESTS_PER_DOMAIN = 2
DOWNLOAD_DELAY = 2.0
DOWNLOAD_DELAY_JITTER = 0.5  # ±50% around DOWNLOAD_DELAY
AUTOTHROTTLE_ENABLED = True
AUTOTHROTTLE_START_DELAY = 2.0
AUTOTHROTTLE_MAX_DELAY = 30.0
AUTOTHROTTLE_TARGET_CONCURRENCY = 1.0
DOWNLOAD_TIMEOUT = 30

# Resilience: retry server errors and timeouts.
RETRY_ENABLED = True
RETRY_TIMES = 2
RETRY_HTTP_CODES = [500, 502, 503, 504, 522, 524, 408, 429]

# Development: `python -m crawler --cache` keeps every response for a day.
HTTPCACHE_ENABLED = False
HTTPCACHE_DIR = str(work_dir() / "crawl" / "httpcache")
HTTPCACHE_EXPIRATION_SECS = 24 * 3600
HTTPCACHE_IGNORE_HTTP_CODES = [500, 502, 503, 504, 408, 429]

# Pages in GBK/GB18030 are decoded from the header or <meta> charset by Scrapy (w3lib
# decodes gb2312 and gbk with the GB18030 decoder, its superset); no setting needed
# beyond a sane default for the rest.
DEFAULT_RESPONSE_ENCODING = "utf-8"

ITEM_PIPELINES = {
    "crawler.pipelines.NormalisePipeline": 100,
    "crawler.pipelines.ValidatePipeline": 200,
    "crawler.pipelines.DedupPipeline": 300,
}
SPIDER_MIDDLEWARES = {"crawler.journal.JournalMiddleware": 10}
DOWNLOADER_MIDDLEWARES = {  # the same place, with a fix (see crawler/robots.py)
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "crawler.robots.RobotsTxtMiddleware": 100,
}
EXTENSIONS = {"crawler.distributed.SharedQueueIdle": 500, "crawler.statsfile.StatsFile": 600}
STATS_FILE = None  # e.g. "work/crawl/%(name)s.stats.json"; the CLI sets it

# One scheduler class that picks: scrapy-redis (REDIS_URL), the crash-safe journal
# (JOBDIR), or Scrapy's in-memory scheduler.
SCHEDULER = "crawler.journal.AutoScheduler"
REDIS_URL = None
# A resumed crawl whose start URLs moved to another origin (the local mirror's new port)
# takes the journal's requests there (crawler/journal.py); the CLI's --rebase.
JOURNAL_REBASE = False
SCHEDULER_PERSIST = True  # the first process to finish must not flush the shared queue
SCHEDULER_QUEUE_CLASS = "scrapy_redis.queue.PriorityQueue"
SCHEDULER_DUPEFILTER_CLASS = "scrapy_redis.dupefilter.RFPDupeFilter"
DEDUP_REDIS_KEY = "%(spider)s:pairs"
DISTRIBUTED_IDLE_CLOSE = 5.0

FEEDS = {
    str(work_dir() / "crawl" / "%(name)s.jsonl"): {
        "format": "jsonlines",
        "encoding": "utf-8",
        "overwrite": False,  # appended, so that a resumed crawl keeps what it wrote
    }
}
FEED_STORAGES = {
    "": "crawler.feeds.UnbufferedFileFeedStorage",
    "file": "crawler.feeds.UnbufferedFileFeedStorage",
}
FEED_EXPORT_ENCODING = "utf-8"

LOG_LEVEL = "INFO"
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False

# For the loopback mirror only: no delays, more parallel requests.
FAST_SETTINGS = {
    "DOWNLOAD_DELAY": 0,
    "DOWNLOAD_DELAY_JITTER": 0,
    "AUTOTHROTTLE_START_DELAY": 0,
    "AUTOTHROTTLE_MAX_DELAY": 0.5,
    "AUTOTHROTTLE_TARGET_CONCURRENCY": 8.0,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
    "DISTRIBUTED_IDLE_CLOSE": 1.5,
}

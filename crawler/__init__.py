"""The couplet crawler, a Scrapy project (``SCRAPY_SETTINGS_MODULE=crawler.settings``).

``spiders/`` only crawl and yield items; ``extract.py`` holds the pure extraction (with
``pages``, ``page_text``, ``couplet_lines``, ``stories``, ``cued_pairs``, ``list_pairs``);
``pipelines.py`` normalises, validates and deduplicates; ``journal.py`` makes a JOBDIR
crawl survive SIGKILL; ``distributed.py`` runs the same spiders on scrapy-redis;
``robots.py`` fixes robots.txt for requests that wait for it; ``mirror/`` is the local
test site; ``python -m crawler`` is ``make crawl``.
"""

"""robots.txt obeyed by every request, also by those that arrive while it is being fetched.

Scrapy 2.19's ``RobotsTxtMiddleware`` makes the requests for a site that come in while its
robots.txt is downloading wait on one shared ``Deferred``. They wait through
``Deferred.asFuture``, whose callback returns None: the first waiter gets the parser, every
later one gets None, which the middleware reads as "no robots.txt" and lets through. A
crawl that starts with several requests to one site (two start URLs, or a process joining
a distributed crawl) fetches forbidden pages. Here each waiter gets its own Deferred,
chained to the shared one without consuming its result.
"""

from __future__ import annotations

from typing import Any

from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware as ScrapyRobotsTxtMiddleware
from scrapy.http import Request
from scrapy.robotstxt import RobotParser
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred


class RobotsTxtMiddleware(ScrapyRobotsTxtMiddleware):
    async def robot_parser(self, request: Request) -> RobotParser | None:
        shared = self._parsers.get(urlparse_cached(request).netloc)
        if not isinstance(shared, Deferred):
            return await super().robot_parser(request)
        own: Deferred[RobotParser | None] = Deferred()

        def relay(result: Any) -> Any:
            own.callback(result)
            return result  # left for the next waiter

        shared.addCallback(relay)
        return await maybe_deferred_to_future(own)

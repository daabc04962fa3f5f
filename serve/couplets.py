"""The service as the site runs it: the in-process service (duilian/service.py's
``LoadedModel``), or its decode worker processes (serve/pool.py's ``PooledModel``), behind
micro-batching (serve/batching.py), a result cache, the known-lines index and reloads
(``CoupletService``).

A ``LoadedModel`` is immutable once built; ``CoupletService.reload`` builds a new one
beside the old and swaps one reference, so a request that started on the old model
finishes on it and no request ever sees a half-loaded model.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from data.sensitive import SensitiveFilter
from duilian.check import CheckReport
from duilian.engine import DEFAULT_ENGINE, Engine
from duilian.inputs import AlternativesQuery, Query
from duilian.service import LoadedModel, word_filter
from duilian.suggestions import Suggestions
from model.decoding.answer import Alternatives, Answer
from serve.batching import DecodeBatcher
from serve.known_lines import KnownLines
from serve.logs import LogSetup
from serve.pool import PooledModel
from serve.settings import Settings
from serve.shared_cache import SharedCache

log = logging.getLogger(__name__)


def extra_filter(settings: Settings) -> SensitiveFilter | None:
    """The configured extra word list (with its allow-list, else the data stage's), if any."""
    if settings.sensitive_words is None:
        return None
    return word_filter(settings.sensitive_words, settings.sensitive_allow)


Served = LoadedModel | PooledModel


def load_served(
    path: Path,
    extra: SensitiveFilter | None = None,
    engine: Engine = DEFAULT_ENGINE,
    processes: int = 0,
    threads: int = 1,
    restart_wait: float = 30.0,
    logs: LogSetup | None = None,
    banners: Path | None = None,
) -> Served:
    """The model as the server runs it: decoding in ``processes`` worker processes, or in
    the server's own threads when 0; ``banners``: a 横批 table other than the bundle's."""
    if processes > 0:
        return PooledModel(path, extra, engine, processes, threads, restart_wait, logs, banners)
    return LoadedModel.load(path, extra, engine, banners=banners)


class Busy(Exception):
    """More decodes are waiting than the server takes on (``reason``: ``queue_full``), or more
    long lines than its long lane takes on (``long_lane_full``); ``retry_after`` in seconds."""

    def __init__(self, retry_after: int = 1, reason: str = "queue_full") -> None:
        super().__init__(reason)
        self.retry_after, self.reason = retry_after, reason


class CoupletService:
    """The current model, a result cache per model, the known-lines index, and reloading."""

    def __init__(
        self,
        model: Served,
        *,
        oversample: int,
        cache_size: int,
        concurrency: int,
        threads: int = 1,
        max_batch: int = 16,
        max_pending: int = 256,
        long_chars: int = 0,
        long_workers: int = 1,
        long_pending: int = 4,
        loader: Callable[[Path], Served] = LoadedModel.load,
    ) -> None:
        self.model = model
        self.loader = loader  # how reload builds a model: the same filters and precision
        self.known: KnownLines | None = None
        self.batcher = DecodeBatcher(
            oversample,
            workers=concurrency,
            threads=threads,
            max_batch=max_batch,
            long_chars=long_chars,
            long_workers=long_workers,
        )
        self.long_pending = long_pending  # long lines waiting at most (serve/admission.py)
        self.batcher.finish = self._finish
        self._cache: OrderedDict[tuple[str, Query], Answer] = OrderedDict()
        self._cache_size = cache_size
        self.max_pending = max_pending
        self.cache_hits = self.cache_misses = 0  # read by serve.observability's metrics
        self._unbatched = 0  # alternatives and suggestions being answered (``pending``)
        self._in_use: Counter[int] = Counter()  # requests holding a model, by id(model) (``_using``)
        self._cache_lock = threading.Lock()
        self._reload_lock = threading.Lock()
        self.shared: SharedCache | None = None  # answers shared with other servers (Settings.shared_cache)

    async def generate(self, q: Query) -> Answer:
        with self._using() as model:  # one read: a reload mid-request does not mix two models
            return await self._generate(model, q)

    async def _generate(self, model: Served, q: Query) -> Answer:
        key = (model.version, q)
        with self._cache_lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
        if hit is not None:
            self.cache_hits += 1
            answer = hit
        else:
            shared = await self.shared.get(model.version, q) if self.shared is not None else None
            self.cache_hits += shared is not None
            self.cache_misses += shared is None
            if shared is not None:
                answer = shared
            else:
                if self.pending >= self.max_pending:  # shed load rather than queue without end
                    raise Busy
                if self.batcher.is_long(q) and self.batcher.long_pending >= self.long_pending:
                    raise Busy(max(1, math.ceil(self.batcher.long_wait())), "long_lane_full")
                answer = await asyncio.wrap_future(self.batcher.submit(model, q))  # finished: ``_finish``
                if self.shared is not None:
                    await self.shared.put(model.version, q, answer)
            with self._cache_lock:
                self._cache[key] = answer
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return answer

    def _finish(self, model: Served, query: Query, answer: Answer) -> Answer:
        """In the decode thread (off the event loop): the known lower lines (the corpus file's
        when one is configured, else the bundle's) and the 横批, as the command line adds them."""
        return model.finish(query, answer, self.known)

    async def alternatives(self, q: AlternativesQuery) -> Alternatives:
        """The characters for one position of a lower line (``LoadedModel.alternatives``)."""
        with self._using() as model:
            found: Alternatives = await self._off_batch(model.alternatives, q)
        return found

    async def suggestions(self, report: CheckReport) -> Suggestions:
        """The suggestions for a checked couplet (``LoadedModel.suggestions``): all its places in
        one call, so one worker walks the line once and sends back only what is shown."""
        with self._using() as model:
            found: Suggestions = await self._off_batch(model.suggestions, report)
        return found

    @contextmanager
    def _using(self) -> Iterator[Served]:
        """The current model, held until the request is answered: read under the lock the swap
        takes, so a reload retires the old model only once no request holds it."""
        with self._cache_lock:
            model = self.model
            self._in_use[id(model)] += 1
        try:
            yield model
        finally:
            with self._cache_lock:
                self._in_use[id(model)] -= 1
                if not self._in_use[id(model)]:
                    del self._in_use[id(model)]

    async def _off_batch(self, method: Callable[[Any], Any], arg: object) -> Any:
        """``method(arg)`` of a model, in a decode worker or a thread of this process: not batched
        with generate's lines and not cached, but counted toward ``max_pending`` as they are."""
        if self.pending >= self.max_pending:
            raise Busy
        with self._cache_lock:
            self._unbatched += 1
        try:
            return await asyncio.to_thread(method, arg)
        finally:
            with self._cache_lock:
                self._unbatched -= 1

    @property
    def pending(self) -> int:
        """Decodes waiting or running: generate's in the batcher, and alternatives."""
        with self._cache_lock:
            return self.batcher.pending + self._unbatched

    def reload(self, path: Path) -> tuple[str, str, float]:
        """Load ``path`` beside the serving model, then swap (one reload at a time)."""
        with self._reload_lock:
            start = time.perf_counter()
            new = self.loader(path)
            with self._cache_lock:
                old, self.model = self.model, new
                self._cache.clear()
            if isinstance(old, PooledModel):  # its workers go once its last requests are answered
                threading.Thread(target=self._retire, args=(old,), daemon=True).start()
            log.info("reloaded model %s -> %s from %s", old.version, new.version, path)
            return new.version, old.version, time.perf_counter() - start

    def _retire(self, old: PooledModel) -> None:
        while self.batcher.holds(old) or self._in_use.get(id(old), 0):
            time.sleep(0.05)
        old.close()

    def close(self) -> None:
        self.batcher.close()
        if isinstance(self.model, PooledModel):
            self.model.close()

    def workers(self) -> tuple[int, int]:
        """Decode worker processes alive and wanted (0, 0: the server decodes itself)."""
        model = self.model
        return (model.alive, model.processes) if isinstance(model, PooledModel) else (0, 0)

    def healthy(self) -> bool:
        model = self.model
        return model.healthy if isinstance(model, PooledModel) else True

    def load_known(self, path: Path) -> None:
        try:
            self.known = KnownLines.from_file(path)
        except OSError as exc:  # the site works without them; say why they are missing
            log.warning("known lower lines not loaded from %s: %s", path, exc)

    def info(self) -> dict[str, Any]:
        return self.model.info()

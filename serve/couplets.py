"""The loaded model and what the API asks of it: candidates, tones, rule reports, flags.

A ``LoadedModel`` is immutable once built; ``CoupletService.reload`` builds a new one
beside the old and swaps one reference, so a request that started on the old model
finishes on it and no request ever sees a half-loaded model.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from data.sensitive import ALLOW_LIST, SensitiveFilter, read_words
from model.bundle import MODEL_FILE, Bundle, load_bundle
from model.decode import MAX_CANDIDATES, DecodeOptions, Decoder
from model.rules import HARD_RULES
from model.tones import line_tones, mark
from serve.known_lines import KnownLines
from serve.schemas import Candidate, GenerateResponse, RuleReportOut
from serve.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Query:
    upper: str
    n: int
    tone_mode: str = "modern"
    locks: str | None = None
    required_first: str | None = None
    required_chars: str | None = None


def report_out(report: dict[str, bool | float | None]) -> RuleReportOut:
    """A rule report (``RuleReport.as_dict()``) with its hard-rule verdict."""
    return RuleReportOut(**report, hard_ok=all(report[name] for name in HARD_RULES))  # type: ignore[arg-type]


def tone_marks(line: str, mode: str) -> list[str]:
    return [mark(t) for t in line_tones(line, mode)]


def _version(bundle: Bundle) -> str:
    named = bundle.meta.get("version")
    if named:
        return str(named)
    digest = hashlib.blake2b((bundle.path / MODEL_FILE).read_bytes(), digest_size=4).hexdigest()
    return f"step{bundle.meta.get('step', 0)}-{digest}"


def allow_list() -> list[str]:
    return read_words(ALLOW_LIST) if ALLOW_LIST.is_file() else []


def extra_filter(settings: Settings) -> SensitiveFilter | None:
    """The configured extra word list (with its allow-list, else the data stage's), if any."""
    if settings.sensitive_words is None:
        return None
    allow = read_words(settings.sensitive_allow) if settings.sensitive_allow else allow_list()
    return SensitiveFilter(read_words(settings.sensitive_words), allow)


class LoadedModel:
    """One bundle with its decoder and sensitive-word filters, ready to answer."""

    def __init__(self, bundle: Bundle, extra_filter: SensitiveFilter | None = None) -> None:
        self.bundle = bundle
        self.version = _version(bundle)
        self.decoder = Decoder(bundle.model, bundle.vocab)
        bundled = (
            SensitiveFilter.from_hashes(bundle.sensitive_hashes, allow=allow_list())
            if len(bundle.sensitive_hashes)
            else None
        )
        self.filters = [f for f in (bundled, extra_filter) if f is not None]

    @classmethod
    def load(cls, path: Path, extra_filter: SensitiveFilter | None = None) -> LoadedModel:
        return cls(load_bundle(path), extra_filter)

    def is_clean(self, text: str) -> bool:
        return all(f.is_clean(text) for f in self.filters)

    def answer(self, q: Query, oversample: int) -> GenerateResponse:
        """Decode ``n + oversample`` candidates and keep the first ``n`` clean ones."""
        options = DecodeOptions(
            n_best=min(q.n + oversample, MAX_CANDIDATES),
            tone_mode=q.tone_mode,
            locks=q.locks,
            required_first=q.required_first,
            required_chars=q.required_chars or "",
        )
        with torch.inference_mode():
            result = self.decoder.generate(q.upper, options)
        clean = [c for c in result.candidates if self.is_clean(c.text)]
        candidates = [
            Candidate(
                text=c.text,
                score=float(c.score),
                tones=tone_marks(c.text, q.tone_mode),
                report=report_out(c.report),
            )
            for c in clean[: q.n]
        ]
        return GenerateResponse(
            upper=q.upper,
            upper_tones=tone_marks(q.upper, q.tone_mode),
            candidates=candidates,
            in_training_set=self.bundle.in_training_data(q.upper),
            known_lower_lines=[],
            unknown_chars=list(result.unknown_chars),
            upper_ends_level=result.probably_reversed,
            filtered=len(result.candidates) - len(clean),
            model_version=self.version,
        )


class CoupletService:
    """The current model, a result cache per model, the known-lines index, and reloading."""

    def __init__(
        self,
        model: LoadedModel,
        *,
        oversample: int,
        cache_size: int,
        concurrency: int,
        extra_filter: SensitiveFilter | None = None,
    ) -> None:
        self.model = model
        self.oversample = oversample
        self.extra_filter = extra_filter
        self.known: KnownLines | None = None
        self._cache: OrderedDict[tuple[str, Query], GenerateResponse] = OrderedDict()
        self._cache_size = cache_size
        self._cache_lock = threading.Lock()
        self._decoding = threading.BoundedSemaphore(max(concurrency, 1))
        self._reload_lock = threading.Lock()

    def generate(self, q: Query) -> GenerateResponse:
        model = self.model  # one read: a reload mid-request does not mix two models
        key = (model.version, q)
        with self._cache_lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
        if hit is None:
            with self._decoding:
                hit = model.answer(q, self.oversample)
            with self._cache_lock:
                self._cache[key] = hit
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        known = self.known.lowers(q.upper) if self.known is not None else []
        return hit.model_copy(update={"known_lower_lines": known}) if known else hit

    def reload(self, path: Path) -> tuple[str, str, float]:
        """Load ``path`` beside the serving model, warm it up, then swap (one reload at a time)."""
        with self._reload_lock:
            start = time.perf_counter()
            new = LoadedModel.load(path, self.extra_filter)
            new.answer(Query("春风得意", 1), 0)  # first call builds lazy state outside requests
            old, self.model = self.model, new
            with self._cache_lock:
                self._cache.clear()
            log.info("reloaded model %s -> %s from %s", old.version, new.version, path)
            return new.version, old.version, time.perf_counter() - start

    def load_known(self, path: Path) -> None:
        try:
            self.known = KnownLines.from_file(path)
        except OSError as exc:  # the site works without them; say why they are missing
            log.warning("known lower lines not loaded from %s: %s", path, exc)

    def info(self) -> dict[str, Any]:
        b = self.model.bundle
        return {
            "version": self.model.version,
            "path": str(b.path),
            "parameters": sum(p.numel() for p in b.model.parameters()),
            "vocab_size": len(b.vocab),
            "fingerprints": len(b.fingerprints),
            "config": dict(b.meta.get("model_config", {})),
            "model_card": b.model_card,
            "data_card": b.data_card,
            "eval": b.eval,
        }

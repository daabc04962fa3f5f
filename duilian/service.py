"""The couplet service, in-process: a model bundle loaded with its decoder and filters, and
what a person asks of it, answered with model/decoding/answer.py's ``Answer``.

``Library`` is a bundle without its models: version, sensitive-word filters (the bundle's
hashed list with the data stage's allow-list, and an optional extra list), known lower lines,
横批 table, model info, and ``finish``, which adds the known lines and the 横批 to a decoded
answer: the one place the command line and the site add them. ``LoadedModel`` is a
``Library`` with its ``Decoder``: ``answer(query)`` gives the whole answer; ``answer_batch``
decodes queries that differ only in their upper line in one beam search, unfinished.

The site (serve/) runs ``LoadedModel`` in its worker processes and finishes their answers in
its own process (``PooledModel`` is a ``Library``); the command line (duilian/cli.py) runs it
in its own process. Both read the input through duilian/inputs.py, so the same line gives the
same candidates; duilian/engine.py builds the decoder (``Engine``, ``build_decoder``). A
``LoadedModel`` is immutable once built but for its 横批 table, read on first use and again when
its file changes.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from data import tones
from data.banners import BANNERS_FILE, BannerTable
from data.segment import boundaries
from data.sensitive import ALLOW_LIST, SensitiveFilter, read_words
from data.text import REGISTERS
from duilian.banners import banners_for, load_banner_table, with_banners
from duilian.check import CheckReport
from duilian.engine import DEFAULT_ENGINE, Engine, blocked_words, build_decoder
from duilian.inputs import OVERSAMPLE, REVERSE, AlternativesQuery, Query
from duilian.suggest import suggest
from duilian.suggestions import Suggestions
from model.decoding.alternatives import Kept
from model.decoding.answer import Alternatives, Answer, Banner, Candidate
from model.decoding.decoder import Decoder
from model.decoding.options import ALTERNATIVE_POOL, DIVERSE_PENALTY, MAX_CANDIDATES, DecodeOptions
from model.decoding.plan import ConstraintError
from model.store.bundle import Bundle, load_bundle, model_meta
from model.store.layout import WEIGHTS_FILE

log = logging.getLogger(__name__)
RECHECK = 1.0  # seconds between looks at the 横批 table's file
KNOWN_SHOWN = 5  # known lower lines in an answer, from the bundle or the corpus file


def model_version(bundle: Bundle) -> str:
    """The bundle's named version, else its step and a digest of its model's weights file
    (``model.safetensors``)."""
    named = bundle.meta.get("version")
    if named:
        return str(named)
    digest = hashlib.blake2b((bundle.path / WEIGHTS_FILE).read_bytes(), digest_size=4).hexdigest()
    return f"step{bundle.meta.get('step', 0)}-{digest}"


def allow_list() -> list[str]:
    """The data stage's allow-list (data/sensitive_allow.txt), read with every bundle's word list."""
    return read_words(ALLOW_LIST) if ALLOW_LIST.is_file() else []


def word_filter(words: Path, allow: Path | None = None) -> SensitiveFilter:
    """An extra sensitive-word list (one a line), with its allow-list, else the data stage's."""
    return SensitiveFilter(read_words(words), read_words(allow) if allow else allow_list())


class LowerLines(Protocol):
    """An index of training pairs by upper line (the server's corpus file, serve/known_lines.py)."""

    def lowers(self, upper: str, limit: int = 5) -> list[str]: ...


def decode_options(q: Query, n_best: int) -> DecodeOptions:
    return DecodeOptions(
        n_best=min(n_best, MAX_CANDIDATES),
        tone_mode=q.tone_mode,
        locks=q.locks,
        required_first=q.required_first,
        required_chars=q.required_chars or "",
        fast=q.fast,
        diversity=DIVERSE_PENALTY if q.diverse else 0.0,
        register=q.register,
    )


class Library:
    """What a bundle holds besides its models: its version, word filters, known lower lines,
    横批 table and model information. A server's process keeps one for what it answers itself,
    while its decode workers hold the models (``LoadedModel`` is a ``Library`` with a decoder)."""

    def __init__(
        self, bundle: Bundle, extra_filter: SensitiveFilter | None = None, banners: Path | None = None
    ) -> None:
        self.bundle = bundle
        self.version = model_version(bundle)
        bundled = bundle.sensitive_filter(allow_list()) if len(bundle.sensitive_hashes) else None
        self.filters = [f for f in (bundled, extra_filter) if f is not None]
        self.banners_path = banners or bundle.path / BANNERS_FILE  # a configured table, else the bundle's
        self._banners: BannerTable | None = None
        self._banners_key: tuple[Path, float] | None = None  # the file read: path and mtime
        self._banners_seen = -math.inf  # when the file was last looked at
        self._banners_lock = threading.Lock()

    def finish(self, query: Query, answer: Answer, corpus: LowerLines | None = None) -> Answer:
        """A decoded answer with the known lower lines (``corpus``'s, when given, else the
        bundle's) and each candidate's 横批: the one place the site and the command line add them."""
        if not query.reverse:  # the known lines are lower lines of training upper lines
            found = corpus.lowers(query.upper, KNOWN_SHOWN) if corpus is not None else None
            known = self.known_lines(query.upper, found)
            answer = replace(answer, known_lower_lines=known) if known else answer
        table = self.banner_table()
        return with_banners(answer, table, query.tone_mode) if table is not None else answer

    def banners_for(self, upper: str, lower: str, tone_mode: str, n: int) -> list[Banner] | None:
        """Up to ``n`` 横批 for a couplet, best first; None without a table."""
        table = self.banner_table()
        return None if table is None else banners_for(table, upper, lower, tone_mode, n)

    def warm_banners(self) -> None:
        """Load the 横批 table and the tones its marks read now, not in the first requests."""
        if self.banner_table() is not None:
            tones.warm()

    def is_clean(self, text: str, upper: str | None = None) -> bool:
        """No listed word in ``text``; with the ``upper`` line it answers, a word that straddles
        two of that line's words with an end inside one is let through (data/segment.py), as
        the search does."""
        bounds = boundaries(upper) if upper is not None and self.filters else None
        return all(f.is_clean(text, bounds) for f in self.filters)

    def known_lines(self, upper: str, found: list[str] | None = None) -> list[str]:
        """The clean ones of ``found`` (by default the bundle's lower lines for ``upper``), at most
        ``KNOWN_SHOWN``."""
        if found is None:
            found = self.bundle.known_lowers(upper)
        return [w for w in found if self.is_clean(w, upper)][:KNOWN_SHOWN]

    def banner_table(self) -> BannerTable | None:
        """The 横批 table without the phrases the filters refuse, loaded on first use; None when
        there is none. A file replaced while serving is read again: looked at once a ``RECHECK``."""
        with self._banners_lock:
            now = time.monotonic()
            if now - self._banners_seen >= RECHECK:
                self._banners_seen = now
                try:
                    key: tuple[Path, float] | None = (self.banners_path, self.banners_path.stat().st_mtime)
                except OSError:
                    key = None
                if key != self._banners_key:
                    self._banners_key = key
                    self._banners = load_banner_table(self.banners_path, self.is_clean) if key else None
            return self._banners

    def info(self) -> dict[str, Any]:
        """The model's description (``GET /api/v1/model``), read without loading its weights."""
        b = self.bundle
        return {
            "version": self.version,
            "path": str(b.path),
            "parameters": model_meta(b.path).get("n_params", 0),
            "vocab_size": len(b.vocab),
            "fingerprints": len(b.fingerprints),
            "config": dict(b.meta.get("model_config", {})),
            "model_card": b.model_card,
            "data_card": b.data_card,
            "eval": b.eval,
            "fast_mode": b.has_proposer,
            "reverse_model": b.has_reverse,
            "registers": list(REGISTERS[: max(1, int(b.meta.get("model_config", {}).get("n_registers", 0)))]),
        }


class LoadedModel(Library):
    """One bundle with its decoder and sensitive-word filters, ready to answer."""

    def __init__(
        self,
        bundle: Bundle,
        extra_filter: SensitiveFilter | None = None,
        engine: Engine = DEFAULT_ENGINE,
        banners: Path | None = None,
    ) -> None:
        super().__init__(bundle, extra_filter, banners)
        self.decoder = build_decoder(bundle, engine, blocked_words(bundle, extra_filter))
        self.engine = engine
        self._reverse: list[Decoder] = []  # 下联求上联: the reverse model's decoder, built on first use
        self._reverse_lock = threading.Lock()

    @classmethod
    def load(
        cls,
        path: Path,
        extra_filter: SensitiveFilter | None = None,
        engine: Engine = DEFAULT_ENGINE,
        warm: bool = True,
        lazy: bool = False,
        banners: Path | None = None,
    ) -> LoadedModel:
        """The bundle at ``path``, its decoder warmed by one small decode (``warm``: the tables a
        decode builds on first use are built now, not in the first request); ``lazy``: the bundle's
        known lower lines read on first use (``load_bundle``). On ONNX Runtime with a graph
        cache the PyTorch models are read only if the graphs must be exported (``build_decoder``)."""
        model = cls(load_bundle(path, lazy=lazy), extra_filter, engine, banners)
        if warm:
            tones.warm()  # a line whose tones need pypinyin's phrases must not stall a request
            model.answer_batch([Query("春风得意", 1)], 0)
            if model.bundle.has_reverse:
                model.answer_batch([Query("家和万事兴", 1, direction=REVERSE)], 0)
        return model

    def decoder_for(self, direction: str) -> Decoder:
        """The decoder of a direction; ConstraintError when the bundle has no model for it."""
        if direction != REVERSE:
            return self.decoder
        if not self.bundle.has_reverse:
            raise ConstraintError(
                "direction",
                "此模型没有下联求上联的模型（模型包里没有 reverse.safetensors）",
                "this model bundle writes no upper lines for lower lines (it has no reverse.safetensors)",
            )
        return self.reverse_decoder()

    def reverse_decoder(self) -> Decoder:
        """The reverse model's decoder (the bundle must have one), built on first use: the
        command line answering upper lines neither exports nor loads it; a server builds it
        when it warms up (``load(warm=True)``)."""
        with self._reverse_lock:
            if not self._reverse:
                self._reverse.append(
                    build_decoder(self.bundle, self.engine, self.decoder.blocked, reverse=True)
                )
            return self._reverse[0]

    def answer(self, query: Query, oversample: int = OVERSAMPLE, banners: bool = True) -> Answer:
        """The whole answer for one query, as the site gives it with the bundle's own known lower
        lines and 横批 table; raises ``ConstraintError`` (or ``ValueError``) for an impossible one."""
        result = self.answer_batch([query], oversample)[0]
        if isinstance(result, Exception):
            raise result
        return self.finish(query, result) if banners else result

    def answer_batch(self, queries: list[Query], oversample: int) -> list[Answer | Exception]:
        """Answers for queries that differ only in their upper line, decoded as one batch
        (without known lower lines and 横批).

        The decoder is asked for ``n + oversample`` candidates and the first ``n`` clean ones
        are kept; a line that comes up short after the filter is decoded again with the most
        candidates the decoder gives.
        """
        options = decode_options(queries[0], queries[0].n + oversample)
        try:
            decoder = self.decoder_for(queries[0].direction)
        except ConstraintError as exc:
            return [exc for _ in queries]
        try:
            results: list[Answer | Exception] = list(
                decoder.generate_batch([q.upper for q in queries], options)
            )
        except ConstraintError:  # the batch stops at the first impossible line: one by one
            results = [self._decode(decoder, q.upper, options) for q in queries]
        answers: list[Answer | Exception] = []
        for q, result in zip(queries, results, strict=True):
            if isinstance(result, Answer):
                clean = self._clean(result)
                if len(clean) < q.n <= len(result.candidates) and options.n_best < MAX_CANDIDATES:
                    result = self._decode(decoder, q.upper, decode_options(q, MAX_CANDIDATES))
                    clean = self._clean(result) if isinstance(result, Answer) else []
            answers.append(result if isinstance(result, Exception) else self._answer(q, result, clean))
        return answers

    def alternatives(self, query: AlternativesQuery) -> Alternatives:
        """The best characters for ``query.position`` of its lower line, the rest kept, under every
        rule and the query's constraints (``Decoder.alternatives``): ``query.n`` of them and the
        line's own (when it keeps the rules), none a filter refuses (``OVERSAMPLE`` more asked for
        those); raises ``ConstraintError`` when none fits or the input cannot be judged."""
        (found,) = self.alternatives_at([query])
        if isinstance(found, ConstraintError):
            raise found
        return found

    def alternatives_at(
        self, queries: Sequence[AlternativesQuery], kept: Kept | None = None
    ) -> list[Alternatives | ConstraintError]:
        """``alternatives`` of queries that differ in their position only (one line's places: the
        check's suggestions), the line read once (``Decoder.alternatives_at``); each query's answer
        or refusal."""
        q = queries[0]
        if any(replace(other, position=q.position) != q for other in queries):
            raise ValueError("alternatives_at takes queries that differ in their position only")
        options = DecodeOptions(
            tone_mode=q.tone_mode,
            locks=q.locks,
            required_first=q.required_first,
            required_chars=q.required_chars or "",
            rules=q.rules,
        )
        k = min(q.n + 1 + OVERSAMPLE, MAX_CANDIDATES)  # room for the line's own and filtered ones
        found = self.decoder_for(q.direction).alternatives_at(
            q.given, q.written, [x.position for x in queries], options, k, q.pool or ALTERNATIVE_POOL, kept
        )
        return [f if isinstance(f, ConstraintError) else self._cleaned(f, q) for f in found]

    def suggestions(self, report: CheckReport) -> Suggestions:
        """The suggestions for a checked couplet (duilian/suggest.py), all its places in one walk;
        a second ask about the same places only describes more of what the first scored."""
        kept: Kept = {}
        return suggest(report, lambda qs: self.alternatives_at(qs, kept), self.bundle.pairing)

    def _cleaned(self, found: Alternatives, query: AlternativesQuery) -> Alternatives:
        clean = [a for a in found.alternatives if self.is_clean(a.text, query.given)]
        kept = [a for a in clean if not a.original][: query.n]
        kept = sorted(kept + [a for a in clean if a.original], key=lambda a: a.rank_score, reverse=True)
        filtered = len(found.alternatives) - len(clean)
        return replace(found, alternatives=kept, filtered=filtered, model_version=self.version)

    @staticmethod
    def _decode(decoder: Decoder, upper: str, options: DecodeOptions) -> Answer | Exception:
        try:
            return decoder.generate(upper, options)
        except ConstraintError as exc:
            return exc

    def _clean(self, result: Answer) -> list[Candidate]:
        """The candidates no filter refuses: all of them, unless a word list reaches further
        than the search's table (a word with a character the model lacks, or a filter kept
        only as hashes)."""
        return [c for c in result.candidates if self.is_clean(c.text, result.upper)]

    def _answer(self, q: Query, result: Answer, clean: list[Candidate]) -> Answer:
        return replace(
            result,
            candidates=clean[: q.n],
            in_training_set=not q.reverse and self.bundle.in_training_data(q.upper),
            filtered=len(result.candidates) - len(clean),
            model_version=self.version,
        )

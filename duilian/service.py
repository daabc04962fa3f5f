"""The couplet service, in-process: a model bundle loaded with its decoder and filters, and
what a person asks of it, answered with plain dataclasses.

``LoadedModel.load(path)`` reads a bundle (model/release/bundle.py), builds its ``Decoder``
(model/decoding/) and its sensitive-word filters (the bundle's hashed list with the data
stage's allow-list, and an optional extra list). ``answer(query)`` gives an ``Answer``: the
candidates best first, each with its 平/仄 marks, its rule report (``data.rules.RuleReport``)
and its 横批; the training-set flag and the known lower lines; the characters the model does
not know. ``answer_batch`` decodes queries that differ only in their upper line in one beam
search and leaves out the known lines and the 横批, which the site adds from its own sources.

The site (serve/) runs this module's ``LoadedModel`` in its worker processes, behind its
batching, cache and reloads; the command line (duilian/cli.py) runs it in its own process.
Both read the input through duilian/inputs.py, so the same line gives the same candidates.
A ``LoadedModel`` is immutable once built (the 横批 table is loaded once, on first use).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from data import tones
from data.banners import BANNERS_FILE, BannerTable
from data.rules import RuleReport
from data.segment import boundaries
from data.sensitive import ALLOW_LIST, SensitiveFilter, read_words
from data.tones import line_tones, mark
from duilian.inputs import FORWARD, OVERSAMPLE, REVERSE, AlternativesQuery, Query
from model.decoding.blocked import BlockedWords
from model.decoding.decoder import Decoder
from model.decoding.onnx_engine import OnnxTagger, OnnxTransformer
from model.decoding.options import (
    DIVERSE_PENALTY,
    MAX_CANDIDATES,
    Alternatives,
    DecodeOptions,
    DecodeResult,
    Runtime,
)
from model.decoding.options import Candidate as DecodeCandidate
from model.decoding.plan import ConstraintError
from model.release.bundle import Bundle, graph_key, head_weight_t, load_bundle, model_config, model_file

if TYPE_CHECKING:
    from model.net.checkpoint import CoupletModel

log = logging.getLogger(__name__)
KNOWN_SHOWN = 5  # known lower lines in an answer, from the bundle or the corpus file
BANNERS_SHOWN = 5  # 横批 per candidate


@dataclass(frozen=True)
class Banner:
    """A 横批: four characters, their tone marks, and its fit to the couplet's theme."""

    text: str
    tones: list[str]
    score: float


@dataclass(frozen=True)
class Candidate:
    """A lower line: ``rank_score`` orders the candidates (the search's own score per
    character), ``score`` is the model's log-probability per character, ``tones`` one mark per
    character (平, 仄, 中 or ''), ``report`` the couplet rules' verdicts (data/rules.py)."""

    text: str
    rank_score: float
    score: float
    tones: list[str]
    report: RuleReport
    banners: list[Banner] = field(default_factory=list)


@dataclass(frozen=True)
class Answer:
    """The candidates for one upper line, best first, and what is known about the line.
    With ``direction`` ``lower_to_upper`` (下联求上联), ``upper`` is the lower line given and
    the candidates are upper lines; its JSON form names the lines as they are."""

    upper: str
    upper_tones: list[str]
    candidates: list[Candidate]
    in_training_set: bool
    known_lower_lines: list[str]
    unknown_chars: list[str]
    upper_ends_level: bool  # the given line reads like the other side (``data.rules.reads_reversed``)
    filtered: int  # candidates withheld by the sensitive-word filter
    model_version: str
    direction: str = FORWARD

    def couplet(self, written: str) -> tuple[str, str]:
        """(upper, lower) of the given line and a line ``written`` for it, in either direction."""
        return (written, self.upper) if self.direction == REVERSE else (self.upper, written)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form, field for field that of the REST API's answer (``hard_ok`` in each report):
        the given line as ``upper`` (or ``lower`` in the reverse direction) with its tones, the
        other line's fields null."""
        given = "lower" if self.direction == REVERSE else "upper"
        return {
            "direction": self.direction,
            "upper": None,
            "upper_tones": None,
            "lower": None,
            "lower_tones": None,
            given: self.upper,
            f"{given}_tones": list(self.upper_tones),
            "candidates": [
                {
                    "text": c.text,
                    "rank_score": c.rank_score,
                    "score": c.score,
                    "tones": list(c.tones),
                    "report": {**c.report.as_dict(), "hard_ok": c.report.hard_ok},
                    "banners": [
                        {"text": b.text, "tones": list(b.tones), "score": b.score} for b in c.banners
                    ],
                }
                for c in self.candidates
            ],
            "in_training_set": self.in_training_set,
            "known_lower_lines": list(self.known_lower_lines),
            "unknown_chars": list(self.unknown_chars),
            "upper_ends_level": self.upper_ends_level and given == "upper",
            "reads_reversed": self.upper_ends_level,
            "filtered": self.filtered,
            "model_version": self.model_version,
        }


@dataclass(frozen=True)
class Alternative:
    """A character for one position of a lower line: ``text`` is the whole line with it (at
    every position of its repeat group), ``rank_score`` the search's score of that line per
    character (the order), ``score`` the model's log-probability per character, ``tones`` and
    ``report`` as a candidate's, ``original`` the line's own character."""

    char: str
    text: str
    rank_score: float
    score: float
    tones: list[str]
    report: RuleReport
    original: bool


@dataclass(frozen=True)
class AlternativesAnswer:
    """The characters that may stand at ``position`` of ``lower``, best first; ``positions``
    are the places that change together (the position's repeat group)."""

    upper: str
    lower: str
    position: int
    positions: list[int]
    alternatives: list[Alternative]
    filtered: int  # characters withheld by the sensitive-word filter
    model_version: str
    direction: str = FORWARD  # lower_to_upper: the position is in the upper line, written for ``lower``

    def as_dict(self) -> dict[str, Any]:
        """The JSON form, field for field that of ``POST /api/v1/alternatives``."""
        return {
            "direction": self.direction,
            "upper": self.upper,
            "lower": self.lower,
            "position": self.position,
            "positions": list(self.positions),
            "alternatives": [
                {
                    "char": a.char,
                    "text": a.text,
                    "rank_score": a.rank_score,
                    "score": a.score,
                    "tones": list(a.tones),
                    "report": {**a.report.as_dict(), "hard_ok": a.report.hard_ok},
                    "original": a.original,
                }
                for a in self.alternatives
            ],
            "filtered": self.filtered,
            "model_version": self.model_version,
        }


@functools.lru_cache(maxsize=65536)
def _marks(line: str, mode: str) -> tuple[str, ...]:
    return tuple(mark(t) for t in line_tones(line, mode))


def tone_marks(line: str, mode: str) -> list[str]:
    """平/仄/中/'' per character (cached: pypinyin costs as much as a small decode)."""
    return list(_marks(line, mode))


def model_version(bundle: Bundle) -> str:
    """The bundle's named version, else its step and a digest of its model's weights file
    (``model.safetensors``, or ``model.pt`` in an old bundle)."""
    named = bundle.meta.get("version")
    if named:
        return str(named)
    digest = hashlib.blake2b(model_file(bundle.path).read_bytes(), digest_size=4).hexdigest()
    return f"step{bundle.meta.get('step', 0)}-{digest}"


def allow_list() -> list[str]:
    """The data stage's allow-list (data/sensitive_allow.txt), read with every bundle's word list."""
    return read_words(ALLOW_LIST) if ALLOW_LIST.is_file() else []


def word_filter(words: Path, allow: Path | None = None) -> SensitiveFilter:
    """An extra sensitive-word list (one a line), with its allow-list, else the data stage's."""
    return SensitiveFilter(read_words(words), read_words(allow) if allow else allow_list())


@dataclass(frozen=True)
class Engine:
    """How a bundle is decoded: int8 copies of the models, on what (model.decoding.options.RUNTIMES),
    and where the ONNX graphs are kept between runs (None: exported anew at every start)."""

    int8: bool = False
    runtime: Runtime = "torch"
    graph_cache: Path | None = None


DEFAULT_ENGINE = Engine()  # eager PyTorch in fp32 (the site's default is SERVE_INT8 on SERVE_RUNTIME)


def load_banner_table(path: Path, is_clean: Callable[[str], bool]) -> BannerTable | None:
    """A 横批 table that never gives a phrase ``is_clean`` refuses; None when the file is
    unreadable (the service works without 横批)."""
    try:
        table = BannerTable.load(path)
    except (OSError, ValueError, KeyError) as exc:
        log.warning("横批 table not loaded from %s: %s", path, exc)
        return None
    table = table.screened(is_clean)
    log.info("横批 table: %d phrases from %s", len(table.phrases), path)
    return table


def banners_for(
    table: BannerTable, upper: str, lower: str, tone_mode: str, n: int = BANNERS_SHOWN
) -> list[Banner]:
    """Up to ``n`` 横批 for the couplet, best fit to its theme first."""
    return banner_list(table.rank(upper, lower, n), tone_mode)


def banner_list(ranked: list[tuple[str, float]], tone_mode: str) -> list[Banner]:
    return [
        Banner(text=text, tones=tone_marks(text, tone_mode), score=round(score, 4)) for text, score in ranked
    ]


def with_banners(answer: Answer, table: BannerTable, tone_mode: str) -> Answer:
    """The answer with each candidate's 横批 (their fits in one product: about 2 ms for five)."""
    ranked = table.rank_many([answer.couplet(c.text) for c in answer.candidates], BANNERS_SHOWN)
    candidates = [
        replace(c, banners=banner_list(found, tone_mode))
        for c, found in zip(answer.candidates, ranked, strict=True)
    ]
    return replace(answer, candidates=candidates)


def decode_options(q: Query, n_best: int) -> DecodeOptions:
    return DecodeOptions(
        n_best=min(n_best, MAX_CANDIDATES),
        tone_mode=q.tone_mode,
        locks=q.locks,
        required_first=q.required_first,
        required_chars=q.required_chars or "",
        fast=q.fast,
        diversity=DIVERSE_PENALTY if q.diverse else 0.0,
    )


def blocked_words(bundle: Bundle, extra: SensitiveFilter | None) -> BlockedWords | None:
    """The words the search may not complete: the bundle's table and the extra list's."""
    tables = [t for t in (bundle.blocked,) if t is not None]
    if extra is not None and extra.words():
        tables.append(BlockedWords.from_words(extra.words(), bundle.vocab.pieces))
    if not tables:
        return None
    return tables[0] if len(tables) == 1 else tables[0].merged(tables[1])


def set_decode_threads(threads: int) -> Any:
    """Decoding's thread count in this process: the BLAS libraries' (numpy's OpenBLAS, which
    multiplies the fast mode's rescoring and the shortlist's rows; with a second thread it spun
    beside the first, doubling the fast mode's CPU for no shorter wait, and under load the
    decode workers' spinning threads took each other's cores), and PyTorch's when it is
    imported. ONNX Runtime's sessions take theirs when made (``Engine``'s graphs). The
    threadpoolctl limiter, whose ``restore_original_limits()`` undoes the BLAS part."""
    from threadpoolctl import threadpool_limits

    limiter = threadpool_limits(limits=threads, user_api="blas")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    return limiter


def build_decoder(
    bundle: Bundle,
    engine: Engine,
    blocked: BlockedWords | None,
    reverse: bool = False,
) -> Decoder:
    """The decoder of the bundle's model (``reverse``: its lower_to_upper model, without a
    proposer, on the pairing table swapped) as ``engine`` asks. On ONNX Runtime with a graph
    cache, the graphs are kept under keys of the bundle's files (``bundle.graph_key``); when
    they are all there the decoder is built from them and the weights' few arrays it needs,
    without reading the PyTorch models (nor importing PyTorch): the command line's start and
    a decode worker's. Otherwise the models are read and the graphs exported (and cached)."""
    pairing = bundle.pairing if not reverse or bundle.pairing is None else bundle.pairing.swapped()
    role = "reverse" if reverse else "model"
    with_proposer = bundle.has_proposer and not reverse
    keys = (graph_key(bundle, role), graph_key(bundle, "proposer") if with_proposer else None)
    if engine.runtime == "onnx" and engine.graph_cache is not None and keys[0] is not None:
        cache = engine.graph_cache
        model = OnnxTransformer.cached(model_config(bundle.path, role), keys[0], cache, engine.int8)
        proposer = None
        if with_proposer and keys[1] is not None:
            proposer = OnnxTagger.cached(model_config(bundle.path, "proposer"), keys[1], cache, engine.int8)
        if model is not None and (proposer is not None or not with_proposer):
            head_t = head_weight_t(bundle.path) if proposer is not None else None
            return Decoder.from_engines(model, bundle.vocab, proposer, head_t, pairing, blocked)
    return Decoder(
        cast("CoupletModel", bundle.reverse if reverse else bundle.model),
        bundle.vocab,
        int8=engine.int8,
        proposer=bundle.proposer if with_proposer else None,
        runtime=engine.runtime,
        pairing=pairing,
        graph_cache=engine.graph_cache,
        blocked=blocked,
        graph_keys=keys,
    )


class LoadedModel:
    """One bundle with its decoder and sensitive-word filters, ready to answer."""

    def __init__(
        self, bundle: Bundle, extra_filter: SensitiveFilter | None = None, engine: Engine = Engine()
    ) -> None:
        self.bundle = bundle
        self.version = model_version(bundle)
        self.decoder = build_decoder(bundle, engine, blocked_words(bundle, extra_filter))
        self.engine = engine
        self._reverse: list[Decoder] = []  # 下联求上联: the reverse model's decoder, built on first use
        self._reverse_lock = threading.Lock()
        bundled = bundle.sensitive_filter(allow_list()) if len(bundle.sensitive_hashes) else None
        self.filters = [f for f in (bundled, extra_filter) if f is not None]
        self._banners: list[BannerTable | None] = []  # the bundle's table, once loaded
        self._banners_lock = threading.Lock()

    @classmethod
    def load(
        cls,
        path: Path,
        extra_filter: SensitiveFilter | None = None,
        engine: Engine = Engine(),
        warm: bool = True,
        lazy: bool = False,
    ) -> LoadedModel:
        """The bundle at ``path``, its decoder warmed by one small decode (``warm``: the tables a
        decode builds on first use are built now, not in the first request); ``lazy``: the bundle's
        known lower lines read on first use (``load_bundle``). On ONNX Runtime with a graph
        cache the PyTorch models are read only if the graphs must be exported (``build_decoder``)."""
        models = not (engine.runtime == "onnx" and engine.graph_cache is not None)
        model = cls(load_bundle(path, lazy=lazy, models=models), extra_filter, engine)
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

    def is_clean(self, text: str, upper: str | None = None) -> bool:
        """No listed word in ``text``; with the ``upper`` line it answers, a word that straddles
        two of that line's words with an end inside one is let through (data/segment.py), as
        the search does."""
        bounds = boundaries(upper) if upper is not None and self.filters else None
        return all(f.is_clean(text, bounds) for f in self.filters)

    def answer(self, query: Query, oversample: int = OVERSAMPLE, banners: bool = True) -> Answer:
        """The whole answer for one query, as the site gives it with the bundle's own known lower
        lines and 横批 table; raises ``ConstraintError`` (or ``ValueError``) for an impossible one."""
        result = self.answer_batch([query], oversample)[0]
        if isinstance(result, Exception):
            raise result
        known = [] if query.reverse else self.known_lines(query.upper)
        if known:
            result = replace(result, known_lower_lines=known)
        table = self.banner_table() if banners else None
        return with_banners(result, table, query.tone_mode) if table is not None else result

    def known_lines(self, upper: str, found: list[str] | None = None) -> list[str]:
        """The clean ones of ``found`` (by default the bundle's lower lines for ``upper``), at most
        ``KNOWN_SHOWN``."""
        if found is None:
            found = self.bundle.known_lowers(upper)
        return [w for w in found if self.is_clean(w, upper)][:KNOWN_SHOWN]

    def banner_table(self) -> BannerTable | None:
        """The bundle's 横批 table without the phrases the filters refuse, loaded on first use;
        None when the bundle has none."""
        with self._banners_lock:
            if not self._banners:
                path = self.bundle.path / BANNERS_FILE
                self._banners.append(load_banner_table(path, self.is_clean) if path.is_file() else None)
            return self._banners[0]

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
            results: list[DecodeResult | Exception] = list(
                decoder.generate_batch([q.upper for q in queries], options)
            )
        except ConstraintError:  # the batch stops at the first impossible line: one by one
            results = [self._decode(decoder, q.upper, options) for q in queries]
        answers: list[Answer | Exception] = []
        for q, result in zip(queries, results, strict=True):
            if isinstance(result, DecodeResult):
                clean = self._clean(result)
                if len(clean) < q.n <= len(result.candidates) and options.n_best < MAX_CANDIDATES:
                    result = self._decode(decoder, q.upper, decode_options(q, MAX_CANDIDATES))
                    clean = self._clean(result) if isinstance(result, DecodeResult) else []
            answers.append(result if isinstance(result, Exception) else self._answer(q, result, clean))
        return answers

    def alternatives(self, query: AlternativesQuery) -> AlternativesAnswer:
        """The best characters for ``query.position`` of its lower line, the rest kept, under every
        rule and the query's constraints (``Decoder.alternatives``): ``query.n`` of them and the
        line's own (when it keeps the rules), without the ones a filter refuses (``OVERSAMPLE``
        more are asked of the decoder for those); raises ``ConstraintError`` when none fits or
        the input cannot be judged."""
        options = DecodeOptions(
            tone_mode=query.tone_mode,
            locks=query.locks,
            required_first=query.required_first,
            required_chars=query.required_chars or "",
        )
        found: Alternatives = self.decoder_for(query.direction).alternatives(
            query.given,
            query.written,
            query.position,
            options,
            k=min(query.n + 1 + OVERSAMPLE, MAX_CANDIDATES),  # room for the line's own and filtered ones
        )
        clean = [a for a in found.alternatives if self.is_clean(a.text, query.given)]
        kept = [a for a in clean if not a.original][: query.n]
        kept = sorted(kept + [a for a in clean if a.original], key=lambda a: a.rank, reverse=True)
        return AlternativesAnswer(
            upper=found.lower if query.reverse else found.upper,
            lower=found.upper if query.reverse else found.lower,
            position=found.position,
            positions=list(found.positions),
            alternatives=[
                Alternative(
                    char=a.char,
                    text=a.text,
                    rank_score=a.rank,
                    score=a.score,
                    tones=tone_marks(a.text, query.tone_mode),
                    report=RuleReport(**a.report),  # type: ignore[arg-type]
                    original=a.original,
                )
                for a in kept
            ],
            filtered=len(found.alternatives) - len(clean),
            model_version=self.version,
            direction=query.direction,
        )

    @staticmethod
    def _decode(decoder: Decoder, upper: str, options: DecodeOptions) -> DecodeResult | Exception:
        try:
            return decoder.generate(upper, options)
        except ConstraintError as exc:
            return exc

    def _clean(self, result: DecodeResult) -> list[DecodeCandidate]:
        """The candidates no filter refuses: all of them, unless a word list reaches further
        than the search's table (a word with a character the model lacks, or a filter kept
        only as hashes)."""
        return [c for c in result.candidates if self.is_clean(c.text, result.upper)]

    def _answer(self, q: Query, result: DecodeResult, clean: list[DecodeCandidate]) -> Answer:
        return Answer(
            upper=q.upper,
            upper_tones=tone_marks(q.upper, q.tone_mode),
            candidates=[
                Candidate(
                    text=c.text,
                    rank_score=float(c.rank),
                    score=float(c.score),
                    tones=tone_marks(c.text, q.tone_mode),
                    report=RuleReport(**c.report),  # type: ignore[arg-type]
                )
                for c in clean[: q.n]
            ],
            in_training_set=not q.reverse and self.bundle.in_training_data(q.upper),
            known_lower_lines=[],
            unknown_chars=list(result.unknown_chars),
            upper_ends_level=result.probably_reversed,
            filtered=len(result.candidates) - len(clean),
            model_version=self.version,
            direction=q.direction,
        )

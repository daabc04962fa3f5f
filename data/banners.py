"""横批 (the four-character banner over a couplet): a vetted phrase list and a theme ranking.

Built by the data stage from the training pairs (``banners.npz`` beside ``train.tsv``), carried
by the model bundle, read by the service. Two parts, both from the corpora:

- **Phrases**: four-character clauses (a whole line, or a part between punctuation marks) that
  occur at least ``min_count`` times across the pairs' lines: set phrases, 成语 and the
  auspicious four-character lines couplets are full of (万象更新, 国泰民安). Han characters only,
  no character three times, and none with a sensitive word (the data stage's filter).
- **Character vectors**: which characters keep company. Every pair is one context; the
  characters' co-occurrence counts over pairs become positive PMI (context counts smoothed
  with the 0.75 power), reduced to ``dims`` dimensions by a truncated SVD (U·√S, rows unit
  length). Characters of one theme (春 花 风 柳 燕; 山 水 云 松) end up close.

A couplet's theme is the normalised mean of its characters' vectors; a phrase's is the same
over its four characters; the fit is their cosine, plus a small prior for common phrases.
Phrases that share three characters with four consecutive ones of the couplet are not offered
(学海无涯 for 学海无涯苦作舟), nor two that share three characters with each other.
``python -m data.banners`` builds the file from the corpora (docs/DATA.md).
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data.sensitive import SensitiveFilter
from data.text import is_han

BANNERS_FILE = "banners.npz"
PHRASE_LEN = 4
_CLAUSE = re.compile(r"[^\u3400-\u9fff\U00020000-\U000323af\uf900-\ufaff〇]+")


@dataclass(frozen=True)
class BannerConfig:
    min_count: int = 5  # a phrase is kept when its clause occurs this often
    max_phrases: int = 12000  # the most frequent ones
    min_char_docs: int = 5  # a character gets a vector when it is in this many pairs
    dims: int = 64
    prior: float = 0.2  # weight of log(count) / log(max count) in the ranking (docs/DATA.md)
    same_chars: int = 3  # a phrase sharing this many characters with a better one is skipped


@functools.cache
def _blas_libraries() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas")


def _one_blas_thread() -> Any:
    """A context in which the BLAS libraries loaded run one thread (threadpoolctl)."""
    return _blas_libraries().limit(limits=1)


def _combos(chars: Iterable[str], size: int) -> tuple[tuple[str, ...], ...]:
    """Every set of ``size`` of the distinct ``chars``, each sorted."""
    return tuple(itertools.combinations(sorted(set(chars)), size))


@functools.lru_cache(maxsize=1 << 14)
def _window_combos(window: str, size: int) -> tuple[tuple[str, ...], ...]:
    """``_combos`` of a window of a line (an answer's candidates share their upper line's)."""
    return _combos(window, size)


def clauses(line: str) -> list[str]:
    """The runs of Han characters of a line (its parts between punctuation marks)."""
    return [c for c in _CLAUSE.split(line) if c]


def phrase_ok(phrase: str, sensitive: SensitiveFilter | None) -> bool:
    return (
        len(phrase) == PHRASE_LEN
        and all(is_han(ch) for ch in phrase)
        and max(Counter(phrase).values()) < 3
        and (sensitive is None or sensitive.is_clean(phrase))
    )


@dataclass
class BannerTable:
    """The phrases with their counts, and a unit vector per known character."""

    phrases: list[str]
    counts: np.ndarray  # int64, one per phrase
    chars: str
    vectors: np.ndarray  # float32 (len(chars), dims), unit rows
    prior: float = 0.2
    same_chars: int = 3

    def __post_init__(self) -> None:
        self.index = {ch: i for i, ch in enumerate(self.chars)}
        self._allowed: Callable[[str], bool] | None = None  # ``screened``
        self._verdicts: dict[int, bool] = {}
        # the character vectors and a zero row for unknown characters (index len(vectors))
        dims = self.vectors.shape[1]
        self._padded = np.vstack([self.vectors, np.zeros((1, dims), dtype=self.vectors.dtype)])
        self.phrase_vectors = self._themes(self.phrases) if self.phrases else None
        self.phrase_prior = self._prior(self.counts)
        self._for_products()

    def _themes(self, texts: Sequence[str]) -> np.ndarray:
        """``theme`` of each of ``texts`` at once, (texts, d): a table's 12,000 phrases in
        milliseconds instead of a second (at every start of a server, worker or command line)."""
        width = max(map(len, texts), default=0)
        padded = self._padded
        unknown = len(self.vectors)  # the zero row
        rows = np.full((len(texts), width), unknown, dtype=np.int64)
        for i, text in enumerate(texts):
            ids = [self.index.get(ch, unknown) for ch in text]
            rows[i, : len(ids)] = ids
        known = (rows != unknown).sum(axis=1, keepdims=True)
        mean = padded[rows].sum(axis=1) / np.maximum(known, 1)
        norm = np.linalg.norm(mean, axis=1, keepdims=True)
        return (mean / np.where(norm > 0, norm, 1)).astype(np.float32)

    def _for_products(self) -> None:
        """What ``scores_many`` reads: the phrase vectors transposed, (d, phrases), contiguous
        (a transposed view is copied by every product), and the prior's term in float32."""
        vectors = self.phrase_vectors
        self.phrase_matrix = None if vectors is None else np.ascontiguousarray(vectors.T)
        self.prior_term = (self.prior * self.phrase_prior).astype(np.float32)
        self._phrase_combos = [_combos(p, self.same_chars) for p in self.phrases]  # for _chosen

    @staticmethod
    def _prior(counts: np.ndarray) -> np.ndarray:
        top = max(int(counts.max()) if len(counts) else 1, 2)
        return np.log(np.maximum(counts, 1)) / math.log(top)

    def theme(self, text: str) -> np.ndarray:
        """The normalised mean vector of the known characters of ``text`` (zeros if none)."""
        return self._themes([text])[0]

    def scores(self, context: str) -> np.ndarray:
        """Every phrase's fit to ``context`` (cosine of themes plus the frequency prior)."""
        return self.scores_many([context])[0]

    def scores_many(self, contexts: Sequence[str]) -> np.ndarray:
        """Every phrase's fit to each of ``contexts``, (contexts, phrases): one matrix product
        for all of them (an answer's candidates share one product), on one BLAS thread: a
        product this small loses more to BLAS threads waking on a busy machine than it gains
        (five candidates: 0.4 ms on one thread, 8 ms on two loaded cores)."""
        if self.phrase_matrix is None:
            return np.zeros((len(contexts), 0), dtype=np.float32)
        themes = self._themes(contexts)  # (k, d)
        with _one_blas_thread():
            fit = themes @ self.phrase_matrix
        fit += self.prior_term
        return fit

    def rank(
        self, upper: str, lower: str, n: int = 5, exclude: Iterable[str] = ()
    ) -> list[tuple[str, float]]:
        """Up to ``n`` phrases for the couplet, best first, with their scores."""
        return self.rank_many([(upper, lower)], n, exclude)[0]

    def rank_many(
        self, couplets: Sequence[tuple[str, str]], n: int = 5, exclude: Iterable[str] = ()
    ) -> list[list[tuple[str, float]]]:
        """``rank`` for each of ``couplets`` (an answer's candidates), their fits computed together."""
        known = [any(ch in self.index for ch in up + low) for up, low in couplets]
        asked = [up + low for (up, low), k in zip(couplets, known, strict=True) if k]
        rows = iter(self.scores_many(asked)) if asked else iter(())
        excluded = [set(p) for p in exclude]
        return [
            self._chosen(next(rows), up, low, n, excluded) if k else []
            for (up, low), k in zip(couplets, known, strict=True)
        ]

    def _chosen(
        self, scores: np.ndarray, upper: str, lower: str, n: int, exclude: list[set[str]]
    ) -> list[tuple[str, float]]:
        # the couplet's own words are no 横批: any four characters of a clause, and the excluded.
        # A phrase shares ``same_chars`` characters with one of them exactly when one of its
        # sets of that many characters is one of theirs: a few set lookups a phrase
        same = self.same_chars
        own = [c[i : i + PHRASE_LEN] for c in clauses(upper) + clauses(lower) for i in range(len(c))]
        seen = {combo for window in own for combo in _window_combos(window, same)}
        seen.update(combo for chars in exclude for combo in _combos(chars, same))
        # the best few hundred first (a partial sort); all of them only if those run out
        head = min(len(scores), 20 * n + 100)
        cut = len(scores) - head
        best = np.argpartition(scores, cut)[cut:] if cut > 0 else np.arange(len(scores))
        # the whole list's order only when the head runs out: sorting all 12,000 scores costs
        # about 1.4 ms, three times the rest of a ranking
        orders = (
            lambda: best[np.argsort(-scores[best], kind="stable")],
            lambda: np.argsort(-scores, kind="stable"),
        )
        combos = self._phrase_combos
        for order in orders:
            chosen: list[tuple[str, float]] = []
            taken = set(seen)
            for i in order().tolist():
                mine = combos[i]
                if any(c in taken for c in mine) or not self._passes(i):
                    continue
                chosen.append((self.phrases[i], float(scores[i])))
                taken.update(mine)
                if len(chosen) == n:
                    return chosen
        return chosen

    def _passes(self, i: int) -> bool:
        if self._allowed is None:
            return True
        verdict = self._verdicts.get(i)
        if verdict is None:  # (two threads may both ask: the same answer)
            verdict = self._verdicts[i] = self._allowed(self.phrases[i])
        return verdict

    def screened(self, allowed: Callable[[str], bool]) -> BannerTable:
        """The table whose rankings skip the phrases ``allowed`` refuses, each asked once, when
        a ranking reaches it: not all 12,000 phrases at load (0.4 s of every start of the
        command line), which ``filtered`` does. The prior keeps the whole table's scale."""
        table = copy.copy(self)
        table._allowed, table._verdicts = allowed, {}
        return table

    def filtered(self, keep: Iterable[bool]) -> BannerTable:
        """The table with only the phrases ``keep`` says, their theme vectors taken over (not
        computed again: about a second for the shipped table)."""
        mask = np.fromiter(keep, dtype=bool, count=len(self.phrases))
        table = copy.copy(self)
        table.phrases = [p for p, k in zip(self.phrases, mask, strict=True) if k]
        table.counts = self.counts[mask]
        vectors = self.phrase_vectors
        table.phrase_vectors = vectors[mask] if vectors is not None and table.phrases else None
        table.phrase_prior = self._prior(table.counts)
        table._for_products()
        table._verdicts = {}  # by position: the kept phrases' positions are new
        return table

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez_compressed(
            tmp,
            phrases=np.array(self.phrases, dtype=f"<U{PHRASE_LEN}"),
            counts=self.counts.astype(np.int32),
            chars=np.array(list(self.chars), dtype="<U1"),
            vectors=self.vectors.astype(np.float16),
            settings=np.array([self.prior, self.same_chars], dtype=np.float64),
        )
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: Path) -> BannerTable:
        with np.load(path, allow_pickle=False) as f:
            prior, same = (float(x) for x in f["settings"])
            return cls(
                [str(p) for p in f["phrases"]],
                f["counts"].astype(np.int64),
                "".join(str(c) for c in f["chars"]),
                f["vectors"].astype(np.float32),
                prior,
                int(same),
            )


def count_phrases(pairs: Iterable[tuple[str, str]]) -> Counter[str]:
    """How often each four-character clause occurs over the pairs' lines, in the order first met.
    The lines are split as one text (a newline is no Han character, so no clause spans two)."""
    text = "\n".join(line for pair in pairs for line in pair)
    return Counter(c for c in _CLAUSE.split(text) if len(c) == PHRASE_LEN)


def char_vectors(docs: Sequence[str], min_docs: int, dims: int) -> tuple[str, np.ndarray]:
    """Characters seen in at least ``min_docs`` documents and their PPMI-SVD unit vectors."""
    from scipy import sparse
    from scipy.sparse.linalg import svds

    chars, x = _doc_chars(docs, min_docs)
    co = _co_counts(x, len(chars))  # pairs of characters in one document, (a, b) and (b, a)
    nz = np.flatnonzero(co)
    r, c, n = nz // len(chars), nz % len(chars), co[nz].astype(np.float64)
    df = np.bincount(x.indices, minlength=len(chars)).astype(np.float64)  # documents per character
    total = float(len(docs))
    # log P(a,b) / (P(a) P(b)^0.75): the smoothed context lowers the weight of rare characters
    pmi = np.log(n / df[r]) - 0.75 * np.log(df[c] / total)
    positive = pmi > 0
    ppmi = sparse.csr_matrix((pmi[positive], (r[positive], c[positive])), shape=(len(chars), len(chars)))
    if len(chars) < 2:
        return chars, np.zeros((len(chars), dims), dtype=np.float32)
    k = max(1, min(dims, len(chars) - 1))
    if len(chars) <= k + 1 or ppmi.nnz == 0:  # tiny inputs: the dense decomposition
        u, sigma, _ = np.linalg.svd(ppmi.toarray())
        u, sigma = u[:, :k], sigma[:k]
    else:
        u, sigma, _ = svds(ppmi, k=k, random_state=0)
    vectors = u * np.sqrt(sigma)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return chars, (vectors / np.where(norms > 0, norms, 1)).astype(np.float32)


def _doc_chars(docs: Sequence[str], min_docs: int) -> tuple[str, Any]:
    """The Han characters in at least ``min_docs`` of ``docs``, in code point order, and a CSR
    matrix (documents, those characters) whose row d lists the characters of document d once
    each, in that order (numpy over the code points: a million pairs in seconds)."""
    from scipy import sparse

    codes = np.frombuffer("".join(docs).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    indptr = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, docs), np.int64, len(docs)), out=indptr[1:])
    present = np.flatnonzero(np.bincount(codes))  # the code points met, in order
    rank = np.zeros(int(present[-1]) + 1 if len(present) else 0, dtype=np.int32)
    rank[present] = np.arange(len(present), dtype=np.int32)
    dense = rank[codes]
    every = sparse.csr_matrix(
        (np.ones(len(codes), dtype=np.float32), dense, indptr), shape=(len(docs), len(present))
    )
    every.sum_duplicates()  # one entry a character a document, columns sorted
    df = np.bincount(every.indices, minlength=len(present))
    kept = [i for i, cp in enumerate(present.tolist()) if df[i] >= min_docs and is_han(chr(cp))]
    x = every[:, kept]
    x.data[:] = 1.0
    return "".join(chr(cp) for cp in present[kept].tolist()), x


_KEYS = 1 << 25  # the pair keys counted in one np.bincount


def _co_counts(x: Any, n_chars: int) -> np.ndarray:
    """(n_chars * n_chars,) int64: in how many rows of ``x`` (sorted columns, each once) the
    characters a and b both stand, at a * n_chars + b, for a != b. Rows of equal length are
    taken together, their a < b pairs the upper triangle's indices; the keys are made in blocks
    that stay in the cache and counted with ``np.bincount`` about 2^25 at a time. Dense: about
    three times 8 * n_chars^2 bytes at the peak (1.2 GB for the corpus's ~7,000 characters)."""
    counts = np.zeros(n_chars * n_chars, dtype=np.int64)
    kind = np.int32 if n_chars * n_chars < 2**31 else np.int64  # int32 halves the keys' traffic
    ids_of = x.indices.astype(kind)
    lengths = np.diff(x.indptr)
    keys = np.empty(_KEYS, dtype=kind)
    filled = 0
    for k in np.unique(lengths[lengths >= 2]).tolist():
        rows = np.flatnonzero(lengths == k)
        a, b = np.triu_indices(k, 1)
        step = max(1, (1 << 20) // len(a))
        for start in range(0, len(rows), step):
            ids = ids_of[x.indptr[rows[start : start + step]][:, None] + np.arange(k)]  # (rows, k)
            block = ids[:, a]
            block *= n_chars
            block += ids[:, b]
            if filled + block.size > len(keys):
                counts += np.bincount(keys[:filled], minlength=len(counts))
                filled = 0
            if block.size > len(keys):  # too many pairs for the buffer (8,000 characters a row): alone
                counts += np.bincount(block.ravel(), minlength=len(counts))
                continue
            keys[filled : filled + block.size] = block.ravel()
            filled += block.size
    counts += np.bincount(keys[:filled], minlength=len(counts))
    square = counts.reshape(n_chars, n_chars)
    square += square.T.copy()
    return counts


def build_banners(
    pairs: Sequence[tuple[str, str]], sensitive: SensitiveFilter | None, config: BannerConfig = BannerConfig()
) -> BannerTable:
    """The phrase list and character vectors from (normalised, filtered) pairs."""
    counts = count_phrases(pairs)
    common = [(p, n) for p, n in counts.most_common() if n >= config.min_count and phrase_ok(p, sensitive)]
    common = common[: config.max_phrases]
    chars, vectors = char_vectors([up + low for up, low in pairs], config.min_char_docs, config.dims)
    return BannerTable(
        [p for p, _ in common],
        np.array([n for _, n in common], dtype=np.int64),
        chars,
        vectors,
        config.prior,
        config.same_chars,
    )

"""Fixtures for the service: tiny real model bundles, settings, a TestClient, a live uvicorn server,
the feedback store in an SQLite file or in a real PostgreSQL server.

The bundles hold a randomly initialised tiny CoupletTransformer and a vocabulary trained
on the hand-written pairs below (our own lines, not corpus text).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import torch
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from crawler.localredis import free_port
from data.sensitive import hash_words
from data.vocab import Vocab
from model.decoding.blocked import BlockedWords
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer, ModelConfig
from model.release.export import export_bundle
from serve.main import create_app, uvicorn_options
from serve.settings import Settings
from tests.model.conftest import FIXTURES, read_pairs
from tests.model.decoding.fixtures import PAIRS, SMALL, decode_vocab, reverse_of
from tests.serve.postgres import LocalPostgres, postgres_bindir

BAD_WORD = "坏蛋"


def tiny_model(vocab: Vocab, seed: int, registers: int = 0) -> CoupletTransformer:
    torch.manual_seed(seed)
    model = CoupletTransformer(ModelConfig(vocab_size=len(vocab), n_registers=registers, **SMALL)).eval()
    if model.register_embed is not None:  # trained registers differ; fresh ones are zero
        torch.nn.init.normal_(model.register_embed.weight, 0.0, 1.0)
    return model


def tiny_tagger(vocab: Vocab, word: str) -> CoupletTagger:
    """An encoder-only proposer that, at every position, favours the characters of ``word``
    (logits 12, 11, ... for them, 0 for all others), whatever the upper line."""
    torch.manual_seed(0)
    tagger = CoupletTagger(ModelConfig(vocab_size=len(vocab), kind="tagger", **SMALL)).eval()
    favour_outputs(tagger.enc_norm, tagger.head, vocab, word)
    return tagger


def favour(model: CoupletTransformer, vocab: Vocab, word: str) -> CoupletTransformer:
    """Make every step's logits favour the characters of ``word``, in order, over all others:
    a model that would answer with ``word`` where the rules let it."""
    favour_outputs(model.dec_norm, model.head, vocab, word)
    return model


def favour_outputs(norm: torch.nn.LayerNorm, head: torch.nn.Linear, vocab: Vocab, word: str) -> None:
    """The final norm is made to output one constant vector u, and the output rows of the
    word's characters are set so their logits are 12, 11, ... while every other logit is 0."""
    with torch.no_grad():
        u = torch.ones(norm.weight.numel())
        norm.weight.zero_()
        norm.bias.copy_(u)
        head.weight.zero_()
        for rank, ch in enumerate(word):
            head.weight[vocab.encode(ch)[0]] = (12.0 - rank) * u / u.dot(u)


@pytest.fixture(scope="session")
def vocab(tmp_path_factory: pytest.TempPathFactory) -> Vocab:
    """The tests' one vocabulary (tests/model/decoding/fixtures.py): the service's pairs in it."""
    return decode_vocab(tmp_path_factory.mktemp("vocab"), read_pairs(FIXTURES / "couplets50.tsv"))


def build_bundle(
    out: Path,
    vocab: Vocab,
    *,
    seed: int,
    version: str,
    bad_word: str | None = None,
    sensitive: Sequence[str] = (),
    proposer_word: str | None = None,
    known: bool = False,
    blocked: bool = False,
    reverse: bool = False,
    registers: int = 0,
    pairs: Sequence[tuple[str, str]] = PAIRS,
) -> Path:
    """``pairs``: the training pairs the bundle knows (its upper lines' index; with ``known``, their
    lower lines too, from which POST /compose drafts)."""
    model = tiny_model(vocab, seed, registers)
    if bad_word:
        favour(model, vocab, bad_word)
    other = reverse_of(model, seed, scale=0.5) if reverse else None
    return export_bundle(
        out,
        model,
        vocab,
        train_uppers=[u for u, _ in pairs],
        train_pairs=pairs if known else None,
        sensitive_hashes=hash_words(sensitive),
        sensitive_max_len=max((len(w) for w in sensitive), default=None),  # as make train writes it
        model_card=f"# 测试模型 {version}\n",
        data_card="# 手写数据\n",
        eval_result={"bleu4": 0.5, "perplexity": 123.0},
        version=version,
        proposer=tiny_tagger(vocab, proposer_word) if proposer_word else None,
        blocked=BlockedWords.from_words(sensitive, vocab.pieces) if blocked else None,
        reverse=other,
    )


@pytest.fixture(scope="session")
def bundle_a(tmp_path_factory: pytest.TempPathFactory, vocab: Vocab) -> Path:
    """The test site's model, with a lower_to_upper model beside it (下联求上联)."""
    return build_bundle(
        tmp_path_factory.mktemp("models") / "a", vocab, seed=1, version="test-a", reverse=True
    )


@pytest.fixture(scope="session")
def bundle_b(tmp_path_factory: pytest.TempPathFactory, vocab: Vocab) -> Path:
    return build_bundle(tmp_path_factory.mktemp("models") / "b", vocab, seed=2, version="test-b")


def build_bad_bundle(out: Path, vocab: Vocab, blocked: bool = False) -> Path:
    """A model that favours BAD_WORD, with BAD_WORD as its listed word (``blocked``: also as
    the search's table, as `make train` writes it)."""
    name = "test-blocked" if blocked else "test-bad"
    return build_bundle(
        out, vocab, seed=3, version=name, bad_word=BAD_WORD, sensitive=[BAD_WORD], blocked=blocked
    )


@pytest.fixture(scope="session")
def bad_bundle(tmp_path_factory: pytest.TempPathFactory, vocab: Vocab) -> Path:
    return build_bad_bundle(tmp_path_factory.mktemp("models") / "bad", vocab)


@pytest.fixture(scope="session")
def blocked_bundle(tmp_path_factory: pytest.TempPathFactory, vocab: Vocab) -> Path:
    """The bad bundle's model and word list, with the list as the search's table too."""
    return build_bad_bundle(tmp_path_factory.mktemp("models") / "blocked", vocab, blocked=True)


@pytest.fixture(scope="session")
def known_pairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "train.tsv"
    path.write_text("".join(f"{u}\t{w}\n" for u, w in PAIRS), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    """One PostgreSQL cluster for the session; each test takes a fresh database of it."""
    if postgres_bindir() is None:
        pytest.skip("PostgreSQL missing: no initdb/postgres (bash scripts/sysdeps.sh installs it)")
    with LocalPostgres() as server:
        yield server


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The feedback store's URL, once an SQLite file and once an empty PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'feedback.db'}"
        return
    server: LocalPostgres = request.getfixturevalue("postgres")
    with server.database() as url:
        yield url


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """SQLite for most tests; the feedback tests override it with ``store_url`` (both stores)."""
    return f"sqlite:///{tmp_path / 'feedback.db'}"


@pytest.fixture
def settings(tmp_path: Path, bundle_a: Path, known_pairs: Path, database_url: str) -> Settings:
    return Settings(
        model_dir=bundle_a,
        database_url=database_url,
        known_pairs=known_pairs,
        rate_limit_per_minute=0,
        cost_per_minute=0,  # tests/serve/test_admission.py: the budget itself
        admin_token="test-token",
        decode_processes=0,  # the model in the server process (tests/serve/test_workers.py: processes)
        # graph_cache: the run's one folder (tests/conftest.py); tests/serve/test_workers.py: the cache itself
    )


def wait_known(app: FastAPI, timeout: float = 10.0) -> None:
    """The known lines load in a background thread; wait for them."""
    deadline = time.monotonic() + timeout
    while app.state.service.known is None and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    app = create_app(settings)
    with TestClient(app) as c:
        wait_known(app)
        yield c


class LiveServer:
    """A real uvicorn server on a free loopback port, in a thread, stopped on exit."""

    def __init__(self, app: FastAPI, start_timeout: float = 120.0) -> None:
        """``start_timeout``: how long the app's start may take (it loads its model then)."""
        self.app, self.start_timeout = app, start_timeout
        self.port = free_port()
        options = uvicorn_options(app.state.settings)  # as python -m serve runs it
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on", **options
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


@pytest.fixture
def live(settings: Settings) -> Iterator[LiveServer]:
    with LiveServer(create_app(settings)) as server:
        wait_known(server.app)
        yield server

"""Offensive output is never shown: a model that favours a listed word has it filtered out."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from model.decoding.options import DecodeOptions
from model.export.engines import torch_decoder
from model.export.models import models_of
from model.store.bundle import load_bundle
from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import BAD_WORD, wait_known

UPPERS = ["春风", "山高", "江河", "花开"]  # end level, so 蛋 (oblique) may end the lower line


def raw_candidates(bundle_dir: Path, upper: str, n: int) -> list[str]:
    bundle = load_bundle(bundle_dir)
    with torch.inference_mode():
        result = torch_decoder(models_of(bundle).model, bundle.vocab).generate(upper, DecodeOptions(n_best=n))
    return [c.text for c in result.candidates]


def test_the_model_would_say_the_bad_word(bad_bundle: Path) -> None:
    for upper in UPPERS:
        assert raw_candidates(bad_bundle, upper, 5)[0] == BAD_WORD


@pytest.mark.slow
def test_bundled_word_list_filters_every_response(settings: Settings, bad_bundle: Path) -> None:
    with TestClient(create_app(settings.model_copy(update={"model_dir": bad_bundle}))) as c:
        for upper in UPPERS:
            body = c.post("/api/v1/generate", json={"upper": upper, "n": 3}).json()
            texts = [cand["text"] for cand in body["candidates"]]
            assert len(texts) == 3, body  # the decoder was asked for more to make up for the filter
            assert all(BAD_WORD not in t for t in texts)
            assert body["filtered"] >= 1


def test_configured_word_list_with_allow_list(
    settings: Settings, bundle_a: Path, bad_bundle: Path, tmp_path: Path
) -> None:
    # the bad bundle's own list is not used here: a served bundle without hashes plus a file list
    words, allow = tmp_path / "words.txt", tmp_path / "allow.txt"
    words.write_text(f"{BAD_WORD}\n", encoding="utf-8")
    allow.write_text("", encoding="utf-8")
    app = create_app(settings.model_copy(update={"sensitive_words": words, "sensitive_allow": allow}))
    with TestClient(app):
        model = app.state.service.model
        assert not model.is_clean(f"大{BAD_WORD}") and model.is_clean("春风")
    # an allow-listed word excuses the listed word inside it
    allow.write_text(f"{BAD_WORD}糕\n", encoding="utf-8")
    app = create_app(settings.model_copy(update={"sensitive_words": words, "sensitive_allow": allow}))
    with TestClient(app):
        model = app.state.service.model
        assert model.is_clean(f"{BAD_WORD}糕") and not model.is_clean(f"{BAD_WORD}汤")


def test_known_lower_lines_are_filtered_too(settings: Settings, bad_bundle: Path, tmp_path: Path) -> None:
    pairs = tmp_path / "train.tsv"
    pairs.write_text(f"江河\t{BAD_WORD}\n江河\t湖海\n", encoding="utf-8")
    app = create_app(settings.model_copy(update={"model_dir": bad_bundle, "known_pairs": pairs}))
    with TestClient(app) as c:
        wait_known(app)
        assert c.post("/api/v1/generate", json={"upper": "江河"}).json()["known_lower_lines"] == ["湖海"]


def test_a_short_answer_is_decoded_again_with_more_candidates(settings: Settings, bad_bundle: Path) -> None:
    # no spare candidates: the filter leaves n - 1, so the server asks the decoder for more
    app = create_app(settings.model_copy(update={"model_dir": bad_bundle, "oversample": 0}))
    with TestClient(app) as c:
        body = c.post("/api/v1/generate", json={"upper": "春风", "n": 3}).json()
    assert len(body["candidates"]) == 3 and body["filtered"] >= 1
    assert all(BAD_WORD not in cand["text"] for cand in body["candidates"])


@pytest.mark.slow
def test_with_the_table_the_search_avoids_the_word_and_nothing_is_withheld(
    settings: Settings, blocked_bundle: Path
) -> None:
    """The same model and list as above, the list also as the search's table (blocked.npz,
    which `make train` writes): the search goes round the word, so the answer is whole and
    nothing is left for the filter after it."""
    assert load_bundle(blocked_bundle).blocked is not None
    with TestClient(create_app(settings.model_copy(update={"model_dir": blocked_bundle}))) as c:
        for upper in UPPERS:
            body = c.post("/api/v1/generate", json={"upper": upper, "n": 5}).json()
            texts = [cand["text"] for cand in body["candidates"]]
            assert len(texts) == 5 and all(BAD_WORD not in t for t in texts), body
            assert body["filtered"] == 0


def test_a_configured_word_list_joins_the_search(settings: Settings, bundle_a: Path, tmp_path: Path) -> None:
    """An operator's extra list blocks inside the search too: the words model A likes best
    are listed, and the answers keep their size without them."""
    with TestClient(create_app(settings.model_copy(update={"model_dir": bundle_a}))) as c:
        plain = c.post("/api/v1/generate", json={"upper": "春风", "n": 3}).json()["candidates"]
    words = tmp_path / "words.txt"
    words.write_text("".join(f"{cand['text']}\n" for cand in plain), encoding="utf-8")
    app = create_app(settings.model_copy(update={"model_dir": bundle_a, "sensitive_words": words}))
    with TestClient(app) as c:
        body = c.post("/api/v1/generate", json={"upper": "春风", "n": 3}).json()
    texts = [cand["text"] for cand in body["candidates"]]
    assert len(texts) == 3 and not {cand["text"] for cand in plain} & set(texts), body
    assert body["filtered"] == 0

"""The generate, health, model-info and page endpoints on a real tiny model."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from data.rules import check
from data.tones import line_tones, mark
from data.vocab import Vocab
from model.decoding.onnx_engine import OnnxTransformer
from model.export.models import models_of
from model.net.transformer import CoupletTransformer
from serve.deps import get_service
from serve.main import create_app
from serve.settings import Settings
from tests.model.decoding.fixtures import NORMALISED, PAIRS
from tests.serve.conftest import build_bundle


def test_generate_answers_with_tones_reports_and_flags(client: TestClient) -> None:
    upper, lower = PAIRS[0]
    r = client.post("/api/v1/generate", json={"upper": upper, "n": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["upper"] == upper
    assert body["upper_tones"] == [mark(t) for t in line_tones(upper)]
    assert body["in_training_set"] is True
    assert body["known_lower_lines"] == [lower]
    assert body["model_version"] == "test-a"
    assert 1 <= len(body["candidates"]) <= 3
    for cand in body["candidates"]:
        text = cand["text"]
        assert len(text) == len(upper)
        assert cand["tones"] == [mark(t) for t in line_tones(text)]
        expected = check(upper, text)
        assert cand["report"] == {**expected.as_dict(), "hard_ok": expected.hard_ok}
        assert cand["report"]["hard_ok"] is True


def test_novel_line_is_not_in_training_set(client: TestClient) -> None:
    body = client.post("/api/v1/generate", json={"upper": "东西南北"}).json()
    assert body["in_training_set"] is False and body["known_lower_lines"] == []


def test_unknown_characters_are_reported(client: TestClient) -> None:
    body = client.post("/api/v1/generate", json={"upper": "春风鑫淼"}).json()
    assert body["unknown_chars"] == ["鑫", "淼"]


def test_punctuation_is_mirrored(client: TestClient) -> None:
    upper = "绿水青山，千秋画卷"
    body = client.post("/api/v1/generate", json={"upper": upper, "n": 2}).json()
    for cand in body["candidates"]:
        assert cand["text"][4] == "，"


def test_a_long_couplet_is_answered_with_every_rule_and_a_longer_one_refused(client: TestClient) -> None:
    """36 characters (the issue's 长联), answered segment by segment; 101 refused with a reason."""
    upper = "白塔街，黄铁匠，生红炉，烧黑炭，冒青烟，闪蓝光，淬紫铁，坐北朝南打东西。"
    r = client.post("/api/v1/generate", json={"upper": upper, "n": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["upper"] == upper and len(body["upper_tones"]) == len(upper)
    assert len(body["candidates"]) == 3
    for cand in body["candidates"]:
        assert len(cand["text"]) == len(upper) and cand["report"]["hard_ok"], cand
        assert check(upper, cand["text"]).hard_ok
    r = client.post("/api/v1/generate", json={"upper": "春" * 101})
    assert r.status_code == 422 and "100" in r.json()["detail"] and " / " in r.json()["detail"], r.text


def test_locks_and_required_first(client: TestClient) -> None:
    body = client.post("/api/v1/generate", json={"upper": "春风得意", "n": 3, "locks": "__好_"}).json()
    assert body["candidates"] and all(c["text"][2] == "好" for c in body["candidates"])
    body = client.post("/api/v1/generate", json={"upper": "春风得意", "n": 3, "required_first": "秋"}).json()
    assert body["candidates"] and all(c["text"][0] == "秋" for c in body["candidates"])


@pytest.mark.slow
def test_required_characters_are_normalised_as_the_corpus_and_a_typed_qian_stays(
    settings: Settings, tmp_path: Path, vocab: Vocab
) -> None:
    """藏头 and 嵌字 in traditional forms are asked as the corpus writes them (後 → 后, 發 → 发),
    but a 乾 the user typed is kept (alone, the normaliser would make it 干)."""
    assert all(ch in vocab for ch in NORMALISED) and not any(ch in vocab for ch in "後發")
    bundle = build_bundle(tmp_path / "bundle", vocab, seed=0, version="qian")
    with TestClient(create_app(settings.model_copy(update={"model_dir": bundle}))) as client:
        r = client.post("/api/v1/generate", json={"upper": "春风得意", "n": 3, "required_first": "乾"})
        assert r.status_code == 200, r.text
        texts = [c["text"] for c in r.json()["candidates"]]
        assert texts and all(t[0] == "乾" for t in texts), texts
        body = {"upper": "春风得意", "n": 3, "required_first": "後", "required_chars": "發"}
        r = client.post("/api/v1/generate", json=body)
        assert r.status_code == 200, r.text
        texts = [c["text"] for c in r.json()["candidates"]]
        assert texts and all(t[0] == "后" and "发" in t for t in texts), texts
        r = client.post("/api/v1/generate", json={"upper": "春风得意", "n": 3, "required_chars": "乾發"})
        texts = [c["text"] for c in r.json()["candidates"]]
        assert texts and all("乾" in t and "发" in t and "干" not in t for t in texts), texts


def test_diverse_candidates_differ_more_and_keep_the_rules(client: TestClient) -> None:
    """``diverse`` runs the diverse beam search: its candidates keep every hard rule, and they
    use more distinct characters per position than the plain search's."""
    upper = "海纳百川有容乃大"
    plain = client.post("/api/v1/generate", json={"upper": upper, "n": 5}).json()["candidates"]
    r = client.post("/api/v1/generate", json={"upper": upper, "n": 5, "diverse": True})
    assert r.status_code == 200, r.text
    diverse = r.json()["candidates"]
    assert len(diverse) == 5 == len({c["text"] for c in diverse})
    assert all(check(upper, c["text"]).hard_ok for c in diverse)

    def spread(cands: list[dict[str, object]]) -> int:
        return sum(len({str(c["text"])[i] for c in cands}) for i in range(len(upper)))

    assert spread(diverse) > spread(plain)


def test_classical_tones_read_the_pingshui_rusheng(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """古声 on a fresh machine: 国 and 白 are 入声, so oblique, where today's Mandarin reads
    them level; the candidates end level after the oblique 国."""
    monkeypatch.delenv("RUSHENG_TABLE", raising=False)
    body = client.post("/api/v1/generate", json={"upper": "白云家国", "tone_mode": "classical"}).json()
    assert body["upper_tones"] == ["仄", "平", "平", "仄"]
    assert body["upper_ends_level"] is False
    assert body["candidates"] and all(c["tones"][-1] == "平" for c in body["candidates"])
    modern = client.post("/api/v1/generate", json={"upper": "白云家国"}).json()
    assert modern["upper_tones"] == ["平", "平", "平", "平"]


def test_upper_ending_level_is_flagged(client: TestClient) -> None:
    assert client.post("/api/v1/generate", json={"upper": "明月照窗前"}).json()["upper_ends_level"] is True
    assert client.post("/api/v1/generate", json={"upper": "花开富贵"}).json()["upper_ends_level"] is False


def test_health_model_info_docs_and_page(client: TestClient) -> None:
    health = client.get("/api/v1/health").json()
    assert health == {
        "status": "ok", "model_version": "test-a", "known_lines": len(PAIRS),
        "decode_workers": 0, "decode_workers_wanted": 0,
    }  # fmt: skip
    info = client.get("/api/v1/model").json()
    assert info["version"] == "test-a" and info["eval"] == {"bleu4": 0.5, "perplexity": 123.0}
    assert "测试模型" in info["model_card"] and info["fingerprints"] == len(PAIRS)
    assert info["config"]["d_model"] == 32
    docs = client.get("/docs")
    assert docs.status_code == 200
    assert "/docs-assets/swagger-ui-bundle.js" in docs.text and "https://" not in docs.text
    assert client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
    assert client.get("/docs-assets/swagger-ui.css").status_code == 200
    page = client.get("/")
    assert page.status_code == 200 and "上联" in page.text
    assert "http://" not in page.text and "https://" not in page.text  # no CDN
    scripts = re.findall(r'<script src="(/static/[^"]+)"', page.text)  # the page's parts, in order
    assert scripts[0] == "/static/view.js" and "/static/app.js" in scripts
    for asset in (*scripts, "/static/style.css"):
        assert client.get(asset).status_code == 200
    for script in scripts:
        assert "innerHTML" not in client.get(script).text, script


def test_rate_limit_is_429_and_clears(settings: Settings) -> None:
    app = create_app(settings.model_copy(update={"rate_limit_per_minute": 60.0, "rate_limit_burst": 3}))
    with TestClient(app) as c:
        codes = [c.post("/api/v1/generate", json={"upper": "春风得意"}).status_code for _ in range(5)]
        assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429]
        r = c.post("/api/v1/feedback", json={"kind": "own", "upper": "春风得意", "lower": "秋月生辉"})
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
        assert "Too many requests" in r.json()["detail"]
        assert c.get("/api/v1/health").status_code == 200  # health is not limited


class Exploding:
    def generate(self, _query: object) -> None:
        raise RuntimeError("secret internals /home/model.pt line 42")


def test_internal_error_has_no_trace(settings: Settings) -> None:
    app = create_app(settings)
    app.dependency_overrides[get_service] = Exploding
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/api/v1/generate", json={"upper": "春风得意"})
        assert r.status_code == 500
        assert "secret" not in r.text and "Traceback" not in r.text and "Internal server error" in r.text
        app.dependency_overrides.clear()
        assert c.post("/api/v1/generate", json={"upper": "春风得意"}).status_code == 200


@pytest.mark.parametrize("missing", ["nowhere"])
def test_serve_without_model_says_how_to_get_one(tmp_path: Path, missing: str) -> None:
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "serve", "--model", str(tmp_path / missing)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "make train" in r.stderr and "Traceback" not in r.stderr


def test_rare_character_without_a_reading(client: TestClient) -> None:
    # 𣃁 (CJK Extension B) has no reading in pypinyin: no tone mark, reported as unknown, no 500
    r = client.post("/api/v1/generate", json={"upper": "春𣃁风"})
    assert r.status_code == 200, r.text
    assert r.json()["upper_tones"] == ["平", "", "平"] and r.json()["unknown_chars"] == ["𣃁"]


def test_training_flag_without_the_corpus(settings: Settings) -> None:
    # a fresh machine: only the bundle's fingerprints (hashes, no text), no training pairs
    with TestClient(create_app(settings.model_copy(update={"known_pairs": None}))) as c:
        body = c.post("/api/v1/generate", json={"upper": PAIRS[1][0]}).json()
        assert body["in_training_set"] is True and body["known_lower_lines"] == []
        assert c.get("/api/v1/health").json()["known_lines"] == 0


@pytest.mark.slow
def test_known_lower_lines_from_the_bundle_without_the_corpus(
    settings: Settings, vocab: Vocab, tmp_path: Path
) -> None:
    # a fresh clone: the bundle carries its training pairs' lower lines
    bundle = build_bundle(tmp_path / "known", vocab, seed=1, version="known", known=True)
    upper, lower = PAIRS[1]
    with TestClient(create_app(settings.model_copy(update={"known_pairs": None, "model_dir": bundle}))) as c:
        body = c.post("/api/v1/generate", json={"upper": upper}).json()
        assert body["in_training_set"] is True and body["known_lower_lines"] == [lower]
        body = c.post("/api/v1/generate", json={"upper": "无此上联"}).json()
        assert body["in_training_set"] is False and body["known_lower_lines"] == []


@pytest.mark.slow
@pytest.mark.parametrize(("int8", "runtime"), [(True, "torch"), (False, "torch"), (True, "onnx")])
def test_decoding_engine_settings_hold_across_a_reload(
    settings: Settings, bundle_b: Path, int8: bool, runtime: str
) -> None:
    app = create_app(settings.model_copy(update={"int8": int8, "runtime": runtime}))

    def engine_matches() -> bool:
        model = app.state.service.model
        decoding = model.decoder.model
        if runtime == "onnx":
            return isinstance(decoding, OnnxTransformer)
        module = getattr(decoding, "module", None)  # eager: the PyTorch model behind its adapter
        return (
            isinstance(module, CoupletTransformer) and (module is not models_of(model.bundle).model) == int8
        )

    with TestClient(app) as c:
        assert engine_matches()
        body = c.post("/api/v1/generate", json={"upper": "春风得意", "n": 3}).json()
        assert len(body["candidates"]) == 3 and all(cand["report"]["hard_ok"] for cand in body["candidates"])
        r = c.post(
            "/api/v1/admin/reload", json={"model_dir": str(bundle_b)}, headers={"X-Admin-Token": "test-token"}
        )
        assert r.status_code == 200
        assert engine_matches()


@pytest.mark.slow
def test_fast_mode_takes_the_bundles_proposer(tmp_path: Path, vocab, known_pairs: Path) -> None:
    word = "金木火土日夜晴雨云雷"  # the proposer proposes only these characters
    bundle = build_bundle(tmp_path / "fast", vocab, seed=1, version="fast", proposer_word=word)
    db = f"sqlite:///{tmp_path / 'feedback.db'}"
    settings = Settings(
        model_dir=bundle,
        database_url=db,
        known_pairs=known_pairs,
        rate_limit_per_minute=0,
        decode_processes=0,
    )
    with TestClient(create_app(settings)) as c:
        assert c.get("/api/v1/model").json()["fast_mode"] is True
        upper = "春风得意"
        fast = c.post("/api/v1/generate", json={"upper": upper, "n": 5, "fast": True}).json()["candidates"]
        normal = c.post("/api/v1/generate", json={"upper": upper, "n": 5}).json()["candidates"]
    assert len(fast) == 5 and all(set(cand["text"]) <= set(word) for cand in fast)
    assert all(check(upper, cand["text"]).hard_ok and cand["report"]["hard_ok"] for cand in fast)
    assert [cand["score"] for cand in fast] == sorted((cand["score"] for cand in fast), reverse=True)
    assert normal and all(cand["report"]["hard_ok"] for cand in normal)
    ranks = [cand["rank_score"] for cand in normal]  # the tagger's opinion counts in the order
    assert ranks == sorted(ranks, reverse=True)
    assert all(cand["rank_score"] < cand["score"] for cand in normal)


def test_fast_mode_without_a_proposer_is_the_normal_search(client: TestClient) -> None:
    assert client.get("/api/v1/model").json()["fast_mode"] is False
    body = {"upper": "春风得意", "n": 3}
    fast = client.post("/api/v1/generate", json={**body, "fast": True})
    assert fast.status_code == 200
    assert fast.json()["candidates"] == client.post("/api/v1/generate", json=body).json()["candidates"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--port", "99999"], "1 to 65535"),
        (["--log-level", "loud"], "invalid choice"),
        (["--model", "JUNK"], "earlier format (model.pt)"),  # a folder of an old bundle format
        (["--database-url", "postgresql://u:p@127.0.0.1:1/x"], "cannot open the feedback store"),
    ],
)
@pytest.mark.slow
def test_serve_refuses_what_would_stop_it_in_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    import subprocess
    import sys

    (tmp_path / "model.pt").write_text("not a checkpoint\n")
    args = [str(tmp_path) if a == "JUNK" else a for a in args]
    r = subprocess.run([sys.executable, "-m", "serve", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr and "Traceback" not in r.stderr


def start_serve(bundle: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``python -m serve`` on ``bundle``, as a user starts it (it is expected to refuse)."""
    return subprocess.run(
        [sys.executable, "-m", "serve", "--model", str(bundle), "--database-url", f"sqlite:///{tmp_path}/f.db"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("proposer", ["junk", "seq2seq"])
def test_serve_refuses_a_bundle_whose_proposer_will_not_load(
    tmp_path: Path, bundle_a: Path, proposer: str
) -> None:
    from model.store.layout import (
        CONFIG_FILE,
        PROPOSER_CONFIG,
        PROPOSER_WEIGHTS,
        WEIGHTS_FILE,
        write_manifest,
    )

    bundle = tmp_path / "bundle"
    shutil.copytree(bundle_a, bundle)
    if proposer == "junk":  # a tagger's configuration, weights that are not safetensors
        config = json.loads((bundle / CONFIG_FILE).read_text(encoding="utf-8")) | {"kind": "tagger"}
        (bundle / PROPOSER_CONFIG).write_text(json.dumps(config), encoding="utf-8")
        (bundle / PROPOSER_WEIGHTS).write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{truncated")
        says, named = "not a safetensors file", PROPOSER_WEIGHTS
    else:  # an encoder-decoder where the tagger belongs
        shutil.copy(bundle / WEIGHTS_FILE, bundle / PROPOSER_WEIGHTS)
        shutil.copy(bundle / CONFIG_FILE, bundle / PROPOSER_CONFIG)
        says, named = "must be an encoder-only tagger", PROPOSER_CONFIG
    write_manifest(bundle)  # made so, not damaged afterwards: the sums match
    r = start_serve(bundle, tmp_path)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr and named in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_serve_refuses_a_bundle_whose_known_lines_will_not_load(tmp_path: Path, bundle_a: Path) -> None:
    from model.store.layout import KNOWN_FILE, write_manifest

    bundle = tmp_path / "bundle"
    shutil.copytree(bundle_a, bundle)
    (bundle / KNOWN_FILE).write_bytes(b"\xfd7zXZ truncated")
    write_manifest(bundle)  # made so: the sums match
    r = start_serve(bundle, tmp_path)
    assert r.returncode == 2, r.stderr
    assert KNOWN_FILE in r.stderr and "not a file of known lower lines" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "damaged", ["model.safetensors", "config.json", "spm.model", "proposer.safetensors", "sensitive.npy"]
)
def test_serve_refuses_a_bundle_that_differs_from_its_sums(
    tmp_path: Path, vocab: Vocab, damaged: str
) -> None:
    """4 KiB of random bytes inside a file of the bundle (the weights would load and serve):
    the start-up stops with one line naming the file, exit status 2, no traceback."""
    import random

    from model.store.layout import MANIFEST_FILE

    bundle = build_bundle(tmp_path / "bundle", vocab, seed=1, version="test-sums", proposer_word="秋月生辉")
    assert damaged in (bundle / MANIFEST_FILE).read_text()
    data = (bundle / damaged).read_bytes()
    middle = len(data) // 2
    chunk = min(4096, len(data) // 4)
    (bundle / damaged).write_bytes(
        data[:middle] + random.Random(25).randbytes(chunk) + data[middle + chunk :]
    )
    r = start_serve(bundle, tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"bundle/{damaged}: damaged or replaced" in lines[0], r.stderr
    assert lines[0].startswith("cannot load the model bundle:") and "Traceback" not in r.stderr


def test_upper_lines_for_a_lower_line(client: TestClient) -> None:
    """下联求上联: the lower line given as ``lower``; upper lines under the mirrored rules."""
    lower = "明月照窗前"  # ends 平, as a lower line should
    r = client.post("/api/v1/generate", json={"lower": lower, "n": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["direction"] == "lower_to_upper" and body["lower"] == lower and body["upper"] is None
    assert body["lower_tones"] == [mark(t) for t in line_tones(lower)]
    assert body["in_training_set"] is False and body["known_lower_lines"] == []
    assert body["upper_ends_level"] is False and body["reads_reversed"] is False
    assert 1 <= len(body["candidates"]) <= 3
    for cand in body["candidates"]:
        upper = cand["text"]
        assert len(upper) == len(lower) and not set(upper) & set(lower)
        assert cand["tones"][-1] == "仄"  # the written upper line ends oblique
        expected = check(upper, lower)  # the pair as a couplet: (upper, lower)
        assert cand["report"] == {**expected.as_dict(), "hard_ok": expected.hard_ok}
    same = client.post("/api/v1/generate", json={"lower": lower, "n": 3, "direction": "lower_to_upper"})
    assert [c["text"] for c in same.json()["candidates"]] == [c["text"] for c in body["candidates"]]
    forward = client.post("/api/v1/generate", json={"upper": lower, "n": 3}).json()
    assert forward["direction"] == "upper_to_lower" and forward["lower"] is None
    assert forward["reads_reversed"] is True  # an upper line ending 平 reads like a lower line
    assert client.get("/api/v1/model").json()["reverse_model"] is True
    oblique = client.post("/api/v1/generate", json={"lower": "花开富贵"}).json()
    assert oblique["reads_reversed"] is True and oblique["upper_ends_level"] is False


def test_the_direction_and_its_line_must_agree(client: TestClient) -> None:
    cases = [
        ({"upper": "明月", "lower": "清风"}, "不给下联"),
        ({"upper": "明月", "direction": "lower_to_upper"}, "只给下联"),
        ({"direction": "upper_to_lower"}, "请给出上联"),
        ({}, "请给出上联"),
    ]
    for body, message in cases:
        r = client.post("/api/v1/generate", json=body)
        assert r.status_code == 422, (body, r.text)
        assert message in r.text and any(c.isascii() and c.isalpha() for c in r.json()["detail"])
    r = client.post("/api/v1/generate", json={"lower": "明月", "direction": "sideways"})
    assert r.status_code == 422
    r = client.post("/api/v1/generate", json={"lower": "明月", "required_chars": "明"})
    assert r.status_code == 422 and "下联" in r.text and "上联中出现" not in r.text


@pytest.mark.slow
def test_a_bundle_without_a_reverse_model_says_so(tmp_path: Path, settings: Settings, vocab: Vocab) -> None:
    bundle = build_bundle(tmp_path / "m", vocab, seed=1, version="test-no-reverse")
    app = create_app(settings.model_copy(update={"model_dir": bundle}))
    with TestClient(app) as c:
        assert c.get("/api/v1/model").json()["reverse_model"] is False
        r = c.post("/api/v1/generate", json={"lower": "明月照窗前"})
        assert r.status_code == 422 and "没有下联求上联" in r.text and "no upper lines" in r.text
        assert c.post("/api/v1/generate", json={"upper": "明月照窗前"}).status_code == 200


def test_alternatives_for_an_upper_line_written_for_a_lower_line(client: TestClient) -> None:
    lower = "明月照窗前"
    upper = client.post("/api/v1/generate", json={"lower": lower, "n": 1}).json()["candidates"][0]["text"]
    body = {"upper": upper, "lower": lower, "position": 1, "direction": "lower_to_upper", "n": 4}
    r = client.post("/api/v1/alternatives", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["direction"] == "lower_to_upper" and answer["upper"] == upper and answer["lower"] == lower
    assert answer["alternatives"]
    for a in answer["alternatives"]:
        assert a["text"][0] == upper[0] and a["text"][2:] == upper[2:] and a["char"] == a["text"][1]
        assert a["tones"][-1] == "仄" and not set(a["text"]) & set(lower)
        assert a["report"]["hard_ok"] is True

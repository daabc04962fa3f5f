"""HTTP hardening, through the real app (and a real uvicorn where the server's own
configuration matters): strict types, lock lengths, bilingual 404/405, security headers,
forwarded headers believed only from listed proxies, the rate limits and their 429s, no Host
reflection, the API page's document, model_version checked, idempotent feedback posts."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import LiveServer, wait_known

UPPER = "春风得意"
OWN = {"kind": "own", "upper": UPPER, "lower": "秋月生辉"}


def bilingual(detail: str) -> bool:
    return (
        " / " in detail
        and re.search(r"[\u4e00-\u9fff]", detail) is not None
        and re.search(r"[A-Za-z]{3}", detail) is not None
    )


def db_rows(settings: Settings) -> list[tuple[Any, ...]]:
    path = settings.database_url.removeprefix("sqlite:///")
    assert Path(path).is_file()
    with sqlite3.connect(path) as con:
        return con.execute(
            "SELECT id, kind, upper, lower, model_version FROM feedback ORDER BY id"
        ).fetchall()


# --- strict request types and lock patterns -------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [{"n": "5"}, {"n": True}, {"n": 5.0}, {"fast": "yes"}, {"fast": 1}, {"diverse": "true"}],
    ids=["n-string", "n-bool", "n-float", "fast-string", "fast-int", "diverse-string"],
)
def test_values_of_the_wrong_json_type_are_refused(client: TestClient, extra: dict[str, Any]) -> None:
    r = client.post("/api/v1/generate", json={"upper": UPPER, **extra})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert bilingual(detail) and next(iter(extra)) in detail


def test_values_of_the_right_type_are_taken(client: TestClient) -> None:
    r = client.post("/api/v1/generate", json={"upper": UPPER, "n": 2, "fast": False, "diverse": False})
    assert r.status_code == 200 and len(r.json()["candidates"]) == 2


@pytest.mark.parametrize(
    ("locks", "code"), [("___", 422), ("_____", 422), ("＿＿＿", 422), ("____", 200), ("", 200)]
)
def test_a_lock_pattern_must_be_as_long_as_the_line_even_when_it_locks_nothing(
    client: TestClient, locks: str, code: int
) -> None:
    r = client.post("/api/v1/generate", json={"upper": UPPER, "n": 2, "locks": locks})
    assert r.status_code == code, r.text
    if code == 422:
        assert bilingual(r.json()["detail"]) and "lock pattern" in r.json()["detail"]


# --- errors, headers, redirects ---------------------------------------------------------------


def test_404_and_405_are_bilingual_json(client: TestClient) -> None:
    for path in ("/nowhere", "/api/v1/nothing", "/static/missing.js"):
        r = client.get(path)
        assert r.status_code == 404 and bilingual(r.json()["detail"]), (path, r.text)
    r = client.get("/api/v1/generate")
    assert r.status_code == 405 and bilingual(r.json()["detail"]), r.text
    assert r.headers["allow"] == "POST"


def test_security_headers_on_every_response(client: TestClient) -> None:
    responses = [
        client.get("/"),
        client.get("/static/app.js"),
        client.get("/docs"),
        client.get("/api/v1/health"),
        client.get("/nowhere"),
        client.post("/api/v1/generate", json={"upper": "abc"}),
        client.post("/api/v1/generate", content=b"x" * 5000, headers={"content-type": "application/json"}),
    ]
    for r in responses:
        csp = r.headers.get("content-security-policy", "")
        assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp, r.request.url
        assert "'unsafe-inline'" not in csp.split("script-src", 1)[1].split(";")[0]
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer"
    assert [r.status_code for r in responses] == [200, 200, 200, 200, 404, 422, 413]
    page = responses[0].text  # the page needs nothing the policy refuses: no inline script or style
    assert not re.search(r"<script(?![^>]*\bsrc=)", page) and "style=" not in page and "<style" not in page


@pytest.mark.parametrize(
    "path", ["/api/v1/health/", "/static", "/docs/", "/docs-assets", "/api/v1/generate/"]
)
def test_no_redirect_is_built_from_the_host_header(client: TestClient, path: str) -> None:
    r = client.get(path, headers={"Host": "evil.example"}, follow_redirects=False)
    assert not 300 <= r.status_code < 400, (r.status_code, r.headers)
    assert "evil.example" not in json.dumps(dict(r.headers)) + r.text


# --- the admin token and the rate limits -----------------------------------------------------


@pytest.mark.parametrize(
    "token", ["令牌".encode(), "tök".encode("latin-1"), b"\xff\xfe", "test-token令".encode()]
)
def test_a_malformed_admin_token_is_401(client: TestClient, token: bytes) -> None:
    r = client.post("/api/v1/admin/reload", json={}, headers={b"X-Admin-Token": token})
    assert r.status_code == 401 and bilingual(r.json()["detail"]), r.text


def test_a_non_ascii_admin_token_set_by_the_operator_still_matches(settings: Settings) -> None:
    with TestClient(create_app(settings.model_copy(update={"admin_token": "令牌-1"}))) as c:
        r = c.post("/api/v1/admin/reload", json={}, headers={b"X-Admin-Token": "令牌-1".encode()})
        assert r.status_code == 200, r.text


def test_the_admin_endpoint_is_rate_limited(settings: Settings) -> None:
    app = create_app(
        settings.model_copy(update={"admin_rate_limit_per_minute": 1, "admin_rate_limit_burst": 2})
    )
    with TestClient(app) as c:
        wrong = {"X-Admin-Token": "guess"}
        codes = [c.post("/api/v1/admin/reload", json={}, headers=wrong).status_code for _ in range(3)]
        assert codes == [401, 401, 429]
        r = c.post("/api/v1/admin/reload", json={}, headers={"X-Admin-Token": "test-token"})
        assert r.status_code == 429 and bilingual(r.json()["detail"]) and int(r.headers["Retry-After"]) >= 1
        assert c.post("/api/v1/generate", json={"upper": UPPER}).status_code == 200  # its own bucket


def test_the_429_body_says_the_seconds_of_retry_after(settings: Settings) -> None:
    app = create_app(settings.model_copy(update={"rate_limit_per_minute": 600.0, "rate_limit_burst": 1}))
    with TestClient(app) as c:
        for _ in range(500):  # a token every 0.1 s: two requests in a row soon meet the limit
            r = c.post("/api/v1/generate", json={"upper": UPPER})
            if r.status_code == 429:
                break
        assert r.status_code == 429, "the limit was never met"
        seconds = r.headers["Retry-After"]
        assert seconds.isdigit() and int(seconds) >= 1
        detail = r.json()["detail"]
        assert f"请 {seconds} 秒后再试" in detail and f"retry in {seconds} s" in detail, detail


def limited_codes(live: LiveServer, forwarded: bool) -> list[int]:
    with httpx.Client(base_url=live.url, timeout=60) as http:
        return [
            http.post(
                "/api/v1/generate",
                json={"upper": UPPER},
                headers={"X-Forwarded-For": f"203.0.113.{i}"} if forwarded else {},
            ).status_code
            for i in range(5)
        ]


@pytest.mark.parametrize("trusted", ["", "127.0.0.1"])
def test_x_forwarded_for_is_believed_only_from_a_listed_proxy(settings: Settings, trusted: str) -> None:
    """By default the client is the socket peer: a made-up X-Forwarded-For per request does not
    make a new client. Behind a listed proxy, each forwarded address has its own bucket."""
    update = {"rate_limit_per_minute": 1.0, "rate_limit_burst": 3, "trusted_proxies": trusted}
    with LiveServer(create_app(settings.model_copy(update=update))) as live:
        wait_known(live.app)
        if trusted:
            assert limited_codes(live, forwarded=True) == [200] * 5
        else:
            assert limited_codes(live, forwarded=True) == [200, 200, 200, 429, 429]


# --- the API page ---------------------------------------------------------------------------------


def test_the_api_page_has_no_inline_script_and_a_document_its_ui_reads(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200 and "https://" not in page.text and "http://" not in page.text
    assert not re.search(r"<script(?![^>]*\bsrc=)", page.text)  # the CSP allows no inline script
    for asset in re.findall(r'(?:src|href)="(/[^"]+)"', page.text):
        assert client.get(asset).status_code == 200, asset
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")
    doc = client.get("/docs/openapi-3.0.json").json()
    assert doc["openapi"] == "3.0.3"
    text = json.dumps(doc)
    assert '"type": "null"' not in text and '"const"' not in text and '"examples"' not in text
    for ref in set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', text)):
        assert ref in doc["components"]["schemas"], ref
    feedback = doc["components"]["schemas"]["FeedbackRequest"]["properties"]
    assert feedback["model_version"]["nullable"] is True and feedback["model_version"]["type"] == "string"
    assert set(doc["paths"]) == set(client.get("/openapi.json").json()["paths"])


# --- feedback: model_version, Idempotency-Key -------------------------------------------------------


@pytest.mark.parametrize(
    "version",
    ["test\x00a", "<b>x</b>", "a" * 65, "", " test-a", "版本一"],
    ids=["nul", "html", "long", "empty", "space", "han"],
)
def test_a_model_version_that_is_no_version_is_refused(
    client: TestClient, settings: Settings, version: str
) -> None:
    r = client.post("/api/v1/feedback", json={**OWN, "model_version": version})
    assert r.status_code == 422 and bilingual(r.json()["detail"]), r.text
    assert "model_version" in r.json()["detail"]
    assert db_rows(settings) == []


def test_a_model_version_is_stored(client: TestClient, settings: Settings) -> None:
    for version in ("test-a", "step59000-1a2b3c4d"):
        assert client.post("/api/v1/feedback", json={**OWN, "model_version": version}).status_code == 201
    assert [row[-1] for row in db_rows(settings)] == ["test-a", "step59000-1a2b3c4d"]


def test_a_feedback_post_retried_with_its_key_is_stored_once(client: TestClient, settings: Settings) -> None:
    key = {"Idempotency-Key": "7f0c3a9e-4b1d-4e8a-9c2f-0d6b5a4e3c21"}
    first = client.post("/api/v1/feedback", json=OWN, headers=key)
    again = client.post("/api/v1/feedback", json=OWN, headers=key)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    other = client.post("/api/v1/feedback", json=OWN, headers={"Idempotency-Key": "another"})
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]
    plain = [client.post("/api/v1/feedback", json=OWN).json()["id"] for _ in range(2)]  # no key: each stored
    assert len(set(plain)) == 2
    assert [row[0] for row in db_rows(settings)] == [first.json()["id"], other.json()["id"], *plain]

    reused = client.post("/api/v1/feedback", json={**OWN, "lower": "秋雨连绵"}, headers=key)
    assert reused.status_code == 422 and bilingual(reused.json()["detail"]), reused.text
    for bad in ("has space", "x" * 129, "ключ"):
        r = client.post("/api/v1/feedback", json=OWN, headers={b"Idempotency-Key": bad.encode()})
        assert r.status_code == 422 and bilingual(r.json()["detail"]), (bad, r.text)
    assert len(db_rows(settings)) == 4


def test_concurrent_retries_with_one_key_store_one_row(live: LiveServer, settings: Settings) -> None:
    codes: list[tuple[int, int]] = []
    lock = threading.Lock()

    def post() -> None:
        with httpx.Client(base_url=live.url, timeout=60) as http:
            r = http.post("/api/v1/feedback", json=OWN, headers={"Idempotency-Key": "same-key"})
        with lock:
            codes.append((r.status_code, r.json()["id"]))

    threads = [threading.Thread(target=post) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(codes) == 12 and {code for code, _ in codes} == {201} and len({i for _, i in codes}) == 1
    assert len(db_rows(settings)) == 1

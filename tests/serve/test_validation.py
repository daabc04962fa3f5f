"""Bad input: every refusal is a 422 with a Chinese and an English message, and serving goes on."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import httpx2
import pytest
from fastapi.testclient import TestClient

from serve.validation import clean_line
from tests.serve.conftest import LiveServer

BAD_UPPERS = {
    "empty": "",
    "blank": "   ",
    "too long": "春" * 101,
    "latin": "春风abc",
    "emoji": "春风😀得意",
    "html": "<b>春风</b>",
    "script": "<script>alert(1)</script>",
    "entity": "春风&amp;得意",
    "only punctuation": "，。！？",
    "control": "春风\x00得意",
    "control 2": "春风\x1b[31m",
    "digits": "春风2024",
    "zero width": "春风\u200b得意",
}
HAS_HAN = re.compile(r"[\u4e00-\u9fff]")
HAS_LATIN_WORD = re.compile(r"[A-Za-z]{3,}")


@pytest.mark.parametrize("name", sorted(BAD_UPPERS))
def test_bad_upper_is_422_in_two_languages(client: TestClient, name: str) -> None:
    r = client.post("/api/v1/generate", json={"upper": BAD_UPPERS[name]})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str)
    zh, _, en = detail.partition(" / ")
    assert HAS_HAN.search(zh) and HAS_LATIN_WORD.search(en), detail
    assert "Traceback" not in r.text
    # the server keeps serving
    assert client.post("/api/v1/generate", json={"upper": "春风得意"}).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"upper": "春风得意", "n": 0},
        {"upper": "春风得意", "n": 11},
        {"upper": "春风得意", "tone_mode": "martian"},
        {"upper": 123},
        {},
        {"upper": "春风得意", "locks": "_好"},
        {"upper": "春风得意", "locks": "a___"},
        {"upper": "春风得意", "required_first": "秋月"},
        {"upper": "春风得意", "required_chars": "ab"},
        {"upper": "春风得意", "n": 51},
        {"upper": "春风得意", "required_char": "秋"},  # misspelt: refused, not ignored
    ],
)
def test_bad_options_are_422(client: TestClient, body: dict[str, object]) -> None:
    r = client.post("/api/v1/generate", json=body)
    assert r.status_code == 422, r.text
    assert " / " in r.json()["detail"]


def test_the_candidate_limit_is_the_servers_and_an_unknown_field_is_named(client: TestClient) -> None:
    for n in (11, 51, 10**6):
        detail = client.post("/api/v1/generate", json={"upper": "春风得意", "n": n}).json()["detail"]
        assert detail.endswith("At most 10 candidates."), detail
    detail = client.post("/api/v1/generate", json={"upper": "春风得意", "required_char": "秋"}).json()[
        "detail"
    ]
    assert "required_char" in detail and "Extra inputs are not permitted" in detail, detail


def bilingual(r: httpx.Response | httpx2.Response) -> str:  # (a real server's client; TestClient's)
    """The JSON ``detail`` of a refusal, checked to say it in Chinese and in English."""
    assert r.headers["content-type"].startswith("application/json"), r.text
    detail = r.json()["detail"]
    zh, _, en = detail.rpartition(" / ")
    assert HAS_HAN.search(zh) and HAS_LATIN_WORD.search(en), detail
    return str(detail)


@pytest.mark.parametrize(
    ("body", "content_type", "code", "says"),
    [
        (b"{not json", "application/json", 422, "not valid JSON"),
        ('{"upper": "春风得意"}'.encode(), "text/plain", 422, "must be a JSON object"),
        (b'["upper", "n"]', "application/json", 422, "must be a JSON object"),
        (b'{"upper": "' + bytes([0xFF, 0xFE]) + '春风"}'.encode(), "application/json", 400, "UTF-8"),
        (b"[" * 2000 + b"]" * 2000, "application/json", 400, "UTF-8"),  # too deep for the parser
    ],
)
def test_a_body_that_is_not_a_json_object_is_refused_in_two_languages(
    client: TestClient, body: bytes, content_type: str, code: int, says: str
) -> None:
    r = client.post("/api/v1/generate", content=body, headers={"Content-Type": content_type})
    assert r.status_code == code, r.text
    assert says in bilingual(r)


def test_oversized_body_is_413(client: TestClient) -> None:
    r = client.post("/api/v1/generate", json={"upper": "春风得意", "locks": "_" * 10_000})
    assert r.status_code == 413
    assert "4096 bytes" in bilingual(r)
    assert client.get("/api/v1/health").status_code == 200


def test_an_oversized_body_sent_in_chunks_is_413_on_a_real_server(live: LiveServer) -> None:
    """No Content-Length: the limit counts what is read (a real uvicorn server, chunked)."""

    def chunks() -> Iterator[bytes]:
        yield b'{"upper": "'
        for _ in range(100):
            yield "春".encode() * 30
        yield b'"}'

    r = httpx.post(
        f"{live.url}/api/v1/generate", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413 and "4096 bytes" in bilingual(r)
    json_type = {"Content-Type": "application/json"}
    small = httpx.post(
        f"{live.url}/api/v1/generate",
        content=iter([b'{"upper": ', '"春风得意"}'.encode()]),
        headers=json_type,
    )
    assert small.status_code == 200, small.text  # a small chunked body is read as usual


def test_normalisation_folds_ascii_marks_and_spaces() -> None:
    assert clean_line(" 春风, 得意! ", 32) == "春风，得意！"
    assert clean_line("春風得意", 32) == "春风得意"  # traditional input, simplified as in training
    assert clean_line("春" * 32, 32) == "春" * 32

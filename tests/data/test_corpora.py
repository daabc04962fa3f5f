"""`python -m data.corpora` against a real HTTP server on 127.0.0.1 serving small archives
built here: a good download laid out and read by the data stage, a wrong checksum
refused, an interrupted download resumed by a rerun."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from data.__main__ import main as data_main
from data.corpora import DOWNLOADS, MARKER
from data.corpora import main as corpora_main
from tests.data.conftest import made_up_pairs

TRAIN = made_up_pairs(40)
TEST = made_up_pairs(6, offset=200)


class Server:
    """Serves ``files`` (name → bytes) with Range support; ``cut`` (name → n) makes the
    next request for that name send its full Content-Length, then n bytes, then hang up."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.cut: dict[str, int] = {}
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                name = self.path.rsplit("/", 1)[-1]
                outer.requests.append((self.path, self.headers.get("Range")))
                body = outer.files.get(name)
                if body is None:
                    self.send_error(404)
                    return
                start = 0
                ranged = self.headers.get("Range")
                if ranged:
                    start = int(ranged.removeprefix("bytes=").split("-")[0])
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                cut = outer.cut.pop(name, None)
                if cut is not None:
                    self.wfile.write(body[start : start + cut])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body[start:])

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/mirror"


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    thread = threading.Thread(target=s.httpd.serve_forever, daemon=True)
    thread.start()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def tar_gz(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def spaced(lines: list[str]) -> str:
    """The release's layout: characters separated by spaces, one line each."""
    return "".join(" ".join(line) + " \n" for line in lines)


def wb14123_archive() -> bytes:
    return tar_gz(
        {
            "couplet/train/in.txt": spaced([u for u, _ in TRAIN]),
            "couplet/train/out.txt": spaced([w for _, w in TRAIN]),
            "couplet/test/in.txt": spaced([u for u, _ in TEST]),
            "couplet/test/out.txt": spaced([w for _, w in TEST]),
            "couplet/vocabs": "春\n",
        }
    )


def poetry_archive() -> bytes:
    primer = {"title": "聲律啓蒙", "content": [{"chapter": "一 東", "paragraphs": ["雲對雨，雪對風。"]}]}
    return tar_gz(
        {
            "package/package.json": '{"name": "chinese-poetry", "version": "2.0.1"}',
            "package/dist/mengxue/shenglvqimeng.json": json.dumps(primer, ensure_ascii=False),
        }
    )


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def filename(name: str) -> str:
    return next(d.filename for d in DOWNLOADS if d.name == name)


@pytest.fixture
def served(server: Server) -> dict[str, bytes]:
    archives = {"wb14123": wb14123_archive(), "chinese-poetry": poetry_archive()}
    for name, body in archives.items():
        server.files[filename(name)] = body
    return archives


def pins(archives: dict[str, bytes]) -> list[str]:
    return [a for name, body in archives.items() for a in ("--sha256", f"{name}={sha(body)}")]


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        corpora_main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "--base-url" in out and "--sha256" in out and "DUILIAN_CORPORA_BASE_URL" in out


def test_good_download_is_laid_out_and_read_by_the_data_stage(
    tmp_path: Path, server: Server, served: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "corpus"
    monkeypatch.setenv("DUILIAN_CORPUS_DIR", str(root))
    monkeypatch.setenv("DUILIAN_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setenv("DUILIAN_CORPORA_BASE_URL", server.url)  # the option's default
    assert corpora_main(pins(served)) == 0
    assert (root / "wb14123" / "train" / "in.txt").is_file()
    assert (root / "wb14123" / "test" / "out.txt").is_file()
    assert (root / "chinese-poetry" / "dist" / "mengxue" / "shenglvqimeng.json").is_file()
    for name, body in served.items():
        archive = root / "downloads" / filename(name)
        assert archive.read_bytes() == body and not archive.with_name(archive.name + ".part").exists()
        folder = next(d.folder for d in DOWNLOADS if d.name == name)
        assert json.loads((root / folder / MARKER).read_text())["sha256"] == sha(body)
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no temporary folder left

    # A second run finds them in place and fetches nothing.
    before = len(server.requests)
    assert corpora_main(pins(served)) == 0
    assert len(server.requests) == before

    # The data stage reads the release folder in place of the shared TSVs.
    out = tmp_path / "data"
    assert data_main(["--out-dir", str(out), "--valid-size", "4", "--classical-valid-size", "0"]) == 0
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["sources"]["wb14123_train"]["kind"] == "wb14123"
    assert report["sources"]["wb14123_train"]["pairs_read"] == len(TRAIN)
    assert report["sources"]["wb14123_test"]["pairs_read"] == len(TEST)
    assert (out / "test.tsv").read_text(encoding="utf-8") == "".join(f"{u}\t{w}\n" for u, w in TEST)
    train = (out / "train.tsv").read_text(encoding="utf-8").splitlines()
    valid = (out / "valid.tsv").read_text(encoding="utf-8").splitlines()
    assert sorted(train + valid) == sorted(f"{u}\t{w}" for u, w in TRAIN)


def test_wrong_checksum_is_refused(
    tmp_path: Path, server: Server, served: dict[str, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "corpus"
    wrong = "0" * 64
    argv = ["--corpus-dir", str(root), "--base-url", server.url, "--only", "wb14123"]
    assert corpora_main([*argv, "--sha256", f"wb14123={wrong}"]) == 1
    err = capsys.readouterr().err
    assert "couplet.tar.gz" in err and wrong in err and sha(served["wb14123"]) in err
    assert not (root / "wb14123").exists()
    assert not list((root / "downloads").iterdir())  # neither the file nor a partial one


def test_the_recorded_checksum_is_the_default(
    tmp_path: Path, server: Server, served: dict[str, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    # The fixture is not the real npm tarball: the recorded sha256 refuses it.
    root = tmp_path / "corpus"
    recorded = next(d.sha256 for d in DOWNLOADS if d.name == "chinese-poetry")
    assert recorded is not None and len(recorded) == 64
    argv = ["--corpus-dir", str(root), "--base-url", server.url, "--only", "chinese-poetry"]
    assert corpora_main(argv) == 1
    assert recorded in capsys.readouterr().err
    assert not (root / "chinese-poetry").exists()


def test_unpinned_source_needs_a_pin_or_consent(
    tmp_path: Path, server: Server, served: dict[str, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "corpus"
    argv = ["--corpus-dir", str(root), "--base-url", server.url, "--only", "wb14123"]
    assert corpora_main(argv) == 1  # wb14123 has no recorded sha256
    assert sha(served["wb14123"]) in capsys.readouterr().err
    assert not (root / "wb14123").exists()
    assert corpora_main([*argv, "--allow-unpinned"]) == 0
    assert server.requests[-1][1] is not None  # the kept download was not fetched again whole
    assert (root / "wb14123" / "train" / "in.txt").is_file()


def test_interrupted_download_is_resumed_by_a_rerun(
    tmp_path: Path, server: Server, served: dict[str, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "corpus"
    body = served["wb14123"]
    half = len(body) // 2
    server.cut[filename("wb14123")] = half
    argv = ["--corpus-dir", str(root), "--base-url", server.url, "--only", "wb14123", *pins(served)[:2]]
    assert corpora_main(argv) == 1
    assert "interrupted" in capsys.readouterr().err
    archive = root / "downloads" / filename("wb14123")
    part = archive.with_name(archive.name + ".part")
    assert not archive.exists() and not (root / "wb14123").exists()  # no half file in place
    assert part.stat().st_size == half

    assert corpora_main(argv) == 0
    assert server.requests[-1][1] == f"bytes={half}-"  # resumed, not fetched again
    assert archive.read_bytes() == body and not part.exists()
    assert (root / "wb14123" / "test" / "in.txt").read_text(encoding="utf-8") == spaced([u for u, _ in TEST])


def test_damaged_partial_file_is_removed_then_fetched_whole(
    tmp_path: Path, server: Server, served: dict[str, bytes]
) -> None:
    root = tmp_path / "corpus"
    downloads = root / "downloads"
    downloads.mkdir(parents=True)
    # A partial file from somewhere else: the server answers 206 from that offset, but the
    # bytes do not match, so the checksum refuses the result and removes it ...
    (downloads / (filename("wb14123") + ".part")).write_bytes(b"x" * 10)
    argv = ["--corpus-dir", str(root), "--base-url", server.url, "--only", "wb14123", *pins(served)[:2]]
    assert corpora_main(argv) == 1
    assert not (downloads / (filename("wb14123") + ".part")).exists()
    # ... and the next run downloads it whole.
    assert corpora_main(argv) == 0
    assert server.requests[-1][1] is None


def test_shared_tsvs_are_read_before_the_release_folder(corpus: Path) -> None:
    # `corpus` (conftest) holds the shared wb14123 TSVs; a release folder beside them is ignored.
    with tarfile.open(fileobj=io.BytesIO(wb14123_archive())) as tar:
        tar.extractall(corpus, filter="data")
    (corpus / "couplet").rename(corpus / "wb14123")
    out = corpus.parent / "data"
    assert data_main(["--out-dir", str(out), "--valid-size", "4", "--classical-valid-size", "0"]) == 0
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["sources"]["wb14123_train"]["kind"] == "tsv"
    assert report["sources"]["wb14123_train"]["files"] == [str(corpus / "wb14123_train.tsv.gz")]
    assert (out / "test.tsv").read_bytes() == (corpus / "wb14123_test.tsv").read_bytes()

"""`make corpora`: download the public sources of the data stage into the corpus folder.

Each source is fetched from its canonical location (or from a mirror: --base-url or
DUILIAN_CORPORA_BASE_URL), checked against the sha256 recorded in data/corpora.py, and
unpacked into the corpus folder (--corpus-dir or DUILIAN_CORPUS_DIR) as the data stage
reads it. A download goes to downloads/NAME.part first and is resumed where it stopped
when run again; only a file whose sha256 matches is renamed into place and unpacked, and
a source is unpacked into a temporary folder that replaces the old one in one rename.

Exit status: 0 when every chosen source is in place, 1 when one failed (the message names
the file, and for a wrong checksum the expected and actual hashes), 2 for bad options.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import http.client
import json
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from data.config import WB14123_RELEASE
from data.paths import corpus_dir

CHUNK = 1 << 20
MARKER = ".corpora.json"  # in each unpacked folder: where it came from, and its sha256
BASE_URL_ENV = "DUILIAN_CORPORA_BASE_URL"


@dataclasses.dataclass(frozen=True)
class Download:
    """One public source: where it is, its recorded checksum, and where it goes."""

    name: str
    url: str
    sha256: str | None  # None: not pinned yet (see docs/DATA.md, "Pinning a checksum")
    folder: str  # the folder in the corpus folder it is unpacked into
    strip: str  # the archive's top folder, left out when unpacking
    license: str
    home: str
    used_for: str

    @property
    def filename(self) -> str:
        return PurePosixPath(self.url).name


DOWNLOADS = (
    Download(
        name="wb14123",
        url="https://github.com/wb14123/couplet-dataset/releases/download/1.0/couplet.tar.gz",
        # Not pinned: GitHub could not be reached where this was written. Pin it with the
        # hash a first download prints (docs/DATA.md, "Pinning a checksum").
        sha256=None,
        folder=WB14123_RELEASE,
        strip="couplet",
        license="AGPL-3.0 (as the shared folder's README records; a model trained on it is AGPL-3.0)",
        home="https://github.com/wb14123/couplet-dataset",
        used_for="wb14123_train (train/in.txt, out.txt) and wb14123_test (test/in.txt, out.txt), "
        "read from the release folder when the shared TSVs are absent",
    ),
    Download(
        name="chinese-poetry",
        url="https://registry.npmjs.org/chinese-poetry/-/chinese-poetry-2.0.1.tgz",
        # Computed from the tarball, whose sha1 (b6e7e60d…) and sha512 integrity
        # (sha512-KtYARvV7…) match the npm registry's record for chinese-poetry@2.0.1.
        sha256="25b549e46919c3a0569db6b68ddc96956b04a484ea4518ad2bbd4f137e307e86",
        folder="chinese-poetry",
        strip="package",
        license="MIT",
        home="https://github.com/chinese-poetry/chinese-poetry",
        used_for="the raw text that poetry_lvshi, poetry_couplets_more and poetry_lines were built "
        "from (by hand, outside the project); dist/mengxue/shenglvqimeng.json holds 声律启蒙",
    ),
)


class CorporaError(Exception):
    """A source could not be put in place; the message says which file and why."""


class ChecksumError(CorporaError):
    pass


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def source_url(download: Download, base_url: str | None) -> str:
    """The canonical URL, or the same file name under a mirror's base URL."""
    if not base_url:
        return download.url
    return f"{base_url.rstrip('/')}/{download.filename}"


def fetch(url: str, part: Path, say: Callable[[str], None], timeout: float = 60.0) -> None:
    """Download ``url`` into ``part``, resuming from the bytes already there.

    Raises CorporaError when the connection ends before the announced length; the bytes
    received stay in ``part`` for the next run to resume from.
    """
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "duilian-corpora/1"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # nothing after what we have: the file is complete
            return
        raise CorporaError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise CorporaError(f"{url}: cannot connect ({exc})") from exc
    with response:
        resumed = response.status == 206 and response.headers.get("Content-Range", "").startswith(
            f"bytes {have}-"
        )
        if have and not resumed:
            say(f"  the server does not resume downloads: starting {part.name} again")
            have = 0
        length = response.headers.get("Content-Length")
        expected = have + int(length) if length is not None else None
        got = have
        try:
            with part.open("ab" if resumed else "wb") as fh:
                while block := response.read(CHUNK):
                    fh.write(block)
                    got += len(block)
        except (OSError, http.client.HTTPException) as exc:  # a reset, a timeout, IncompleteRead
            raise _interrupted(url, part, got, expected, exc) from exc
    if expected is not None and got < expected:
        raise _interrupted(url, part, got, expected, None)


def _interrupted(url: str, part: Path, got: int, expected: int | None, exc: Exception | None) -> CorporaError:
    of = f" of {expected}" if expected is not None else ""
    why = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
    return CorporaError(
        f"{url}: download interrupted after {got}{of} bytes{why}; the partial file {part} is kept "
        "and the next run resumes it"
    )


def verify(path: Path, download: Download, expected: str | None, allow_unpinned: bool) -> str:
    """The file's sha256 when it matches ``expected``; otherwise the file is removed (a wrong
    checksum) or kept for a rerun (no checksum recorded) and CorporaError is raised."""
    actual = sha256_of(path)
    if expected is None:
        if allow_unpinned:
            return actual
        raise CorporaError(
            f"{download.name}: no sha256 is recorded for {download.filename}; the download "
            f"{path} has sha256 {actual}. Check it against a copy you trust, then pin it "
            f"(--sha256 {download.name}={actual}, or in data/corpora.py) or pass --allow-unpinned"
        )
    if actual != expected.lower():
        path.unlink()
        raise ChecksumError(
            f"{download.name}: checksum mismatch for {path.name}: expected sha256 {expected.lower()}, "
            f"got {actual}; the file was removed"
        )
    return actual


def _member_path(name: str, strip: str) -> str | None:
    """The member's path below the archive's top folder, or None for the top folder itself
    and for anything outside it."""
    parts = PurePosixPath(name).parts
    if not parts or parts[0] != strip or len(parts) == 1:
        return None
    return str(PurePosixPath(*parts[1:]))


def unpack(archive: Path, download: Download, dest: Path, marker: dict[str, str]) -> int:
    """Unpack the archive's top folder into ``dest`` through a temporary folder beside it,
    so ``dest`` is either the old complete folder or the new one; returns the file count."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        count = 0
        with tarfile.open(archive, "r:*") as tar:
            members = []
            for member in tar.getmembers():
                inner = _member_path(member.name, download.strip)
                if inner is None or not (member.isfile() or member.isdir()):
                    continue
                member.name = inner
                members.append(member)
                count += member.isfile()
            if not count:
                raise CorporaError(f"{archive}: no files under {download.strip}/ in the archive")
            tar.extractall(tmp, members=members, filter="data")
        (tmp / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            dest.rename(old)
            tmp.rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return count


def in_place(dest: Path, expected: str | None) -> bool:
    """True when ``dest`` was unpacked from an archive with the expected checksum."""
    try:
        marker = json.loads((dest / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return expected is None or marker.get("sha256") == expected.lower()


def get(
    download: Download,
    root: Path,
    *,
    base_url: str | None = None,
    expected: str | None = None,
    allow_unpinned: bool = False,
    force: bool = False,
    say: Callable[[str], None] = print,
) -> Path:
    """Put one source in place under ``root``; returns its folder."""
    dest = root / download.folder
    if not force and in_place(dest, expected):
        say(f"{download.name}: {dest} is in place")
        return dest
    downloads = root / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    archive = downloads / download.filename
    part = archive.with_name(archive.name + ".part")
    url = source_url(download, base_url)
    if archive.exists() and expected is not None and sha256_of(archive) != expected.lower():
        archive.unlink()  # an older or damaged download: fetch it again
    if not archive.exists() or force:
        say(f"{download.name}: downloading {url}" + (" (resuming)" if part.exists() else ""))
        fetch(url, part, say)
        digest = verify(part, download, expected, allow_unpinned)
        part.replace(archive)
    else:
        digest = verify(archive, download, expected, allow_unpinned)
    if expected is None:
        say(f"{download.name}: WARNING: no checksum recorded; {archive.name} has sha256 {digest}")
    marker = {"name": download.name, "url": url, "file": archive.name, "sha256": digest}
    count = unpack(archive, download, dest, marker)
    say(f"{download.name}: sha256 {digest} verified; {count} files in {dest}")
    return dest


def parse_pairs(specs: list[str], option: str, known: set[str]) -> dict[str, str]:
    out = {}
    for spec in specs:
        name, _, value = spec.partition("=")
        if name not in known or not value:
            names = ", ".join(sorted(known))
            raise ValueError(f"{option} {spec!r}: expected NAME=VALUE with NAME one of {names}")
        out[name] = value
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    names = [d.name for d in DOWNLOADS]
    p = argparse.ArgumentParser(
        prog="python -m data.corpora",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--corpus-dir", type=Path, help="where to put them (default: DUILIAN_CORPUS_DIR)")
    p.add_argument("--only", help=f"comma-separated sources to get (default all: {','.join(names)})")
    p.add_argument(
        "--base-url",
        default=os.environ.get(BASE_URL_ENV),
        help=f"fetch every file by its name under this URL instead of its canonical place (a mirror; "
        f"default: {BASE_URL_ENV})",
    )
    p.add_argument("--url", action="append", default=[], metavar="NAME=URL", help="one source's URL")
    p.add_argument(
        "--sha256",
        action="append",
        default=[],
        metavar="NAME=HEX",
        help="check against this sha256 instead of the recorded one (a hash you verified yourself)",
    )
    p.add_argument(
        "--allow-unpinned",
        action="store_true",
        help="unpack a source that has no recorded sha256 (its hash is printed)",
    )
    p.add_argument("--force", action="store_true", help="download and unpack again even when in place")
    p.add_argument("--list", action="store_true", help="list the sources, their links and licenses, and exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    known = {d.name for d in DOWNLOADS}
    try:
        urls = parse_pairs(args.url, "--url", known)
        pins = parse_pairs(args.sha256, "--sha256", known)
        wanted = set(args.only.split(",")) if args.only else known
        if wanted - known:
            unknown, names = ", ".join(sorted(wanted - known)), ", ".join(sorted(known))
            raise ValueError(f"unknown source(s): {unknown} (known: {names})")
    except ValueError as exc:
        print(f"corpora: error: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for d in DOWNLOADS:
            print(f"{d.name}: {d.url}\n  sha256 {d.sha256 or 'not recorded'}; license {d.license}")
            print(f"  home {d.home}\n  → {d.folder}/: {d.used_for}")
        return 0
    root = args.corpus_dir or corpus_dir()
    failed = []
    for download in DOWNLOADS:
        if download.name not in wanted:
            continue
        if download.name in urls:
            download = dataclasses.replace(download, url=urls[download.name])
        try:
            get(
                download,
                root,
                base_url=None if download.name in urls else args.base_url,
                expected=pins.get(download.name, download.sha256),
                allow_unpinned=args.allow_unpinned,
                force=args.force,
            )
        except (CorporaError, OSError, tarfile.TarError) as exc:
            print(f"corpora: error: {exc}", file=sys.stderr)
            failed.append(download.name)
    if failed:
        print(f"corpora: {', '.join(failed)} not in place (see above); run again to resume", file=sys.stderr)
        return 1
    print(f"corpora: in place in {root}; `make data` reads them")
    return 0


if __name__ == "__main__":
    sys.exit(main())

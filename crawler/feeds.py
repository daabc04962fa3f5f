"""A local feed storage that survives SIGKILL: every exported line reaches the OS at once.

Scrapy's ``FileFeedStorage`` writes through a buffered file, so a killed crawl loses the
tail of its output (and may leave half a line). Here the file is unbuffered: the JSON
lines exporter writes each item with one ``write`` call, so after a kill the file holds
exactly the items that were exported. A torn last line (only possible if the machine,
not the process, died) is cut off when the file is opened again.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from scrapy.extensions.feedexport import FileFeedStorage


def drop_torn_tail(path: Path) -> int:
    """Truncate the file after its last newline; return the number of bytes removed."""
    if not path.exists():
        return 0
    with path.open("rb+") as f:
        size = f.seek(0, 2)
        if size == 0:
            return 0
        f.seek(max(0, size - 65536))
        tail = f.read()
        if tail.endswith(b"\n"):
            return 0
        keep = size - len(tail) + tail.rfind(b"\n") + 1
        f.truncate(keep)
        return size - keep


class UnbufferedFileFeedStorage(FileFeedStorage):
    def open(self, spider: Any) -> IO[bytes]:
        path = Path(self.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.write_mode == "ab":
            drop_torn_tail(path)
        return path.open(self.write_mode, buffering=0)


def appended_feed_paths(settings: Any, spider_name: str) -> list[Path]:
    """Local JSON-lines feeds of this spider that a crawl appends to (so may already hold items)."""
    paths = []
    for uri, options in settings.getdict("FEEDS").items():
        uri = str(uri)
        if options.get("format") != "jsonlines" or options.get("overwrite", False):
            continue
        if "://" in uri and not uri.startswith("file://"):
            continue
        path = uri.removeprefix("file://") % {"name": spider_name}
        paths.append(Path(path))
    return paths

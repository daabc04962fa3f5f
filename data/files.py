"""Files written whole or not at all, and the lock a writer holds while it makes one."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_file(path: str | os.PathLike[str], mode: str = "wb", **open_args: Any) -> Iterator[IO[Any]]:
    """A file to write whose contents replace ``path`` in one rename when the block ends: a
    reader (another process, the next run after a kill) sees the old file or the new one,
    never a part. Written to a temporary file of this process's own beside ``path``
    (``mkstemp``, so two writers never share one), flushed and synced, made 0644 (``mkstemp``
    makes it 0600: a server running as another user must read it), then renamed over
    ``path``; on any error it is removed and ``path`` left as it was. ``mode``: ``"wb"`` or
    ``"w"``, ``open_args`` as ``open`` takes them (``encoding``, ``newline``)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_file writes a whole file: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **open_args) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def held_lock(path: Path) -> Iterator[None]:
    """``path`` (a lock file, made where missing) held exclusively (``flock``) for the block: a
    process that wants the same lock meanwhile waits. Where the file cannot be made (a folder
    that cannot be written), the block runs without it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path, "a")  # noqa: SIM115 (held across the yield)
    except OSError:
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)

"""Files written whole or not at all (data/files.py), by real writer processes killed midway."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from data.files import atomic_file

WRITER = """
import sys, time
from data.files import atomic_file
with atomic_file(sys.argv[1]) as f:
    f.write(b"new" * 1000)
    f.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


def test_the_file_is_replaced_whole_and_readable_by_others(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "table.txt"
    with atomic_file(path, "w", encoding="utf-8") as f:
        f.write("春风\n")
        assert not path.exists()  # nothing there until the block ends
    assert path.read_text(encoding="utf-8") == "春风\n"
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["table.txt"]


def test_an_error_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "table.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_file(path) as f:
        f.write(b"half")
        raise RuntimeError("the writer failed")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["table.bin"]


def test_a_writer_killed_midway_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "table.bin"
    path.write_bytes(b"old")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == b"writing\n"
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=30)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert path.read_bytes() == b"old"


def test_only_whole_file_modes() -> None:
    with pytest.raises(ValueError, match="mode"), atomic_file("x", "a"):
        pass

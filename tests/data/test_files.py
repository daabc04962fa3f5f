"""Files written whole or not at all (data/files.py), by real writer processes killed midway; the
lock a writer holds, held by a real process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from data.files import atomic_file, held_lock

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


HOLDER = """
import sys, time
from pathlib import Path
from data.files import held_lock
with held_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(1.0)
print("let go", flush=True)
"""


def test_a_held_lock_keeps_another_process_waiting_until_it_is_let_go(tmp_path: Path) -> None:
    lock = tmp_path / "not yet" / "graph.lock"  # its folder made on the way
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE, text=True, cwd=Path.cwd()
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    asked = time.monotonic()
    with held_lock(lock):
        waited = time.monotonic() - asked
        assert holder.stdout.readline().strip() == "let go"  # it had let go before this block ran
    holder.wait(timeout=30)
    assert waited > 0.3


def test_a_lock_that_cannot_be_made_is_done_without(tmp_path: Path) -> None:
    blocked = tmp_path / "a file"
    blocked.write_text("not a folder")
    ran = []
    with held_lock(blocked / "graph.lock"):
        ran.append(True)
    assert ran == [True]

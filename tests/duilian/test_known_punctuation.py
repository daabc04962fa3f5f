"""Known couplets whatever the punctuation (issue 39 item 3): the shipped bundle finds a
training upper line typed without its marks, and shows the known lower line with its own."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from data.paths import ROOT, corpus_dir, default_model_dir
from data.text import is_any_punct
from model.store.bundle import load_bundle

SCRIPT = os.path.join(os.path.dirname(sys.executable), "duilian")


@pytest.mark.slow
def test_the_command_line_shows_a_known_lower_line_for_a_line_typed_without_commas() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [SCRIPT, "generate", "东风引紫气一元复始", "-n", "1", "--json"],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["in_training_set"] and "大地发春华，万物更新" in answer["known_lower_lines"]


@pytest.mark.corpus
def test_a_thousand_training_upper_lines_without_their_marks_find_their_lower_lines() -> None:
    path = corpus_dir() / "wb14123_train.tsv.gz"
    if not path.is_file():
        pytest.skip(f"no {path}")
    bundle = load_bundle(default_model_dir())
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        marked = [line.split("\t", 1)[0] for line in fh if "，" in line.split("\t", 1)[0]]
    found = 0
    for upper in marked:
        lowers = bundle.known_lowers(upper)
        if not lowers:
            continue  # not a training line of the shipped model (held out, filtered)
        bare = "".join(ch for ch in upper if not is_any_punct(ch))
        assert bundle.known_lowers(bare) == lowers, upper
        assert any("，" in lower for lower in lowers), upper  # the lower lines keep their marks
        found += 1
        if found == 1000:
            break
    assert found == 1000

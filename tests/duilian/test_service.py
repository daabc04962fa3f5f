"""The in-process service: input checks, the sensitive-word filter, known lower lines and the
training-set flag, the answer in the API's JSON form; on tiny real bundles, no web server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from data.vocab import Vocab
from duilian.inputs import InputError, make_query
from duilian.service import LoadedModel
from serve.schemas import GenerateResponse
from tests.serve.conftest import BAD_WORD, PAIRS, build_bundle


def test_a_query_is_normalised_and_checked_in_order() -> None:
    q = make_query(" 春风得意 ", 3, locks="＿＿秋＿", required_first="秋")
    assert (q.upper, q.locks, q.required_first) == ("春风得意", "__秋_", "秋")
    assert make_query("春风得意", locks="____").locks is None  # locks nothing: no constraint
    with pytest.raises(InputError, match="At most 10") as caught:
        make_query("hello", 11)  # the count is checked before the line
    assert caught.value.zh == "最多可以要 10 个下联"
    with pytest.raises(InputError, match="Latin letters"):
        make_query("hello")
    with pytest.raises(InputError, match="tone mode"):
        make_query("春风得意", tone_mode="ancient")
    with pytest.raises(InputError, match="one character"):
        make_query("春风得意", required_first="秋月")
    with pytest.raises(InputError, match="as long as the upper line"):
        make_query("春风得意", locks="__秋")


def test_asked_characters_are_normalised_as_the_corpus_but_a_typed_qian_stays() -> None:
    """藏头, 嵌字 and locked characters go through the corpus's normaliser one by one; 乾, which
    it alone would make 干, stays where the user typed it. The line itself is the corpus's."""
    q = make_query("乾燥天氣", required_first="後", required_chars="發 乾", locks="＿＿風＿")
    assert q.upper == "干燥天气"  # as the corpus has it: 乾燥 → 干燥
    assert (q.required_first, q.required_chars, q.locks) == ("后", "发乾", "__风_")
    assert make_query("春风得意", required_first="乾").required_first == "乾"
    assert make_query("春风得意", required_chars="乾坤").required_chars == "乾坤"
    assert make_query("春风得意", locks="乾___").locks == "乾___"
    assert make_query("乾坤朗朗").upper == "乾坤朗朗"
    with pytest.raises(InputError, match="one character"):
        make_query("春风得意", required_first="乾 坤")


def test_filtered_candidates_are_withheld_and_counted(bad_bundle: Path) -> None:
    model = LoadedModel.load(bad_bundle)
    answer = model.answer(make_query("春风", 3))  # the model's best: the bad word
    assert answer.filtered > 0
    assert len(answer.candidates) == 3 and all(BAD_WORD not in c.text for c in answer.candidates)
    assert all(c.report.hard_ok for c in answer.candidates)
    assert answer.upper_tones is not None
    assert [len(t) for t in (answer.upper_tones, *(c.tones for c in answer.candidates))] == [2] * 4


def test_known_lines_and_the_training_flag(tmp_path: Path, vocab: Vocab) -> None:
    bundle = build_bundle(tmp_path / "k", vocab, seed=1, version="test-k", known=True, sensitive=["学海"])
    model = LoadedModel.load(bundle)
    upper, lower = PAIRS[0]
    answer = model.answer(make_query(upper, 2))
    assert answer.in_training_set and answer.known_lower_lines == [lower]
    assert answer.model_version == "test-k"
    # a known lower line the filter refuses is not shown
    hidden = model.answer(make_query("书山有路勤为径", 1))
    assert hidden.in_training_set and hidden.known_lower_lines == []
    assert not model.answer(make_query("山高水远", 1)).in_training_set


def test_the_json_form_is_the_apis(bundle_a: Path) -> None:
    answer = LoadedModel.load(bundle_a).answer(make_query("山高水长", 3))
    body = answer.as_json()
    schema = TypeAdapter(GenerateResponse)
    assert schema.dump_python(schema.validate_python(body), mode="json") == body


WARM_PROBE = """
import sys
from pathlib import Path
from data import tones
from duilian.service import LoadedModel
LoadedModel.load(Path(sys.argv[1]), warm=sys.argv[2] == "warm")
print(tones._phrase_reader.cache_info().currsize, "pypinyin" in sys.modules)
"""


@pytest.mark.slow
@pytest.mark.parametrize(("how", "expected"), [("warm", "1 True"), ("cold", "0")])
def test_a_warmed_model_has_read_pypinyins_phrases_before_its_first_request(
    bundle_a: Path, how: str, expected: str
) -> None:
    """A server's decode worker loads with ``warm``: pypinyin and its phrase reader are ready
    then, so the first line whose tones need them does not stall behind their import (0.25-0.45 s,
    seen as a p99 of 0.9 s in the first seconds of a load test); the command line loads without
    it and reads them only for such a line."""
    done = subprocess.run(
        [sys.executable, "-c", WARM_PROBE, str(bundle_a), how],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[: len(expected.split())] == expected.split()


BLAS_PROBE = """
import json, numpy, threadpoolctl
from duilian.engine import set_decode_threads
def blas():
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
before = blas()
set_decode_threads(1)
print(json.dumps({"before": before, "after": blas()}))
"""


def test_decoding_runs_one_blas_thread() -> None:
    """numpy's OpenBLAS starts with a thread per core; a decode (the command line's, a
    worker's) runs one, as the serving's thread count says: a second spun beside the first in
    the fast mode's products, doubling its CPU for no shorter wait."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    done = subprocess.run(
        [sys.executable, "-c", BLAS_PROBE], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    threads = json.loads(done.stdout)
    assert threads["after"] and all(n == 1 for n in threads["after"]), threads
    assert max(threads["before"]) > 1 or (os.cpu_count() or 1) == 1, threads  # the call changed it

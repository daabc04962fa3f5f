"""The time-to-quality benchmark on the fixture pairs: a real (tiny) training run, stopped at
its first validation below the target; no time is asserted."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.__main__ import available, default
from bench.time_to_quality import first_below, run


def test_first_below_reads_the_validation_log(tmp_path: Path) -> None:
    log = tmp_path / "valid_log.csv"
    assert first_below(log, 74.4) is None
    log.write_text(
        "step,minutes,valid_loss,valid_ppl,valid_bleu,eval_seconds\n"
        "200,4.1,6.1,463.86,0.26,5.3\n400,7.0,4.3,74.4,0.5,5.0\n600,9.8,4.2,70.1,0.5,5.0\n"
        "800,12.1,4.1,60.0,0.7,5.0\n800,12",  # a row still being written
        encoding="utf-8",
    )
    assert first_below(log, 74.4) == {"step": 600.0, "minutes": 9.8}
    assert first_below(log, 50.0) is None


def test_it_runs_only_when_named() -> None:
    assert "time_to_quality" in available() and "time_to_quality" not in default()
    assert {"decode", "serve", "train"} <= set(default())


@pytest.mark.slow
def test_a_tiny_run_from_scratch_reaches_the_target(
    tmp_path: Path, data_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUILIAN_DATA_DIR", str(data_folder))
    monkeypatch.setenv("DUILIAN_WORK_DIR", str(tmp_path))
    figures = run(argparse.Namespace(quick=True))
    assert figures["tiny_reached"] == 1, figures
    assert figures["tiny_step_at_target"] % 20 == 0 and figures["tiny_step_at_target"] < 400
    assert figures["tiny_minutes_to_target"] <= figures["tiny_last_minutes"]
    assert figures["tiny_last_ppl"] < 74.4
    out = tmp_path / "bench" / "time_to_quality_tiny"
    rows = [r.split(",") for r in (out / "valid_log.csv").read_text().splitlines()[1:]]
    first = next(r for r in rows if float(r[3]) < 74.4)
    assert int(first[0]) == figures["tiny_step_at_target"]
    assert figures["tiny_last_step"] < 400  # stopped there, not at the end of its 400 steps
    monkeypatch.setenv("DUILIAN_DATA_DIR", str(tmp_path / "none"))
    assert "skipped" in run(argparse.Namespace(quick=True))

"""Resuming after a kill: the training logs lose the rows written after the checkpoint and
the rows a kill cut short, whatever field the cut fell in."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.training.train_log import append_csv, truncate_csv

HEADER = "step,loss,minutes\n"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            HEADER + "5,2.5,0.1\n10,2.4,0.2\n15,2.3,0.3\n",
            HEADER + "5,2.5,0.1\n10,2.4,0.2\n",
        ),  # after the checkpoint
        (HEADER + "5,2.5,0.1\n10,2.4,0.2\n1", HEADER + "5,2.5,0.1\n10,2.4,0.2\n"),  # cut in the step
        (HEADER + "5,2.5,0.1\n10,2.4,0.2", HEADER + "5,2.5,0.1\n"),  # cut in the last value
        (HEADER + "5,2.5,0.1\n7,2.4\n", HEADER + "5,2.5,0.1\n"),  # too few fields
        (HEADER + "5,2.5,0.1\n10,2.4,0.2\n", HEADER + "5,2.5,0.1\n10,2.4,0.2\n"),  # nothing to drop
    ],
)
def test_rows_after_the_checkpoint_or_cut_short_are_dropped(tmp_path: Path, text: str, kept: str) -> None:
    path = tmp_path / "train_log.csv"
    path.write_text(text, encoding="utf-8")
    truncate_csv(path, step=10)
    assert path.read_text(encoding="utf-8").replace("\r\n", "\n") == kept
    append_csv(path, {"step": 15, "loss": 2.2, "minutes": 0.4})  # the resumed run writes on
    assert path.read_text(encoding="utf-8").replace("\r\n", "\n") == kept + "15,2.2,0.4\n"


def test_a_log_with_no_row_left_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "train_log.csv"
    path.write_text(HEADER + "20,2.5,0.1\n", encoding="utf-8")
    truncate_csv(path, step=10)
    assert not path.exists()

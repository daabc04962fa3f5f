"""The blind comparison kit: a sheet without names, its key kept apart, and the verdict."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from data.paths import default_model_dir
from model.export.engines import torch_decoder
from model.release.blind import main, p_value, sign_test, wilson

UPPERS = ["春风得意马蹄疾", "海阔凭鱼跃", "书山有路勤为径", "一帆风顺", "明月松间照", "花开富贵"]
HUMAN = ["秋月扬辉桂子香", "天高任鸟飞", "学海无涯苦作舟", "万事如意", "清泉石上流", "竹报平安"]
OTHER = ["夏雨滋润稻花香", "山高任鸟飞", "学海无边乐作舟", "四季平安", "清泉石上流", "竹报春安"]


def write_lines(tmp_path: Path) -> Path:
    lines = tmp_path / "lines.tsv"
    groups = ["wb14123", "classical"] * 3
    lines.write_text(
        "".join(f"{u}\t{h}\t{g}\n" for u, h, g in zip(UPPERS, HUMAN, groups, strict=True)), encoding="utf-8"
    )
    return lines


def write_other(tmp_path: Path) -> Path:
    other = tmp_path / "other.tsv"
    other.write_text("".join(f"{u}\t{o}\n" for u, o in zip(UPPERS, OTHER, strict=True)), encoding="utf-8")
    return other


def read_sheet(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.reader(fh, delimiter="\t"))


def make(tmp_path: Path, seed: int = 3) -> tuple[Path, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "sheet"
    argv = ["sheet", "--lines", str(write_lines(tmp_path)), "--out", str(out), "--seed", str(seed)]
    assert main([*argv, "--system", "human=human", "--system", f"other=file:{write_other(tmp_path)}"]) == 0
    return out, tmp_path / "sheet.key.json"


def fill(sheet: Path, judge: dict[str, tuple[str, str]]) -> Path:
    """Fill every row: ``judge`` maps a lower line to (verdict if it is A, its score)."""
    rows = read_sheet(sheet / "sheet.tsv")
    for row in rows[1:]:
        a, b = row[2], row[3]
        better = "A" if judge[a][0] == "win" else "B" if judge[b][0] == "win" else "tie"
        row[4:7] = [better, judge[a][1], judge[b][1]]
    filled = sheet / "filled.tsv"
    with filled.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, delimiter="\t", lineterminator="\n").writerows(rows)
    return filled


def test_sheet_hides_the_systems_and_keeps_the_key_apart(tmp_path: Path) -> None:
    out, key_path = make(tmp_path)
    assert sorted(p.name for p in out.iterdir()) == ["RUBRIC.md", "sheet.tsv"]
    text = (out / "sheet.tsv").read_text(encoding="utf-8")
    assert "human" not in text and "other" not in text
    rows = read_sheet(out / "sheet.tsv")
    assert rows[0] == ["id", "上联", "A", "B", "better", "score_A", "score_B"]
    assert sorted(r[1] for r in rows[1:]) == sorted(UPPERS)
    for row in rows[1:]:
        i = UPPERS.index(row[1])
        assert {row[2], row[3]} == {HUMAN[i], OTHER[i]} and row[4:] == ["", "", ""]
    key = json.loads(key_path.read_text(encoding="utf-8"))
    assert key["systems"] == ["human", "other"]
    a_sides = [k["A"] for k in key["rows"]]
    assert {"human", "other"} == set(a_sides)  # the order is drawn per row (seed 3: both occur)
    assert "`0` = not acceptable" in (out / "RUBRIC.md").read_text(encoding="utf-8")


def test_the_order_depends_on_the_seed(tmp_path: Path) -> None:
    first = read_sheet(make(tmp_path / "a", seed=1)[0] / "sheet.tsv")
    again = read_sheet(make(tmp_path / "b", seed=1)[0] / "sheet.tsv")
    other = read_sheet(make(tmp_path / "c", seed=2)[0] / "sheet.tsv")
    assert first == again and first != other


def test_unblind_counts_wins_ties_and_scores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, key = make(tmp_path)
    # the human line wins everywhere except 清泉石上流, where both systems wrote it (a tie)
    judge = {h: ("win", "2") for h in HUMAN} | {o: ("lose", "1") for o in OTHER}
    judge["清泉石上流"] = ("tie", "2")
    verdict = tmp_path / "verdict.json"
    assert main(["unblind", "--sheet", str(fill(out, judge)), "--key", str(key), "--out", str(verdict)]) == 0
    result = json.loads(verdict.read_text(encoding="utf-8"))
    whole = result["all"]
    assert (whole["wins"], whole["ties"], whole["losses"]) == (5, 1, 0)
    assert whole["win_share_of_decided"] == 1.0 and whole["sign_test_p"] == round(2 / 2**5, 5)
    assert whole["scores"]["human"]["good"] == 1.0
    assert whole["scores"]["other"]["good"] == round(1 / 6, 4)
    assert whole["scores"]["other"]["mean"] == round(7 / 6, 4)
    low, high = whole["scores"]["other"]["good_ci95"]
    assert 0.0 <= low <= 1 / 6 <= high <= 0.5
    groups = result["groups"]
    assert set(groups) == {"wb14123", "classical"}
    assert groups["wb14123"]["ties"] == 1 and groups["classical"]["wins"] == 3
    printed = capsys.readouterr().out
    assert "| wb14123 | 3 | 2 / 1 / 0 |" in printed and "| all | 6 | 5 / 1 / 0 |" in printed
    assert verdict.with_suffix(".md").read_text(encoding="utf-8") in printed


def test_unfilled_or_wrong_rows_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, key = make(tmp_path)
    sheet = out / "sheet.tsv"
    assert main(["unblind", "--sheet", str(sheet), "--key", str(key)]) == 2
    assert "better must be A, B or tie" in capsys.readouterr().err
    rows = read_sheet(sheet)
    for row in rows[1:]:
        row[4:7] = ["A", "2", "1"]
    rows[3][5] = "3"
    with sheet.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, delimiter="\t", lineterminator="\n").writerows(rows[:-1])
    assert main(["unblind", "--sheet", str(sheet), "--key", str(key)]) == 2
    err = capsys.readouterr().err
    assert f"row 4 (id {rows[3][0]})" in err and "Traceback" not in err
    rows[3][5] = "1"
    with sheet.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, delimiter="\t", lineterminator="\n").writerows(rows[:-1])
    assert main(["unblind", "--sheet", str(sheet), "--key", str(key)]) == 2
    assert f"1 rows of the key are not judged (ids {rows[-1][0]})" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--system", "a=human"], "exactly two"),
        (["--system", "a=human", "--system", "a=human"], "different names"),
        (["--system", "a=human", "--system", "b"], "NAME=SPEC"),
        (["--system", "a=human", "--system", "b=/nonexistent/bundle"], "no bundle or checkpoint"),
        (["--system", "a=human", "--system", "b=file:/nonexistent.tsv"], "cannot be read"),
    ],
)
def test_sheet_bad_input_is_a_message(
    tmp_path: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sheet", "--lines", str(write_lines(tmp_path)), "--out", str(tmp_path / "s"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_key_inside_the_sheet_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s"
    argv = ["sheet", "--lines", str(write_lines(tmp_path)), "--out", str(out), "--key", str(out / "k.json")]
    assert main([*argv, "--system", "a=human", "--system", f"b=file:{write_other(tmp_path)}"]) == 2
    assert "must not be inside" in capsys.readouterr().err
    short = tmp_path / "short.tsv"
    short.write_text(f"{UPPERS[0]}\t{OTHER[0]}\n", encoding="utf-8")
    argv[-2:] = ["--key", str(tmp_path / "k.json")]
    assert main([*argv, "--system", "a=human", "--system", f"b=file:{short}"]) == 2
    assert "1 lines for 6 upper lines" in capsys.readouterr().err


@pytest.mark.slow
def test_the_shipped_model_as_a_system(tmp_path: Path) -> None:
    out = tmp_path / "s"
    argv = ["sheet", "--lines", str(write_lines(tmp_path)), "--out", str(out), "--limit", "2"]
    assert main([*argv, "--system", f"model={default_model_dir()}", "--system", "human=human"]) == 0
    rows = read_sheet(out / "sheet.tsv")[1:]
    assert len(rows) == 2
    for row in rows:
        model_line = ({row[2], row[3]} - set(HUMAN)).pop()
        assert len(model_line) == len(row[1]) and not set(model_line) & set(row[1])


def test_interval_and_sign_test() -> None:
    low, high = wilson(5, 10)
    assert round(low, 4) == 0.2366 and round(high, 4) == 0.7634
    assert wilson(0, 0) == (0.0, 1.0)
    assert sign_test(0, 10) == 2 / 1024 and sign_test(5, 10) == 1.0 and sign_test(0, 0) == 1.0
    assert p_value(sign_test(0, 20)) == "< 0.001" and p_value(0.0625) == "0.0625"


@pytest.mark.slow
def test_a_reverse_sheet_gives_lower_lines_and_asks_about_upper_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], vocab
) -> None:
    """--reverse (下联求上联): the lines given are lower lines, the candidates upper lines; the sheet,
    its rubric and the verdict say so; a bundle decodes with its reverse model."""
    from model.release.export import export_bundle
    from tests.model.decoding.fixtures import reverse_of, tiny_model

    pairs = list(zip(UPPERS, HUMAN, strict=True))
    assert all(ch in vocab for p in pairs for ch in "".join(p))  # the model tests' vocabulary
    model = tiny_model(vocab, seed=1)  # the bundle tests' model (tests/model/store/test_checkpoint_bundle.py)
    bundle = export_bundle(tmp_path / "b", model, vocab, train_pairs=pairs, reverse=reverse_of(model))
    plain = export_bundle(tmp_path / "p", model, vocab, train_pairs=pairs)
    lines = tmp_path / "lower.tsv"
    lines.write_text("".join(f"{lo}\t{u}\n" for u, lo in pairs), encoding="utf-8")  # lower, then upper
    out = tmp_path / "sheet"
    argv = ["sheet", "--reverse", "--lines", str(lines), "--out", str(out), "--seed", "1"]
    assert main([*argv, "--system", f"model={bundle}", "--system", "human=human"]) == 0
    rows = read_sheet(out / "sheet.tsv")
    assert rows[0][:4] == ["id", "下联", "A", "B"]
    for row in rows[1:]:
        assert row[1] in HUMAN and {row[2], row[3]} & set(UPPERS)
        written = row[3] if row[2] in UPPERS else row[2]  # the model's upper line
        assert len(written) == len(row[1]) and not set(written) & set(row[1])
    rubric_text = (out / "RUBRIC.md").read_text(encoding="utf-8")
    assert "gives a lower line (下联) and two candidate upper lines (上联)" in rubric_text
    key = tmp_path / "sheet.key.json"
    assert json.loads(key.read_text(encoding="utf-8"))["direction"] == "lower_to_upper"
    judge = {u: ("win", "2") for u in UPPERS}
    for row in rows[1:]:
        judge.update({line: ("lose", "0") for line in (row[2], row[3]) if line not in UPPERS})
    assert main(["unblind", "--sheet", str(fill(out, judge)), "--key", str(key)]) == 0
    assert "| all | 6 |" in capsys.readouterr().out
    refused = ["sheet", "--reverse", "--lines", str(lines), "--out", str(tmp_path / "x")]
    assert main([*refused, "--system", f"model={plain}", "--system", "human=human"]) == 2
    assert "has no reverse model" in capsys.readouterr().err


@pytest.mark.slow
def test_a_model_with_registers_writes_each_group_in_its_register(tmp_path: Path, pairs) -> None:
    """The formal lines in the formal register, the classical ones in the classical one, the rest
    (here wb14123) in the general one: each line as the decoder writes it in that register."""
    from data.paths import graph_cache_dir
    from model.decoding.options import SERVE_INT8, SERVE_RUNTIME, DecodeOptions
    from model.net.checkpoint import save
    from model.release.blind import Line, by_register, decoded
    from tests.model.decoding.fixtures import decode_vocab
    from tests.model.decoding.test_registers_served import registered

    (tmp_path / "vocab").mkdir()
    vocab = decode_vocab(tmp_path / "vocab", pairs)
    model = registered(vocab)
    path = save(tmp_path / "registers.pt", model, vocab)
    groups = ["formal", "wb14123", "classical", "formal"]
    lines = [Line(u, h, g) for u, h, g in zip(UPPERS, HUMAN, groups, strict=False)]
    assert by_register(lines, 3) == {"formal": [0, 3], "general": [1], "classical": [2]}
    assert by_register(lines, 0) == {"general": [0, 1, 2, 3]}
    got = decoded(path, lines)
    decoder = torch_decoder(
        model, vocab, int8=SERVE_INT8, runtime=SERVE_RUNTIME, graph_cache=graph_cache_dir()
    )
    for line, text in zip(lines, got, strict=True):
        register = line.group if line.group != "wb14123" else "general"
        want = decoder.generate(line.upper, DecodeOptions(register=register)).candidates
        assert text == (want[0].text if want else "")
    # the registers matter here: in the general register some formal line comes out otherwise
    plain = [decoder.generate(lines[i].upper, DecodeOptions()).candidates for i in (0, 2, 3)]
    assert [c[0].text if c else "" for c in plain] != [got[0], got[2], got[3]]

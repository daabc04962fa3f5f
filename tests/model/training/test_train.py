from __future__ import annotations

import csv
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from model.export.models import models_of
from model.net.batch import Batch, collate
from model.net.checkpoint import build_model, load_checkpoint, load_model, save_checkpoint
from model.net.transformer import ModelConfig
from model.store.bundle import load_bundle
from model.train import main
from model.training.batches import bucket_batches
from model.training.config import TrainConfig
from model.training.greedy import greedy
from model.training.losses import distill_loss, seq2seq_loss
from model.training.precision import bf16_matmul_speedup, use_bf16
from model.training.trainer import lr_factor

ROOT = Path(__file__).resolve().parents[3]
FAST = ["--set", "amp=off", "--set", "threads=1"]


def cli(data: Path, out: Path, steps: int, *extra: str, chain: bool = False) -> list[str]:
    args = ["--preset", "tiny", "--data-dir", str(data), "--out", str(out), "--max-steps", str(steps), *FAST]
    return [*args, *extra] if chain else [*args, "--no-eval", "--no-export", *extra]


def run_module(args: list[str], module: str = "model.train", **kw: object) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT, env=env, **kw)  # type: ignore[call-overload]


def test_lr_warms_up_then_decays() -> None:
    cfg = TrainConfig(warmup_steps=10, min_lr_ratio=0.1)
    assert lr_factor(cfg, 0, 0.0) == pytest.approx(0.1)
    assert lr_factor(cfg, 9, 0.0) == pytest.approx(1.0)
    assert lr_factor(cfg, 50, 0.5) == pytest.approx(0.55)
    assert lr_factor(cfg, 99, 1.0) == pytest.approx(0.1)


@pytest.mark.slow
def test_amp_auto_decides_the_same_way_every_time() -> None:
    # One timing of a few milliseconds once said bf16 was slower on a CPU where it is twice as
    # fast; the decision must not depend on a stall of the shared machine.
    cpu = torch.device("cpu")
    ratios = [bf16_matmul_speedup() for _ in range(10)]
    assert len({r > 1.0 for r in ratios}) == 1, ratios
    assert use_bf16("auto", cpu) == (ratios[0] > 1.0)
    assert use_bf16("bf16", cpu) and not use_bf16("off", cpu)
    with pytest.raises(ValueError, match="amp must be"):
        use_bf16("fp8", cpu)


def test_bucket_batches_deterministic_and_within_budget() -> None:
    lengths = [5 + (i * 7) % 20 for i in range(500)]
    a = bucket_batches(lengths, 200, seed=1, epoch=0)
    assert a == bucket_batches(lengths, 200, seed=1, epoch=0)
    assert a != bucket_batches(lengths, 200, seed=1, epoch=1)
    assert sorted(i for b in a for i in b) == list(range(500))
    assert all(len(b) == 1 or max(lengths[i] for i in b) * 2 * len(b) <= 200 for b in a)


@pytest.mark.slow
def test_tiny_model_memorises_50_pairs_and_exports_a_bundle(
    tmp_path: Path, data_folder: Path, pairs, capsys: pytest.CaptureFixture[str]
) -> None:
    args = cli(
        data_folder, tmp_path, 300, "--set", "model.dropout=0", "--set", "label_smoothing=0", chain=True
    )
    assert main([*args, "--set", "eval_every=100", "--set", "lr=0.003", "--eval-limit", "20"]) == 0
    printed = capsys.readouterr().out
    model, vocab, _ = load_model(tmp_path / "best.pt")
    outputs = greedy(model, vocab, [u for u, _ in pairs])
    assert outputs == [lo for _, lo in pairs]
    assert (tmp_path / "plot.png").stat().st_size > 0
    assert "valid_bleu" in (tmp_path / "valid_log.csv").read_text()
    bundle = load_bundle(tmp_path / "bundle")
    models = models_of(bundle)
    assert bundle.in_training_data(pairs[3][0]) and not bundle.in_training_data("无此上联")
    # the preset's reverse run: the same pairs swapped, from the model's weights, its embeddings kept
    assert "reverse model: training the lower_to_upper direction" in printed
    assert models.reverse is not None and models.reverse.cfg.direction == "lower_to_upper"
    assert torch.equal(models.reverse.embed.weight, models.model.embed.weight)
    reverse, _, meta = load_model(tmp_path / "reverse" / "best.pt")
    assert meta["step"] <= 60 and reverse.cfg.reverse
    moved = [k for k, v in reverse.state_dict().items() if not torch.equal(v, model.state_dict()[k])]
    assert moved and not any("embed" in k for k in moved)
    assert "## Reverse model (下联求上联)" in bundle.model_card
    assert bundle.eval["full"]["pairs"] == 20 and bundle.eval["full"]["bleu1"] > 50
    assert bundle.eval["full"]["perplexity"] < 2.0
    assert "| BLEU-1 |" in bundle.model_card and "## Goals" in bundle.model_card
    # make train ends with its headline figures and where its outputs are, the last lines printed
    full, leakfree = bundle.eval["full"], bundle.eval["leakfree"]
    bleu = " / ".join(f"{full[f'bleu{n}']} ± {full[f'bleu{n}_ci95']}" for n in (1, 2, 4))
    size = sum(p.stat().st_size for p in (tmp_path / "bundle").iterdir()) / 1e6
    assert printed.rstrip("\n").split("\n")[-7:] == [
        "== make train: preset tiny done ==",
        f"test set, full (20 pairs): perplexity {full['perplexity']}, BLEU-1/2/4 {bleu}",
        f"test set, leak-free ({leakfree['pairs']} pairs): perplexity {leakfree['perplexity']}, "
        f"BLEU-1/2/4 {leakfree['bleu1']} ± {leakfree['bleu1_ci95']} / {leakfree['bleu2']} ± "
        f"{leakfree['bleu2_ci95']} / {leakfree['bleu4']} ± {leakfree['bleu4_ci95']}",
        "(± is half the width of BLEU's 95% bootstrap interval)",
        f"bundle: {tmp_path / 'bundle'} ({size:.1f} MB)",
        f"card:   {tmp_path / 'bundle' / 'MODEL_CARD.md'}",
        f"plot:   {tmp_path / 'plot.png'}",
    ], printed


def final_state(out: Path) -> dict[str, torch.Tensor]:
    last = sorted((out / "checkpoints").glob("step-*.pt"))[-1]
    return load_checkpoint(last)["state_dict"]


@pytest.mark.slow
def test_resume_after_sigkill_matches_uninterrupted_run(tmp_path: Path, data_folder: Path) -> None:
    steps, opts = 40, ["--set", "save_every=10", "--set", "eval_every=20", "--set", "batch_tokens=300"]
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    assert run_module(cli(data_folder, ref, steps, *opts)).wait(timeout=300) == 0
    proc = run_module(cli(data_folder, killed, steps, *opts))
    deadline = time.time() + 240
    while not list((killed / "checkpoints").glob("step-0000002*.pt")) and proc.poll() is None:
        assert time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "checkpoints" / f"step-{steps:08d}.pt").exists(), "killed too late to test resuming"
    assert run_module(cli(data_folder, killed, steps, *opts), stdout=subprocess.PIPE).wait(timeout=300) == 0
    a, b = final_state(ref), final_state(killed)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def log_steps(path: Path) -> list[int]:
    with open(path, newline="", encoding="utf-8") as f:
        return [int(row["step"]) for row in csv.DictReader(f)]


def damage(path: Path, how: str) -> None:
    """4 KiB of random bytes written into the middle of ``path``, or its second half cut off."""
    data = path.read_bytes()
    middle = len(data) // 2
    if how == "random bytes":
        path.write_bytes(data[:middle] + random.Random(25).randbytes(4096) + data[middle + 4096 :])
    else:
        path.write_bytes(data[:middle])


@pytest.mark.slow
@pytest.mark.parametrize("how", ["random bytes", "truncated"])
def test_a_damaged_newest_checkpoint_is_named_and_skipped_and_resuming_falls_back(
    tmp_path: Path, data_folder: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """The run resumes from the newest good checkpoint and, the batch order being fixed, ends
    with the very weights the damaged checkpoint held; the logs keep no row twice."""
    out = tmp_path / "run"
    opts = [
        "--set",
        "save_every=10",
        "--set",
        "keep_last=3",
        "--set",
        "eval_every=10",
        "--set",
        "log_every=5",
    ]
    args = cli(data_folder, out, 30, *opts, "--set", "batch_tokens=300")
    assert main(args) == 0
    newest = out / "checkpoints" / "step-00000030.pt"
    before = load_checkpoint(newest)["state_dict"]
    damage(newest, how)
    capsys.readouterr()
    assert main(args) == 0
    captured = capsys.readouterr()
    skipped = [line for line in captured.err.splitlines() if "skipping checkpoint" in line]
    assert len(skipped) == 1 and str(newest) in skipped[0], captured.err
    assert "resumed from step 20" in captured.out
    assert (out / "checkpoints" / "step-00000030.pt.corrupt").exists()
    after = load_checkpoint(newest)["state_dict"]
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert log_steps(out / "train_log.csv") == [5, 10, 15, 20, 25, 30]
    assert log_steps(out / "valid_log.csv") == [10, 20, 30]


def test_a_nan_loss_stops_training_with_a_message_and_saves_nothing(
    tmp_path: Path, data_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Weights gone NaN (here written into the newest checkpoint, with a valid sum) give a NaN
    loss at the first step: the run stops, exit status 1, and saves or logs nothing after it."""
    out = tmp_path / "run"
    opts = ["--set", "save_every=2", "--set", "log_every=1", "--set", "eval_every=1000"]
    assert main(cli(data_folder, out, 4, *opts)) == 0
    newest = out / "checkpoints" / "step-00000004.pt"
    ckpt = load_checkpoint(newest)
    weights = ckpt["state_dict"]["embed.weight"]
    weights[5] = float("nan")
    save_checkpoint(ckpt, newest)
    capsys.readouterr()
    assert main(cli(data_folder, out, 8, *opts)) == 1
    err = capsys.readouterr().err
    assert "error: training diverged: the loss or gradient norm became NaN or infinite after step 4" in err
    assert "Traceback" not in err
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-00000002.pt", "step-00000004.pt"]
    assert log_steps(out / "train_log.csv") == [1, 2, 3, 4]


@pytest.mark.slow
def test_a_run_killed_before_its_first_checkpoint_writes_its_log_rows_once(
    tmp_path: Path, data_folder: Path
) -> None:
    out = tmp_path / "run"
    opts = ["--set", "save_every=100000", "--set", "eval_every=3", "--set", "log_every=2"]
    proc = run_module(cli(data_folder, out, 100_000, *opts), stdout=subprocess.DEVNULL)
    deadline = time.time() + 240
    while (
        not (out / "train_log.csv").exists() or len((out / "train_log.csv").read_text().splitlines()) < 5
    ) and proc.poll() is None:
        assert time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not list(out.glob("checkpoints/step-*.pt")), "killed too late: a checkpoint was written"
    assert len(log_steps(out / "train_log.csv")) >= 4 and log_steps(out / "valid_log.csv")
    assert main(cli(data_folder, out, 10, *opts)) == 0
    assert log_steps(out / "train_log.csv") == [2, 4, 6, 8, 10]
    assert log_steps(out / "valid_log.csv") == [3, 6, 9, 10]


@pytest.mark.slow
def test_ctrl_c_saves_the_step_it_stopped_at_and_the_same_command_resumes(
    tmp_path: Path, data_folder: Path
) -> None:
    """SIGINT (Ctrl-C; ``timeout -s INT`` on a lent GPU machine) lets the step finish, then
    validates and saves, so nothing since the last periodic checkpoint is lost."""
    steps, opts = (
        100_000,
        ["--set", "save_every=100000", "--set", "eval_every=100000", "--set", "log_every=5"],
    )
    out = tmp_path / "run"
    proc = run_module(cli(data_folder, out, steps, *opts), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while (
        not (out / "train_log.csv").exists() or len((out / "train_log.csv").read_text().splitlines()) < 3
    ) and (proc.poll() is None):
        assert time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr.decode()[-2000:]
    assert "run the same command again to resume" in stderr.decode()
    assert "stopped: interrupted at step" in stdout.decode()
    saved = load_checkpoint(sorted((out / "checkpoints").glob("step-*.pt"))[-1])
    assert 10 <= saved["step"] < steps and saved["trainer"]["stop_reason"] == "interrupted"
    assert (out / "config.json").exists() and (out / "plot.png").exists()
    assert "valid_loss" in (out / "valid_log.csv").read_text()  # validated before saving
    resumed = run_module(cli(data_folder, out, saved["step"] + 5, *opts), stdout=subprocess.PIPE)
    assert resumed.wait(timeout=300) == 0
    assert load_checkpoint(sorted((out / "checkpoints").glob("step-*.pt"))[-1])["step"] == saved["step"] + 5


@pytest.mark.slow
def test_a_changed_schedule_starts_a_new_stretch_for_early_stopping(
    tmp_path: Path, data_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Resumed with the same options a run keeps its early-stopping count; resumed with a new
    learning rate (a warm restart) it counts afresh, so the restart's first evaluations,
    worse than the best before it, do not stop it at once."""
    out = tmp_path / "run"
    first = cli(data_folder, out, 6, "--set", "eval_every=2", "--set", "patience=3")
    assert main(first) == 0
    newest = sorted((out / "checkpoints").glob("step-*.pt"))[-1]
    ckpt = load_checkpoint(newest)
    ckpt["trainer"]["bad_evals"] = 2  # one more bad evaluation would stop it
    save_checkpoint(ckpt, newest)  # sealed again: a changed payload needs its new sum
    capsys.readouterr()
    assert main(first) == 0  # the same options: nothing left to train, nothing changed
    assert "new stretch" not in capsys.readouterr().out
    assert (
        main(cli(data_folder, out, 10, "--set", "eval_every=2", "--set", "patience=3", "--set", "lr=2e-3"))
        == 0
    )
    text = capsys.readouterr().out
    assert "a new stretch (lr 0.003 -> 0.002, max_steps 6 -> 10)" in text, text
    last = load_checkpoint(sorted((out / "checkpoints").glob("step-*.pt"))[-1])
    assert last["step"] == 10 and last["trainer"]["bad_evals"] <= 2  # counted from 0, two evaluations


def test_a_fresh_run_starts_from_another_models_matching_weights(
    tmp_path: Path, data_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--init-from``: a one-decoder-layer model takes a two-layer model's embeddings, encoder
    and first decoder layer; its second layer has nothing to take."""
    deep = tmp_path / "deep"
    assert main(cli(data_folder, deep, 4)) == 0
    shallow = tmp_path / "shallow"
    args = cli(data_folder, shallow, 1, "--set", "model.n_dec_layers=1", "--set", "lr=1e-12")
    assert main([*args, "--init-from", str(deep)]) == 0
    assert "tensors copied, 0 new" in capsys.readouterr().out
    teacher, _, _ = load_model(sorted((deep / "checkpoints").glob("step-*.pt"))[-1])
    student, _, _ = load_model(sorted((shallow / "checkpoints").glob("step-*.pt"))[-1])
    theirs = teacher.state_dict()
    ours = student.state_dict()
    assert any(name.startswith("decoder.1.") for name in theirs)
    assert not any(name.startswith("decoder.1.") for name in ours)
    for name, tensor in ours.items():  # one step at a learning rate of 1e-12 changes nothing visible
        assert torch.allclose(tensor, theirs[name], atol=1e-6), name
    assert main([*cli(data_folder, tmp_path / "other", 1), "--init-from", str(tmp_path / "none")]) == 2
    assert "none: no such file or folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main([*cli(data_folder, tmp_path / "other", 1), "--init-from", str(tmp_path / "empty")]) == 2
    assert "no checkpoint in" in capsys.readouterr().err


def _kl_to(teacher: torch.nn.Module, student: torch.nn.Module, batch: Batch) -> float:
    """Mean KL(teacher || student) of the token distributions over the target positions."""
    with torch.no_grad():
        return float(distill_loss(student.eval(), teacher.eval(), batch, 1.0, 0.0))


def test_distillation_loss_mixes_the_references_and_the_teacher(pairs, vocab) -> None:
    batch = collate([(vocab.encode(u), vocab.encode(lo)) for u, lo in pairs[:8]])
    torch.manual_seed(0)
    model = build_model(ModelConfig(vocab_size=len(vocab), d_model=32, n_heads=2, n_enc_layers=1,
                                    n_dec_layers=1, d_ff=64, dropout=0.0))  # fmt: skip
    torch.manual_seed(1)
    other = build_model(model.cfg)
    with torch.no_grad():
        ce = float(seq2seq_loss(model, batch, 0.0))
        assert _kl_to(model, model, batch) == pytest.approx(0.0, abs=1e-6)  # no divergence from itself
        assert float(distill_loss(model, other, batch, 0.0, 0.0)) == pytest.approx(ce, rel=1e-6)
        kl = _kl_to(other, model, batch)
        assert kl > 0
        mixed = float(distill_loss(model, other, batch, 0.25, 0.0))
        assert mixed == pytest.approx(0.75 * ce + 0.25 * kl, rel=1e-5)


@pytest.mark.slow
def test_a_run_with_a_teacher_learns_its_distributions(
    tmp_path: Path, data_folder: Path, pairs, vocab, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--teacher``: a teacher that learnt the lower lines backwards, so that its distributions
    differ from the references; the same student (same seed, same batches) ends much closer to
    them when it learns them than when it learns the pairs alone."""
    backwards = tmp_path / "backwards"
    backwards.mkdir()
    for name in ("train.tsv", "valid.tsv", "test.tsv"):
        (backwards / name).write_text("".join(f"{u}\t{lo[::-1]}\n" for u, lo in pairs), encoding="utf-8")
    for name in ("spm.model", "test_leak.txt"):
        (backwards / name).write_bytes((data_folder / name).read_bytes())
    teacher_dir = tmp_path / "teacher"
    sharp = ("--set", "model.dropout=0", "--set", "label_smoothing=0")
    assert main(cli(backwards, teacher_dir, 150, *sharp)) == 0
    small = ("--set", "model.n_dec_layers=1", "--set", "distill_weight=1.0", "--set", "warmup_steps=5")
    assert main([*cli(data_folder, tmp_path / "taught", 80, *small), "--teacher", str(teacher_dir)]) == 0
    assert "distilling from" in capsys.readouterr().out
    assert main(cli(data_folder, tmp_path / "alone", 80, *small)) == 0

    def last(run: str) -> torch.nn.Module:
        return load_model(sorted((tmp_path / run / "checkpoints").glob("step-*.pt"))[-1])[0]

    teacher = load_model(teacher_dir / "best.pt")[0]
    batch = collate([(vocab.encode(u), vocab.encode(lo)) for u, lo in pairs])
    taught, alone = _kl_to(teacher, last("taught"), batch), _kl_to(teacher, last("alone"), batch)
    assert taught < 0.6 * alone
    tagger = ("--set", "model.kind=tagger", "--set", "model.n_dec_layers=0")
    assert main([*cli(data_folder, tmp_path / "t", 1, *tagger), "--teacher", str(teacher_dir)]) == 2
    assert "cannot teach" in capsys.readouterr().err


@pytest.mark.slow
def test_two_process_ddp_ends_with_identical_weights(tmp_path: Path, data_folder: Path) -> None:
    args = ["--nproc_per_node=2", "-m", "model.train", *cli(data_folder, tmp_path, 15, "--device", "cpu")]
    proc = run_module(["--standalone", *args], module="torch.distributed.run")
    assert proc.wait(timeout=300) == 0
    w0 = torch.load(tmp_path / "final-rank0.pt", weights_only=True)
    w1 = torch.load(tmp_path / "final-rank1.pt", weights_only=True)
    init = load_checkpoint(sorted((tmp_path / "checkpoints").glob("*.pt"))[-1])["state_dict"]
    for k in w0:
        assert torch.equal(w0[k], w1[k]), k
        assert torch.equal(w0[k], init[k]), k
    assert load_checkpoint(sorted((tmp_path / "checkpoints").glob("*.pt"))[-1])["step"] == 15


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "huge"], "unknown preset"),
        (["--preset", "tiny", "--data-dir", "/nonexistent"], "missing data file"),
        (["--preset", "tiny", "--set", "nonsense=1"], "unknown option"),
        (["--preset", "tiny", "--set", "lr"], "key=value"),
        (["--preset", "tiny", "--set", "lr=-1"], "lr must be positive"),
        (["--preset", "tiny", "--set", "lr=abc"], "lr must be of type float"),
        (["--preset", "tiny", "--set", "amp=fp8"], "amp must be auto, bf16 or off"),
        (["--preset", "tiny", "--max-minutes", "-5"], "max_minutes must not be negative"),
        (["--preset", "tiny", "--eval-limit", "-1"], "--eval-limit"),
    ],
)
def test_bad_input_gives_message_and_status_2(args: list[str], message: str, capsys) -> None:
    assert main([*args, "--skip-data"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_file_that_is_not_a_checkpoint_and_a_bad_model_option_are_refused(
    tmp_path: Path, data_folder: Path, capsys
) -> None:
    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint\n")
    for flag in ("--teacher", "--init-from", "--proposer"):
        assert main([*cli(data_folder, tmp_path / flag.strip("-"), 1), flag, str(junk)]) == 2
        err = capsys.readouterr().err
        assert "not a checkpoint" in err and "Traceback" not in err, err
    for option, message in (
        ("model.n_heads=3", "multiple of n_heads"),
        ("model.d_model=abc", "d_model must"),
    ):
        assert main([*cli(data_folder, tmp_path / "m", 1), "--set", option]) == 2
        assert message in capsys.readouterr().err
    assert main(cli(data_folder, junk, 1)) == 2  # --out names a file
    assert "cannot make the run folder" in capsys.readouterr().err
    broken = tmp_path / "data"
    shutil.copytree(data_folder, broken)
    (broken / "spm.model").write_text("not a sentencepiece model\n")
    assert main(cli(broken, tmp_path / "b", 1)) == 2
    assert "not a sentencepiece model" in capsys.readouterr().err

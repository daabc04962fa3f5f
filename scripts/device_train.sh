#!/usr/bin/env bash
# The one command for a lent GPU machine (docs/TRAINING.md, "On a lent GPU machine"):
#
#     bash scripts/device_train.sh          # there, from the repository root; OUT is set by the device tool
#
# Trains the preset's proposer (its "proposer" preset, for its own max_minutes), then the
# preset itself (default gpu) on the carried data folder, all within DEVICE_MINUTES of wall
# time, then leaves in $OUT only what finishing here needs, in files of at most 15 MiB (the
# tool returns at most 8 files of at most 16 MiB): run.tar or run.tar.part-000, -001, ...
# (python -m model.ship pack: fp16 weight-only best checkpoints of both runs, their logs,
# plots and configs, device.json) and device_train.log. Then, here:
# scripts/device_finish.sh <the folder the files came back to>.
#
# The runs train in DEVICE_RUN_DIR, outside $OUT (their checkpoints carry optimizer state,
# ~200 MB each); on a machine still warm from a first call the same command resumes them.
#
# Environment (all optional):
#   DEVICE_PRESET=gpu            the preset to train (model/training/presets/<name>.json)
#   DEVICE_PROPOSER=NAME         train this proposer preset instead of the preset's "proposer"
#                                ("null": none)
#   DEVICE_DATA=.carry/data      the carried data folder (scripts/device_prepare.sh)
#   DEVICE_MINUTES=9             wall-clock budget of start-up, both trainings and their
#                                validations (packing, ~20 s, comes after)
#   DEVICE_OVERHEAD_MINUTES=1.5  of which kept for start-up, data loading, final validations
#   DEVICE_RUN_DIR=/tmp/duilian-device
#   DEVICE_REQUIRE_CUDA=1        stop at once when torch sees no CUDA device
#   DEVICE_PART_MIB=15           largest file written into $OUT
#   DEVICE_TRAIN_ARGS=...        more arguments for python -m model.train (tests: --max-steps 40)
#   PYTHON=python3
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${OUT:?OUT must name the folder whose files come back}"
mkdir -p "$OUT"

main() {
    local py=${PYTHON:-python3} preset=${DEVICE_PRESET:-gpu} proposer=${DEVICE_PROPOSER:-}
    local data=${DEVICE_DATA:-.carry/data} total=${DEVICE_MINUTES:-9}
    local overhead=${DEVICE_OVERHEAD_MINUTES:-1.5} run=${DEVICE_RUN_DIR:-/tmp/duilian-device}
    run=$run/$preset
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
    echo "== device_train: preset $preset, data $data, runs in $run, budget $total min; $(date -u)"

    # 1. the carried data (train.tsv may travel as train.tsv.xz: model.train reads it as is)
    local missing=() f
    for f in valid.tsv test.tsv test_leakfree.tsv test_leak.txt spm.model report.json DATA_CARD.md; do
        [ -f "$data/$f" ] || missing+=("$f")
    done
    [ -f "$data/train.tsv" ] || [ -f "$data/train.tsv.xz" ] || [ -f "$data/train.tsv.gz" ] || missing+=(train.tsv)
    if ((${#missing[@]})); then
        echo "error: $data lacks ${missing[*]}: run scripts/device_prepare.sh here and carry .carry"
        ls -la "$data" 2>&1
        return 2
    fi
    du -sh "$data"

    # 2. the machine, and the budget: the main run gets what the proposer's preset leaves
    local budget
    budget=$("$py" - "$preset" "$proposer" "$total" "$overhead" "${DEVICE_REQUIRE_CUDA:-1}" "$SECONDS" <<'EOF'
import json, sys, time
t0 = time.monotonic()
import torch

preset, proposer, total, overhead, require, seconds = sys.argv[1:]
if sys.version_info < (3, 10):  # X | Y at run time, zip(strict=...): stop now, not after minutes
    sys.exit(f"error: python {sys.version.split()[0]} here; the training code needs 3.10 or newer")
if tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2]) < (2, 3):
    sys.exit(f"error: torch {torch.__version__} here; the training code needs 2.3 or newer (sdpa_kernel)")
ok = torch.cuda.is_available()
name = torch.cuda.get_device_name(0) if ok else "no CUDA device"
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}: {name}", file=sys.stderr)
if require == "1" and not ok:
    sys.exit("error: no CUDA device (DEVICE_REQUIRE_CUDA=0 trains on the CPU)")
spec = json.load(open(f"model/training/presets/{preset}.json", encoding="utf-8"))
name = (None if proposer == "null" else proposer) if proposer else spec.get("proposer")
minutes = 0.0
if name:
    minutes = float(json.load(open(f"model/training/presets/{name}.json"))["train"].get("max_minutes") or 0)
    if not minutes:
        print(f"warning: the proposer preset {name!r} has no max_minutes", file=sys.stderr)
main = float(total) - minutes - float(overhead)
if main < 0.5:
    sys.exit(f"error: {total} min leave {main:.2f} min for the main run after the proposer and overhead")
hard = max(30, int(60 * float(total) - float(seconds) - (time.monotonic() - t0)))  # the budget's rest
print(f"{name or 'none'} {minutes:g} {main:.2f} {hard}")
EOF
) || return 3
    local prop_name prop_min main_min hard
    read -r prop_name prop_min main_min hard <<<"$budget"
    echo "== proposer $prop_name: ${prop_min} min (its preset); main run: ${main_min} min; both stopped after ${hard} s at the latest"

    # 3. train (the proposer first, by the preset's "proposer" key), never past the budget
    local sets=()
    [ -n "$proposer" ] && sets=(--set "proposer=$proposer")
    local stop=(timeout -s INT -k 20 "$hard")  # SIGINT: each run validates and saves, then stops
    command -v timeout >/dev/null || stop=()
    # shellcheck disable=SC2086  # DEVICE_TRAIN_ARGS is a list of words
    ${stop[@]+"${stop[@]}"} "$py" -m model.train --preset "$preset" --skip-data --data-dir "$data" \
        --out "$run" --max-minutes "$main_min" --no-eval --no-export ${sets[@]+"${sets[@]}"} \
        ${DEVICE_TRAIN_ARGS:-}
    local rc=$?
    echo "== training exited with status $rc after $SECONDS s"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then  # the device tool would read these as its own time-out
        echo "== training was stopped by the hard time limit; packing its best checkpoints so far"
        rc=5
    fi

    # 4. pack what finishing needs into files of at most DEVICE_PART_MIB
    "$py" -m model.ship pack "$run" "$OUT" --preset "$preset" --part-mib "${DEVICE_PART_MIB:-15}" \
        --note "train_exit=$rc" --note "budget_minutes=$total" --note "main_minutes=$main_min" \
        --note "proposer_preset=$prop_name"
    local prc=$?
    echo "== $OUT after $SECONDS s:"
    ls -la "$OUT"
    local big n
    big=$(find "$OUT" -type f -size +16777216c)
    n=$(find "$OUT" -type f | wc -l)
    if [ -n "$big" ]; then
        echo "error: over 16 MiB, will not come back: $big"
        prc=4
    fi
    if [ "$n" -gt 8 ]; then
        echo "error: $n files under $OUT; only 8 come back"
        prc=4
    fi
    if [ "$rc" -ne 0 ]; then return "$rc"; fi
    return "$prc"
}

main 2>&1 | tee "$OUT/device_train.log"
exit "${PIPESTATUS[0]}"

#!/usr/bin/env bash
# Run here after the device call (docs/TRAINING.md, "On a lent GPU machine"):
#
#     scripts/device_finish.sh FILES_DIR [--ship] [--eval-limit N] [--into DIR] ...
#
# FILES_DIR is where the run tool put the files from $OUT (its files_at): run.tar or
# run.tar.part-000, -001, ... (joined here; by hand: cat run.tar.part-* > run.tar) and
# device_train.log. Unpacks them into work/device/<time>/run (or --into), evaluates the
# model with its proposer on the test set of the carried data (DEVICE_DATA, default
# .carry/data: the data it trained on), exports the bundle into <run>/bundle, writes its card
# and, with --ship, installs it as models/default. Options: python -m model.ship finish -h.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ $# -lt 1 ]; then
    echo "usage: scripts/device_finish.sh FILES_DIR [--ship] [python -m model.ship finish options]" >&2
    exit 2
fi
files=$1
shift
if [ -f "$files/device_train.log" ]; then
    echo "== the end of $files/device_train.log:"
    tail -n 8 "$files/device_train.log"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec nice -n 5 "${PYTHON:-.venv/bin/python}" -m model.ship finish "$files" \
    --data-dir "${DEVICE_DATA:-.carry/data}" "$@"

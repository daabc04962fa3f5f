#!/usr/bin/env bash
# Run here before the device call (docs/TRAINING.md, "On a lent GPU machine"):
#
#     scripts/device_prepare.sh
#
# runs `make data` (which skips itself when work/data is fresh), copies what the GPU run and
# the finishing step need into .carry/data (ignored by git; sent with the run tool's
# carry: [".carry"]), train.tsv compressed with xz (~46 MB -> ~20 MB; model.train reads
# train.tsv.xz as is), and prints what will travel against the tool's 64 MiB.
#
# Environment (all optional):
#   DEVICE_SOURCE_DATA=work/data  the data stage's folder (when set, `make data` is not run)
#   DEVICE_SKIP_DATA=1            do not run `make data`
#   DEVICE_DATA=.carry/data       the folder to fill
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=${DEVICE_SOURCE_DATA:-work/data}
dest=${DEVICE_DATA:-.carry/data}
plain=(valid.tsv test.tsv test_leakfree.tsv test_leak.txt spm.model report.json DATA_CARD.md)

if [ -z "${DEVICE_SOURCE_DATA:-}" ] && [ "${DEVICE_SKIP_DATA:-0}" != 1 ]; then
    nice -n 5 make data
fi
for f in train.tsv "${plain[@]}"; do
    [ -f "$src/$f" ] || { echo "error: $src/$f is missing; run make data" >&2; exit 2; }
done
mkdir -p "$dest"
if ! git check-ignore -q "$dest" 2>/dev/null && [[ "$dest" != /* ]]; then
    echo "warning: $dest is not ignored by git; it would travel and could be committed" >&2
fi
for f in "${plain[@]}"; do
    cp "$src/$f" "$dest/$f"
done
rm -f "$dest/train.tsv" "$dest/train.tsv.gz"
sum=$(sha256sum "$src/train.tsv" | cut -d' ' -f1)
if [ -f "$dest/train.tsv.xz" ] && [ "$(cat "$dest/train.tsv.sha256" 2>/dev/null)" = "$sum" ]; then
    echo "$dest/train.tsv.xz is up to date"
else
    echo "compressing $src/train.tsv into $dest/train.tsv.xz (a minute or two)"
    if command -v xz >/dev/null; then
        nice -n 5 xz -T0 -6 -c "$src/train.tsv" >"$dest/train.tsv.xz.tmp"
    else
        nice -n 5 "${PYTHON:-.venv/bin/python}" -c 'import lzma, shutil, sys
with open(sys.argv[1], "rb") as f, lzma.open(sys.argv[2], "wb", preset=6) as g:
    shutil.copyfileobj(f, g)' "$src/train.tsv" "$dest/train.tsv.xz.tmp"
    fi
    mv "$dest/train.tsv.xz.tmp" "$dest/train.tsv.xz"
    echo "$sum" >"$dest/train.tsv.sha256"
fi

mib() { awk '{ s += $1 } END { printf "%.1f", s / 1048576 }'; }
carried=$(find "$dest" -type f -printf '%s\n' | mib)
tree=$(git ls-files -z --cached --others --exclude-standard 2>/dev/null | xargs -0 -r stat -c %s 2>/dev/null | mib || true)
echo "carried data: $carried MiB in $dest"
ls -la "$dest"
echo "working tree (tracked and untracked-not-ignored files): $tree MiB"
total=$(awk -v a="$carried" -v b="$tree" 'BEGIN { printf "%.1f", a + b }')
echo "travels with carry: [\".carry\"]: about $total MiB of the 64 MiB allowed"
if awk -v t="$total" 'BEGIN { exit !(t > 63) }'; then
    echo "error: over the device tool's 64 MiB" >&2
    exit 3
fi

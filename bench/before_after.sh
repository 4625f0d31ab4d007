#!/usr/bin/env bash
# Before/after a change, in the same run on this machine: the whole job, the stage chain on one
# core, and dedup with and without --dedup-threshold, each side running its own tree's code
# (`cd TREE && PYTHONPATH=TREE`), alternating. Results go in bench/RESULTS.md as ratios.
#
#     bench/before_after.sh REV [WARC]     # REV: the "before" commit, e.g. main~3
set -euo pipefail
REV=$1
HERE=$(cd "$(dirname "$0")/.." && pwd)
WARC=$(realpath "${2:-$HERE/../shared/data/warc/bench_trafilatura_pages.warc.gz}")
PY=$HERE/.venv/bin/python
WORK=$(mktemp -d)
BEFORE=$WORK/before
git -C "$HERE" worktree add -q --detach "$BEFORE" "$REV"
trap 'git -C "$HERE" worktree remove --force "$BEFORE"; rm -rf "$WORK"' EXIT

seconds() { python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$@"; }
tree_of() { if [ "$1" = before ]; then echo "$BEFORE"; else echo "$HERE"; fi; }

for rep in 1 2; do
  for side in before after; do
    tree=$(tree_of $side)
    start=$(date +%s.%N)
    (cd "$tree" && PYTHONPATH="$tree" "$PY" -m pipeline.cli run --input "$WARC" --output "$WORK/out-$side" \
      --overwrite --quiet > /dev/null 2>&1)
    echo "job $side rep$rep: $(seconds "$start" "$(date +%s.%N)") s"
  done
done
for rep in 1 2; do
  for side in before after; do
    tree=$(tree_of $side)
    script=bench/vs_datatrove.py
    [ -e "$tree/$script" ] || script=bench/pipeline.py  # its name before issue 20
    echo "stages $side rep$rep: $(cd "$tree" && PYTHONPATH="$tree" taskset -c 0 "$PY" $script --side ours \
      --warc "$WARC" 2> /dev/null | tail -1)"
  done
done
for side in before after; do
  for threshold in "" 0.8; do
    tree=$(tree_of $side)
    echo "dedup $side: $(cd "$WORK" && PYTHONPATH="$tree" "$PY" "$HERE/bench/dedup_scale.py" --one 2000 $threshold \
      2> /dev/null | tail -1)"
  done
done

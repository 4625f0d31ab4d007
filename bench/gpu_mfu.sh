#!/usr/bin/env bash
# Issue 19's GPU check: MFU of the gpt2-size model (124 M) trained from token shards in bf16 on one GPU.
# Prepared for the device machine (its image's python3 has torch; training/ needs only torch, numpy, pyarrow,
# pyyaml and tokenizers, which it has). Make the token shards here first and carry them:
#   .venv/bin/refinery tokenize --data out/demo --out out/demo-tok        (then carry: ["out/demo-tok"])
#   bash bench/gpu_mfu.sh out/demo-tok                                    (on the device; ~2-3 minutes)
# Prints the run's summary line (tokens/s, TFLOP/s, MFU against the H200's 989 dense bf16 TFLOP/s) and copies
# summary.json to $OUT. SIZE/DEVICE/PRECISION/STEPS/MICRO override, for a CPU smoke run of this script:
#   SIZE=tiny DEVICE=cpu PRECISION=fp32 STEPS=3 MICRO=2 OUT=/tmp bash bench/gpu_mfu.sh out/demo-tok
set -euo pipefail
TOK=${1:-out/demo-tok}
OUT=${OUT:-/tmp}
PY=${PY:-python3}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || true
"$PY" -m training.train --tokens "$TOK" --out "$OUT/gpt2-bf16" --overwrite --size "${SIZE:-gpt2}" --seq-len 1024 \
    --micro-batch "${MICRO:-16}" --precision "${PRECISION:-bf16}" --device "${DEVICE:-cuda}" --steps "${STEPS:-60}" \
    --warmup 5 --log-every 10 --eval-every 0 --checkpoint-every 100000 --keep-checkpoints 1 --no-tensorboard
cp "$OUT/gpt2-bf16/summary.json" "$OUT/summary.json"
"$PY" - "$OUT/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
mfu = f"{s['mfu']:.1%}" if s["mfu"] is not None else "n/a (peak unknown)"
print(f"{s['parameters']:,} parameters, {s['precision']}, {s['device']}: {s['tokens_per_s']:,.0f} tokens/s, "
      f"{s['achieved_tflops']:.1f} TFLOP/s, MFU {mfu}")
PY

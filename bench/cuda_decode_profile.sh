#!/usr/bin/env bash
# Where a CUDA decode step's time goes (issue 14): every kernel of a few decode steps timed by
# Nsight Compute (`ncu`, graphs off so that each launch is its own), summed per kernel name and
# divided by the number of steps, beside the step's time with and without CUDA graphs.
#
#   bench/cuda_decode_profile.sh CHANNEL_BIN OUT_DIR [LAYERS] [TYPE] [DEPTH]
#
# The model is the Gemma-3-12B shape (hidden 3840, 16 heads, 8 KV heads of 256, FFN 15360,
# window 1024, vocab 262144) with LAYERS layers (default 8: every layer launches the same
# kernels, so a few show the mix without writing 13 GB) in TYPE (default q8_0), made in OUT_DIR
# unless it is there. DEPTH (default 128) tokens are in the context before the timed steps.
# Writes OUT_DIR/ncu.csv (raw), OUT_DIR/profile.md (the table) and the bench JSON lines.
set -euo pipefail
ch=$(realpath "$1")
out=$2
layers=${3:-8}
type=${4:-q8_0}
depth=${5:-128}
mkdir -p "$out"
out=$(realpath "$out")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/cuda_profile_common.sh"
model=$(cuda_profile_model "$ch" "$out" "$layers" "$type") || exit 1

echo "== decode with and without graphs (tg128 at depth $depth) =="
"$ch" bench -m "$model" --device cuda -p 0 -n 128 -d "$depth" -r 3 | tee "$out/bench-graphs.jsonl"
"$ch" bench -m "$model" --device cuda -p 0 -n 128 -d "$depth" -r 3 --no-cuda-graphs |
  tee "$out/bench-no-graphs.jsonl"

ncu=$(cuda_profile_ncu) || exit 2
steps=8
echo "== ncu: every kernel of the run (tg$steps, graphs off) =="
# --clock-control none: the clocks stay as the benchmark saw them.
"$ncu" --clock-control none --metrics gpu__time_duration.sum --csv \
  "$ch" bench -m "$model" --device cuda -p 0 -n "$steps" -d "$depth" -r 1 --no-cuda-graphs \
  >"$out/ncu.csv" 2>"$out/ncu.log" || { tail -5 "$out/ncu.log" >&2; exit 1; }

PYTHONPATH=$here python3 - "$out/ncu.csv" "$layers" "$type" "$depth" >"$out/profile.md" <<'EOF'
import collections, sys
from ncu_times import kernel_times
path, layers, typ, depth = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
seq = kernel_times(path)  # (kernel, microseconds, grid) in launch order
# A decode step starts with the token's embedding; the last 4 steps (past the warm-up and the
# depth's prompt fill) are averaged.
starts = [i for i, (n, _, _) in enumerate(seq) if n == "embed_kernel"][-4:]
total, count = collections.defaultdict(float), collections.Counter()
for a, b in zip(starts, starts[1:] + [len(seq)]):
    for n, v, _ in seq[a:b]:
        total[n] += v
        count[n] += 1
steps = max(len(starts), 1)
all_us = sum(total.values())
print(f"Gemma-3-12B shape, {layers} layers, {typ}, depth {depth}: the last {steps} decode steps "
      f"of a tg run under ncu (graphs off, caches flushed between kernels)\n")
print("| kernel | launches / step | us / step | share |")
print("|---|---|---|---|")
for n in sorted(total, key=lambda n: -total[n]):
    print(f"| {n} | {count[n] / steps:.1f} | {total[n] / steps:.1f} | {100 * total[n] / all_us:.1f} % |")
print(f"| all | {sum(count.values()) / steps:.1f} | {all_us / steps:.1f} | |")
print("\nOne step in launch order (us, grid):\n")
if starts:
    for n, v, g in seq[starts[-1]:starts[-1] + 16]:
        print(f"    {n:28s} {v:8.2f}  {g}")
EOF
cat "$out/profile.md"

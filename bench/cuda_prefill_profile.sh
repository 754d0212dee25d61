#!/usr/bin/env bash
# Where a CUDA prompt chunk's time goes (issue 14): every kernel of one prefill of TOKENS
# tokens timed by Nsight Compute, summed per kernel name (cuBLAS's kernels included), beside
# the chunk's rate outside ncu.
#
#   bench/cuda_prefill_profile.sh CHANNEL_BIN OUT_DIR [LAYERS] [TYPE] [TOKENS]
#
# The model is the Gemma-3-12B shape with LAYERS layers (default 8) in TYPE (default q8_0),
# made in OUT_DIR unless it is there (as bench/cuda_decode_profile.sh makes it). TOKENS
# defaults to 512. Writes OUT_DIR/ncu-prefill.csv (raw), OUT_DIR/prefill-profile.md (the table)
# and the bench JSON line.
set -euo pipefail
ch=$(realpath "$1")
out=$2
layers=${3:-8}
type=${4:-q8_0}
tokens=${5:-512}
mkdir -p "$out"
out=$(realpath "$out")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/cuda_profile_common.sh"
model=$(cuda_profile_model "$ch" "$out" "$layers" "$type") || exit 1

echo "== pp$tokens outside ncu =="
"$ch" bench -m "$model" --device cuda -p "$tokens" -n 0 -r 3 | tee "$out/bench-prefill.jsonl"

ncu=$(cuda_profile_ncu) || exit 2
echo "== ncu: every kernel of the run (pp$tokens) =="
"$ncu" --clock-control none --metrics gpu__time_duration.sum --csv \
  "$ch" bench -m "$model" --device cuda -p "$tokens" -n 0 -r 1 \
  >"$out/ncu-prefill.csv" 2>"$out/ncu-prefill.log" || { tail -5 "$out/ncu-prefill.log" >&2; exit 1; }

PYTHONPATH=$here python3 - "$out/ncu-prefill.csv" "$layers" "$type" "$tokens" \
  >"$out/prefill-profile.md" <<'EOF'
import collections, sys
from ncu_times import kernel_times
path, layers, typ, tokens = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
seq = [(n, v) for n, v, _ in kernel_times(path)]  # (kernel, microseconds) in launch order
# A prefill starts with the tokens' embedding; the last one (past the warm-up) counts.
starts = [i for i, (n, _) in enumerate(seq) if n == "embed_kernel"]
chunk = seq[starts[-1]:] if starts else seq
total, count = collections.defaultdict(float), collections.Counter()
for n, v in chunk:
    total[n] += v
    count[n] += 1
all_us = sum(total.values())
print(f"Gemma-3-12B shape, {layers} layers, {typ}: one prefill of {tokens} tokens under ncu "
      f"(caches flushed between kernels)\n")
print("| kernel | launches | us | share |")
print("|---|---|---|---|")
for n in sorted(total, key=lambda n: -total[n]):
    print(f"| {n} | {count[n]} | {total[n]:.1f} | {100 * total[n] / all_us:.1f} % |")
print(f"| all | {sum(count.values())} | {all_us:.1f} | |")
EOF
cat "$out/prefill-profile.md"

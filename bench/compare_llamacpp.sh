#!/usr/bin/env bash
# Whole-model speed of `channel bench` against llama.cpp's llama-bench on the same GGUF files,
# measured back to back in one run (issue 2, performance floor).
#
#   bench/compare_llamacpp.sh CHANNEL_BIN LLAMA_BIN_DIR WORK_DIR [THREADS]
#
# Makes the Gemma-3-1B-shape random models in WORK_DIR unless they exist (q8_0, f16, q4_0 with
# `channel mkmodel`; Q4_K_M with `channel quantize` from the f16 file and llama-quantize's
# per-tensor rules: hidden 1152 is not a multiple of 256, so, as in a real Gemma 3 1B Q4_K_M,
# most tensors are q5_0, attn_v/ffn_down partly q8_0/q6_K), then runs prompt processing (512
# tokens) and generation (128 tokens) in both engines on the same files, alternating, and
# prints the ratios channel / llama.cpp. TYPES (default "q8_0 f16 q4_0 q4_k_m") picks a subset.
set -euo pipefail
channel=$1 llama_dir=$2 work=$3 threads=${4:-2}
mkdir -p "$work"

types=${TYPES:-q8_0 f16 q4_0 q4_k_m}

for type in q8_0 f16 q4_0; do
  [[ " $types " == *" $type "* || ($type == f16 && " $types " == *" q4_k_m "*) ]] || continue
  model=$work/gemma3-1b-shape-$type.gguf
  [[ -f $model ]] || "$channel" mkmodel --arch gemma3 --hidden 1152 --layers 26 --heads 4 \
    --kv-heads 1 --head-dim 256 --ffn 6912 --window 512 --vocab 262144 --type "$type" \
    --seed 1 -t "$threads" -o "$model"
done
if [[ " $types " == *" q4_k_m "* && ! -f $work/gemma3-1b-shape-q4_k_m.gguf ]]; then
  "$channel" quantize "$work/gemma3-1b-shape-f16.gguf" "$work/gemma3-1b-shape-q4_k_m.gguf" \
    q4_k_m -t "$threads"
fi

for type in $types; do
  model=$work/gemma3-1b-shape-$type.gguf
  for round in 1 2; do
    ours=$("$channel" bench -m "$model" -p 512 -n 128 -t "$threads" -r 3 2>/dev/null | tail -n 1)
    theirs=$("$llama_dir/llama-bench" -m "$model" -p 512 -n 128 -t "$threads" -r 3 -o json 2>/dev/null)
    python3 - "$type" "$round" "$ours" "$theirs" <<'PY'
import json, sys
kind, rnd, ours, theirs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
pp = next(r["avg_ts"] for r in theirs if r["n_prompt"] > 0)
tg = next(r["avg_ts"] for r in theirs if r["n_gen"] > 0)
print(f"{kind} round {rnd}: prompt {ours['prompt_tok_per_s']:.1f} vs {pp:.1f} tok/s "
      f"(ratio {ours['prompt_tok_per_s'] / pp:.2f}); generation {ours['gen_tok_per_s']:.2f} vs "
      f"{tg:.2f} tok/s (ratio {ours['gen_tok_per_s'] / tg:.2f}); {ours['gen_gb_per_s']:.1f} GB/s")
PY
  done
done

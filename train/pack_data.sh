#!/usr/bin/env bash
# Pack the tokenized corpus for the trip to the GPU machine (train/data/pack,
# which `run` carries): train.bin xz-compressed, the small files as they are.
set -euo pipefail
cd "$(dirname "$0")"
src=data/tokens; dst=data/pack
for f in train.bin valid.bin valid_ppl.bin recall_train.npz recall_eval.npz; do
  [ -s "$src/$f" ] || { echo "pack_data: missing $src/$f (run tokenize_corpus.py)"; exit 2; }
done
mkdir -p "$dst"
xz -T2 -1 -k -c "$src/train.bin" > "$dst/train.bin.xz"
cp "$src"/valid.bin "$src"/valid_ppl.bin "$src"/recall_train.npz "$src"/recall_eval.npz "$dst"/
# the memory-task banks (make_memory_bank.py), when made
for f in memory_train.npz memory_eval.npz; do [ -s "$src/$f" ] && cp "$src/$f" "$dst/"; done
ls -la "$dst"

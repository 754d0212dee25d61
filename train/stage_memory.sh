#!/usr/bin/env bash
# Stage a memory fine-tune for the GPU machine inside its 64 MiB carry limit (tree + carry).
#   train/stage_memory.sh INIT.gguf [BANK]     (BANK: default memory_train_vf60.npz)
# Reads train/data/tokens (tokenize_corpus.py, make_memory_bank.py) and writes .stage-train/:
#   pack/train.bin.xz (xz -9e: 26 MB where -1 gives 32), pack/valid.bin.xz, pack/valid_ppl.bin.xz,
#   pack/memory_eval.npz, pack/BANK.xz (the bank's arrays stored, then xz: 3.9 MB where the
#   zlib .npz is 5.8) and init.gguf (a q8_0 GGUF does not compress).
# The two GGUFs in models/ are 62 MB: leave them (and train/results/heldout.txt) out of the
# tree for the call, e.g. `git rm --cached` them and list them in .git/info/exclude, then
# `git reset` after. train/device_memory_run.sh unpacks what this writes.
set -euo pipefail
cd "$(dirname "$0")/.."
init=${1:?INIT.gguf}; bank=${2:-memory_train_vf60.npz}
src=train/data/tokens; dst=.stage-train
for f in train.bin valid.bin valid_ppl.bin memory_eval.npz "$bank"; do
  [ -s "$src/$f" ] || { echo "stage_memory: missing $src/$f (tokenize_corpus.py, make_memory_bank.py)"; exit 2; }
done
rm -rf "$dst" && mkdir -p "$dst/pack"
xz -T2 -9e -c "$src/train.bin" > "$dst/pack/train.bin.xz"
xz -9e -c "$src/valid.bin" > "$dst/pack/valid.bin.xz"
xz -9e -c "$src/valid_ppl.bin" > "$dst/pack/valid_ppl.bin.xz"
cp "$src/memory_eval.npz" "$dst/pack/"
/usr/bin/python3 - "$src/$bank" "$dst/pack/$bank.xz" <<'PY'
import io, lzma, sys
import numpy as np
d = np.load(sys.argv[1])
buf = io.BytesIO()
np.savez(buf, **{k: d[k] for k in d.files})
open(sys.argv[2], "wb").write(lzma.compress(buf.getvalue(), preset=9 | lzma.PRESET_EXTREME))
PY
cp "$init" "$dst/init.gguf"
du -cb "$dst"/pack/* "$dst/init.gguf" | tail -1 | awk '{printf "stage_memory: %.1f MiB staged (the carry limit is 64 MiB with the tree)\n", $1 / 1048576}'

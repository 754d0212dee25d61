#!/usr/bin/env bash
# Train one preset on a GPU machine and leave the results in $OUT.
#   train/device_run.sh PRESET MINUTES [extra train.py args...]
#   train/device_run.sh prep 0        (only unpack the data; run once before parallel runs)
# Expects train/data/pack/ (made by pack_data.sh): train.bin.xz, valid.bin,
# valid_ppl.bin, recall_{train,eval}.npz.  Writes $OUT/PRESET.log,
# $OUT/PRESET.results.json and $OUT/PRESET.gguf.part-* (the GGUF cut in
# 16 MB pieces; `cat PRESET.gguf.part-* > model.gguf` joins them).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:?preset}; minutes=${2:?minutes}; shift 2
OUT=${OUT:-train/out/$preset}
mkdir -p "$OUT" train/data/tokens
export PYTHONUNBUFFERED=1
pack=train/data/pack
for f in train.bin.xz valid.bin valid_ppl.bin recall_train.npz recall_eval.npz; do
  [ -s "$pack/$f" ] || { echo "device_run: missing $pack/$f (run train/pack_data.sh first)"; exit 2; }
done
python3 -c 'import torch,sys; print("torch", torch.__version__, "cuda", torch.cuda.is_available()); sys.exit(0 if torch.cuda.is_available() else 3)' \
  || { echo "device_run: no CUDA device visible to torch"; exit 3; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
if [ ! -s train/data/tokens/train.bin ]; then
  python3 -c 'import lzma,shutil; shutil.copyfileobj(lzma.open("train/data/pack/train.bin.xz"), open("train/data/tokens/train.bin","wb"), 1<<24)'
fi
for f in valid.bin valid_ppl.bin recall_train.npz recall_eval.npz; do cp "$pack/$f" train/data/tokens/; done
[ "$preset" = prep ] && exit 0
run=/tmp/run_$preset
rm -rf "$run"
set +e
python3 train/train.py --preset "$preset" --minutes "$minutes" --out "$run" "$@" 2>&1 | tee "$OUT/$preset.log"
rc=${PIPESTATUS[0]}
set -e
[ -f "$run/results.json" ] && cp "$run/results.json" "$OUT/$preset.results.json"
[ -f "$run/model.gguf" ] && split -b 16000000 "$run/model.gguf" "$OUT/$preset.gguf.part-"
ls -la "$OUT"
exit $rc

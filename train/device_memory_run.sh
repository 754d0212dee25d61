#!/usr/bin/env bash
# Memory fine-tuning on a GPU machine: runs in parallel on one GPU, each a NAME:INIT:ARGS triple
# (RUNS, default: two learning rates from the bounded model).
#   train/device_memory_run.sh MINUTES [extra finetune_memory.py args for every run...]
# Expects train/data/pack/ (pack_data.sh with the memory banks, or stage_memory.sh's .xz files;
# BANK names the training bank). Writes to $OUT:
# NAME.log, NAME.results.json and NAME.gguf.part-* (join with cat).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:?minutes}; shift
OUT=${OUT:-train/out/memory}
mkdir -p "$OUT" train/data/tokens
export PYTHONUNBUFFERED=1
pack=train/data/pack
# BANK: the training fact bank (finetune_memory.py --bank). Each file comes from the pack as it
# is, or as FILE.xz (train/stage_memory.sh); what train/data/tokens already holds is kept.
bank=${BANK:-memory_train.npz}
for f in train.bin valid.bin valid_ppl.bin memory_eval.npz "$bank"; do
  [ -s "train/data/tokens/$f" ] || [ -s "$pack/$f" ] || [ -s "$pack/$f.xz" ] \
    || { echo "device_memory_run: missing $pack/$f (run train/pack_data.sh or train/stage_memory.sh)"; exit 2; }
done
python3 -c 'import torch,sys; print("torch", torch.__version__, "cuda", torch.cuda.is_available()); sys.exit(0 if torch.cuda.is_available() else 3)' \
  || { echo "device_memory_run: no CUDA device visible to torch"; exit 3; }
for f in train.bin valid.bin valid_ppl.bin memory_eval.npz "$bank"; do
  [ -s "train/data/tokens/$f" ] && continue
  if [ -s "$pack/$f.xz" ]; then
    python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"), 1<<24)' \
      "$pack/$f.xz" "train/data/tokens/$f"
  else
    cp "$pack/$f" train/data/tokens/
  fi
done
pids=()
RUNS=${RUNS:-"bounded-a:models/channel-bounded.gguf:--lr=6e-4 bounded-b:models/channel-bounded.gguf:--lr=3e-4"}
names=()
for m in $RUNS; do
  name=${m%%:*}; rest=${m#*:}; init=${rest%%:*}; extra=${rest#*:}
  names+=("$name")
  # a hard stop well inside the call's limit, so that what was made still comes back
  timeout "${LIMIT_S:-540}" python3 train/finetune_memory.py --init "$init" --minutes "$minutes" \
    --out "/tmp/mem_$name" --copy-to "$OUT" --copy-name "$name" ${extra//,/ } "$@" > "$OUT/$name.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
for name in "${names[@]}"; do
  # finetune_memory.py --copy-to wrote NAME.gguf.part-* and NAME.results.json as they were made
  tail -5 "$OUT/$name.log"
done
ls -la "$OUT"
exit $rc

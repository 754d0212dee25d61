#!/usr/bin/env bash
# Decode choices on the H200, each against the defaults in the same process: the stage of
# bench/cuda_h200_stage.sh with this file as its run.sh (RUN=bench/cuda_h200_variants.sh;
# llama.cpp is not built). Three device calls on one warm machine, each under the 600 s limit;
# each part builds Channel with CUDA into /tmp/ch unless an earlier part did, and writes its
# models into /tmp/models unless they are there:
#   PART=a bash run.sh   scripts/test-cuda.sh, then 12B q8_0 tg128 with and without w (W_o's
#                        input written by attention in every form, the default since stop 44)
#   PART=b bash run.sh   12B f16 with and without w, and with the LM head on v8; the 1B shape
#   PART=c bash run.sh   12B q8_0 at depths 1,536 and 16,384, the 1B shape's ring
#   PART=g bash run.sh   test-cuda, the read ceiling, 12B q8_0 and f16 pp512 + tg128, f16 with
#                        the products on the kernels each reads fastest alone (the H100's
#                        cuda_matvec_bench: qkv v7, W_o v4, gate|up v5, down v6, LM head v5)
#   PART=h bash run.sh   part g's f16 comparison alone
#   PART=f bash run.sh   the read ceiling (cuda_read_bandwidth_bench), each product alone on the
#                        12B shapes (cuda_matvec_bench, f16 and q8_0), 12B f16 v0 against v8
#                        (stop 45 on an H100, with a v9 since dropped:
#                        bench/results/cuda_h200/read-ceiling-v9-stop45-h100.log)
# A model is written while nothing is timed (a machine busy writing 20 GB slows a decode
# step's host thread), and every variant of a part runs in one process (`channel bench
# --cuda-decode`), so that ratios are measured in the same run. Stop 44's run of stop 43's
# opt-ins (on an H100): bench/results/cuda_h200/variants-stop44-h100.log.
# $OUT gets gpu.txt, build.log, PART.log (what is echoed) and PART.jsonl (bench's JSON lines).
set -uo pipefail
S=$(cd "$(dirname "$0")" && pwd)
part=${PART:?PART must be a, b or c}
log="$OUT/$part.log" jsonl="$OUT/$part.jsonl"
say() { echo "$*" | tee -a "$log"; }
t0=$SECONDS
mkdir -p /tmp/deps /tmp/ch /tmp/models
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CHANNEL_TESTDATA_DIR="$S/testdata"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader >"$OUT/gpu.txt"
ch=/tmp/ch/build-cuda/channel
targets="channel cuda_read_bandwidth_bench"
[[ ${SKIP_TEST:-0} == 1 ]] || targets="$targets unit_cuda_tests cuda_matvec_bench"
if [[ ! -x $ch ]]; then
  for f in "$S"/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
  tar -xJf "$S"/channel-src.tar.xz -C /tmp/ch
  args="-DCMAKE_PREFIX_PATH=/tmp/deps/usr -DCHANNEL_BUILD_SERVER=OFF -DCHANNEL_WERROR=OFF"
  (cd /tmp/ch && cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHANNEL_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCHANNEL_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS=-includecstdint \
    $args && cmake --build build-cuda -j"$(nproc)" --target $targets) \
    >"$OUT/build.log" 2>&1 || { say "build failed"; grep -m5 -A3 "error" "$OUT/build.log"; exit 1; }
  say "built in $((SECONDS - t0)) s"
fi

shape() {
  case $1 in
    12b) echo "--arch gemma3 --hidden 3840 --layers 48 --heads 16 --kv-heads 8 --head-dim 256 --ffn 15360 --window 1024 --vocab 262144 --ctx 32768" ;;
    1b) echo "--arch gemma3 --hidden 1152 --layers 26 --heads 4 --kv-heads 1 --head-dim 256 --ffn 6912 --window 512 --vocab 262144 --ctx 32768" ;;
  esac
}
model() {  # model 12b q8_0: the file, written first where it is missing
  local f=/tmp/models/$1-$2.gguf
  # bench/cuda_h200.sh's copy, where an earlier call on this machine wrote it
  [[ -f /tmp/cuda_h200/models/gemma3-$1-$2.gguf ]] && f=/tmp/cuda_h200/models/gemma3-$1-$2.gguf
  if [[ ! -f $f ]]; then
    "$ch" mkmodel $(shape "$1") --type "$2" -t "$(nproc)" -o "$f.part" >>"$log" 2>&1 && mv "$f.part" "$f"
    say "mkmodel $1 $2 rc $? at $((SECONDS - t0)) s" >&2  # stdout is the file's name
  fi
  echo "$f"
}
bench() {  # bench LABEL ARGS...: one channel bench, its JSON lines tagged with LABEL
  local label=$1
  shift
  timeout $((590 - (SECONDS - t0))) "$ch" bench --device cuda -r 3 "$@" 2>>"$log" |
    tee -a "$log" | grep '^{' | sed "s/^{/{\"label\":\"$label\",/" >>"$jsonl"
  say "bench $label rc ${PIPESTATUS[0]} at $((SECONDS - t0)) s"
}

test_cuda() {  # test_cuda SECONDS: scripts/test-cuda.sh on the build above
  (cd /tmp/ch && SKIP_BUILD=1 BUILD_DIR=build-cuda timeout "$1" bash scripts/test-cuda.sh) \
    >"$OUT/test-cuda.log" 2>&1
  say "test-cuda rc $? at $((SECONDS - t0)) s"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]|test-cuda:" "$OUT/test-cuda.log" | head -20 | tee -a "$log"
}
# f16 with each product on the kernel that read it fastest alone on the H100, and v5, v4 whole
f16_mix=v0fphw,v0fphw+qkv:v7+wo:v4+gate_up:v5+down:v6+output:v5,v5fphw,v4fphw

case $part in
  g)  # the goals in one call where llama.cpp's numbers are already known: test-cuda, the read
      # ceiling, 12B q8_0 and f16 pp512 + tg128 as the table runs them, f16 by product kernels
    [[ ${SKIP_TEST:-0} == 1 ]] || test_cuda 150  # SKIP_TEST=1: code test-cuda already passed
    /tmp/ch/build-cuda/cuda_read_bandwidth_bench 8 5 2>&1 | tee -a "$log" | grep '^{' >>"$jsonl"
    m=$(model 12b q8_0)
    bench q8 -m "$m" -p 512 -n 128
    m=$(model 12b f16)
    bench f16 -m "$m" -p 512 -n 128 --cuda-decode "$f16_mix"
    ;;
  h)  # part g's f16 comparison alone
    m=$(model 12b f16)
    bench f16 -m "$m" -p 0 -n 128 --cuda-decode "$f16_mix"
    ;;
  a)
    test_cuda 330
    m=$(model 12b q8_0)
    bench q8 -m "$m" -p 0 -n 128 --cuda-decode v8fphw,v8fph
    ;;
  b)
    m=$(model 12b f16)
    bench f16 -m "$m" -p 0 -n 128 --cuda-decode v0fphw,v0fph,v0fphw+output:v8
    m=$(model 1b q8_0)
    bench 1b -m "$m" -p 0 -n 128 --cuda-decode v8fphw,v8fph
    ;;
  c)
    m=$(model 12b q8_0)
    for depth in 1536 16384; do
      bench "d$depth" -m "$m" -p 0 -n 128 -d "$depth" --cuda-decode v8fphw
    done
    # The 1B shape's ring (ring_attention; part b wrote the model) generating 3,072 tokens
    # from a fresh session: tok/s each 1,024 tokens.
    m=$(model 1b q8_0)
    timeout 120 "$ch" stream -m "$m" --device cuda --tokens 3072 --stats-every 1024 >>"$log" 2>&1
    say "ring rc $? at $((SECONDS - t0)) s"
    ;;
  f)
    bw=/tmp/ch/build-cuda
    [[ -x $bw/cuda_matvec_bench ]] ||  # run.sh's build has no cuda_matvec_bench
      cmake --build "$bw" --target cuda_matvec_bench cuda_read_bandwidth_bench >>"$OUT/build.log" 2>&1
    "$bw"/cuda_read_bandwidth_bench 8 5 2>&1 | tee -a "$log" | grep '^{' >>"$jsonl"
    timeout 200 "$bw"/cuda_matvec_bench --types f16,q8_0 --rounds 3 --iters 20 >>"$log" 2>&1
    say "matvec rc $? at $((SECONDS - t0)) s"
    m=$(model 12b f16)
    bench f16 -m "$m" -p 0 -n 128 --cuda-decode v0fphw,v8fphw
    ;;
esac
say "part $part done in $((SECONDS - t0)) s"

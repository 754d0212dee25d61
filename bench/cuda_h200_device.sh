#!/usr/bin/env bash
# The GPU machine's side of bench/cuda_h200_stage.sh (copied there as run.sh): unpacks the
# libraries into /tmp/deps, builds Channel with CUDA (no server, no -Werror) while llama.cpp
# builds in the background, runs scripts/test-cuda.sh, then bench/cuda_h200.sh. Everything
# lands in $OUT: channel_build.log, test-cuda.log, read_bandwidth.log, llama_build.log, gpu.txt,
# results.jsonl, channel_bench.log, llama_bench.log, table.md.
#   [BUDGET_S=280 (seconds of benchmarking, bench/cuda_h200.sh)] [MODELS="12b:q8_0 1b:q8_0 12b:f16 12b:q4_0 1b:f16"] bash run.sh
set -uo pipefail
S=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/deps /tmp/ch
for f in "$S"/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
tar -xJf "$S"/channel-src.tar.xz -C /tmp/ch
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CHANNEL_TESTDATA_DIR="$S/testdata"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
g++ --version | head -1; cmake --version | head -1; lscpu | grep -m1 "Model name"
cd /tmp/ch
# That machine's g++ (13) includes fewer standard headers transitively than Debian 12's, which
# the CI compiles with: <cstdint> is forced in so one missed include cannot cost a whole run.
ARGS="-DCMAKE_PREFIX_PATH=/tmp/deps/usr -DCHANNEL_BUILD_SERVER=OFF -DCHANNEL_WERROR=OFF"
ARGS="$ARGS -DCMAKE_CXX_FLAGS=-includecstdint"
t0=$SECONDS
# llama.cpp builds in the background from the start (bench/cuda_h200.sh waits for its marker).
mkdir -p /tmp/cuda_h200
# Its output goes to its log, not to this script's stdout (a pipe would wait for it on early exit).
(LLAMA_BUILD_ONLY=1 LLAMA_SRC="$S/llama-src.tar.xz" OUT="$OUT" nice -n 5 bash bench/cuda_h200.sh \
  && touch /tmp/cuda_h200/llama.ok || touch /tmp/cuda_h200/llama.fail) </dev/null >/dev/null 2>&1 &
llama_job=$!
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHANNEL_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCHANNEL_BUILD_BENCH=OFF $ARGS >"$OUT/channel_build.log" 2>&1 ||
  { echo "configure failed"; tail -20 "$OUT/channel_build.log"; exit 1; }
set -o pipefail
cmake --build build-cuda -j"$(nproc)" --target channel unit_cuda_tests cuda_read_bandwidth_bench 2>&1 | tail -300 >>"$OUT/channel_build.log" ||
  { echo "channel build failed"; grep -m5 -B2 -A3 "error" "$OUT/channel_build.log"; kill -- -$llama_job 2>/dev/null; pkill -f llama-build; exit 1; }
echo "channel built in $((SECONDS - t0)) s"; tail -3 "$OUT/channel_build.log"
SKIP_BUILD=1 BUILD_DIR=build-cuda timeout 150 bash scripts/test-cuda.sh > "$OUT/test-cuda.log" 2>&1
echo "test-cuda rc $?"; grep -E "PASSED|FAILED|SKIPPED \]|test-cuda" "$OUT/test-cuda.log" | head -30
# The GPU's own read ceiling, the yardstick of the decode rows' GB/s (cuda_read_bandwidth.cu).
build-cuda/cuda_read_bandwidth_bench 8 5 | tee "$OUT/read_bandwidth.log"
LLAMA_MARKER=/tmp/cuda_h200/llama LLAMA_SRC="$S/llama-src.tar.xz" CHANNEL_BIN=/tmp/ch/build-cuda/channel OUT="$OUT" \
  BUDGET_S=${BUDGET_S:-280} MODELS="${MODELS:-12b:q8_0 1b:q8_0 12b:f16 12b:q4_0 1b:f16}" \
  bash bench/cuda_h200.sh
echo "all done in $((SECONDS - t0)) s"

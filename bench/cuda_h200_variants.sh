#!/usr/bin/env bash
# The decode kernel variants on the H200, in one device call: the stage of
# bench/cuda_h200_stage.sh with this file as its run.sh (llama.cpp is not built). Builds Channel
# with CUDA, runs scripts/test-cuda.sh (default kernels) and the CUDA model tests again with
# matvec v2, the fused stages and PDL on, cuda_matvec_bench (GB/s per variant on the 12B
# shapes), then `channel bench --cuda-decode` on the 12B q8_0 shape: every matvec variant with
# and without the fused stages, then with PDL (a second run, so that a failure there cannot
# cost the first). $OUT gets 7 files: gpu.txt, channel_build.log, test-cuda.log,
# test-variants.log, matvec_bench.md, bench.jsonl, bench.log.
#   [BUDGET_S=420] bash run.sh
set -uo pipefail
S=$(cd "$(dirname "$0")" && pwd)
budget=${BUDGET_S:-420}
mkdir -p /tmp/deps /tmp/ch /tmp/models
for f in "$S"/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
tar -xJf "$S"/channel-src.tar.xz -C /tmp/ch
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export CHANNEL_TESTDATA_DIR="$S/testdata"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
cd /tmp/ch
ARGS="-DCMAKE_PREFIX_PATH=/tmp/deps/usr -DCHANNEL_BUILD_SERVER=OFF -DCHANNEL_WERROR=OFF"
ARGS="$ARGS -DCMAKE_CXX_FLAGS=-includecstdint"
t0=$SECONDS
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DCHANNEL_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCHANNEL_BUILD_BENCH=OFF $ARGS >"$OUT/channel_build.log" 2>&1 ||
  { echo "configure failed"; tail -20 "$OUT/channel_build.log"; exit 1; }
cmake --build build-cuda -j"$(nproc)" --target channel unit_cuda_tests cuda_matvec_bench 2>&1 |
  tail -200 >>"$OUT/channel_build.log"
[[ ${PIPESTATUS[0]} == 0 ]] || { echo "build failed"; grep -m5 -B2 -A3 "error" "$OUT/channel_build.log"; exit 1; }
echo "built in $((SECONDS - t0)) s"
ch=/tmp/ch/build-cuda/channel
model=/tmp/models/gemma3-12b-q8_0.gguf
# The 12B shape (bench/cuda_h200.sh) is written on the CPU while the GPU runs the tests.
shape="--arch gemma3 --hidden 3840 --layers 48 --heads 16 --kv-heads 8 --head-dim 256 --ffn 15360 --window 1024 --vocab 262144 --ctx 32768"
("$ch" mkmodel $shape --type q8_0 -t "$(nproc)" -o "$model" >>"$OUT/bench.log" 2>&1 && touch /tmp/models/ok) &
mk=$!

SKIP_BUILD=1 BUILD_DIR=build-cuda timeout 120 bash scripts/test-cuda.sh >"$OUT/test-cuda.log" 2>&1
echo "test-cuda rc $? at $((SECONDS - t0)) s"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|test-cuda:" "$OUT/test-cuda.log" | head -20
CHANNEL_CUDA_MATVEC=v2 CHANNEL_CUDA_FUSE=1 CHANNEL_CUDA_PDL=1 timeout 60 build-cuda/tests/unit_cuda_tests \
  --gtest_filter='*CudaModel*:*CudaGoldens*:*CudaOps*' >"$OUT/test-variants.log" 2>&1
echo "tests with v2 + fused + PDL rc $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/test-variants.log" | head -20
grep -E "\] decode " "$OUT/test-cuda.log" | sort -k12 -g | tail -3  # the largest nmse
timeout 90 build-cuda/cuda_matvec_bench --types q8_0,q4_0,f16 >"$OUT/matvec_bench.md" 2>&1
echo "matvec bench rc $? at $((SECONDS - t0)) s"; cat "$OUT/matvec_bench.md"

wait $mk
echo "mkmodel done at $((SECONDS - t0)) s"
[[ -e /tmp/models/ok ]] || { echo "mkmodel failed"; tail -5 "$OUT/bench.log"; exit 1; }
plain=v0,v0f,v1,v1f,v2,v2f,v3,v3f,v4,v4f,v5,v5f
timeout 150 "$ch" bench -m "$model" --device cuda -p 512 -n 128 -r 3 --cuda-decode "$plain" \
  >>"$OUT/bench.jsonl" 2>>"$OUT/bench.log"
echo "bench (plain, fused) rc $? at $((SECONDS - t0)) s"; cat "$OUT/bench.jsonl"
if (( SECONDS - t0 < budget - 70 )); then
  pdl=v0p,v0fp,v1fp,v2fp,v3fp,v4fp,v5fp
  timeout $((budget - (SECONDS - t0) - 5)) "$ch" bench -m "$model" --device cuda -p 0 -n 128 -r 3 \
    --cuda-decode "$pdl" >>"$OUT/bench.jsonl" 2>>"$OUT/bench.log"
  echo "bench (PDL) rc $? at $((SECONDS - t0)) s"; tail -8 "$OUT/bench.jsonl"
fi
echo "all done in $((SECONDS - t0)) s"

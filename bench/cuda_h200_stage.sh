#!/usr/bin/env bash
# Prepares a folder to carry to a GPU machine that has nvcc, CMake and ninja but none of
# Channel's libraries and no network (this workplace's H200 machines): the Debian packages of
# fmt, nlohmann-json, CLI11, yaml-cpp and googletest (unpacked there into /tmp/deps, never
# into /), Channel's sources at HEAD, llama.cpp's sources, the micro models of the goldens that
# the CUDA backend runs, and bench/cuda_h200_device.sh as run.sh. Then, on the device machine:
#   bash STAGE/run.sh            (writes everything to $OUT)
#   STAGE=dir LLAMA_REPO=path-to-a-llama.cpp-git-dir bash bench/cuda_h200_stage.sh
# Without LLAMA_REPO llama.cpp's sources stay behind (bench/cuda_h200_variants.sh needs none);
# RUN=bench/other.sh puts another script in as run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=${STAGE:?STAGE must name the folder to fill}
llama=${LLAMA_REPO:-}  # a llama.cpp git directory (kainlan/llama.cpp-intel-optimizations)
testdata=${CHANNEL_TESTDATA_DIR:-../shared/testdata}
mkdir -p "$stage/debs" "$stage/testdata/models" "$stage/testdata/goldens"
(cd "$stage/debs" && apt-get download libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev \
  libyaml-cpp-dev libyaml-cpp0.7 libgtest-dev)
cp "$testdata/MANIFEST.json" "$testdata/goldens/sequences.json" "$stage/testdata/" 
mv "$stage/testdata/sequences.json" "$stage/testdata/goldens/"
# The f32 micro models (22 MB of incompressible weights) stay behind: the call carries at most
# 64 MiB, the checkout included; their golden tests skip there, the f16/q8_0/q4_0 ones run.
for m in llama-micro-q8_0 llama-micro-q4_0 gemma3-micro-f16 gemma3-micro-q8_0 gemma3-micro-q4_0 \
  qwen3-micro-q8_0; do
  cp "$testdata/models/$m.gguf" "$stage/testdata/models/"
  cp -r "$testdata/goldens/$m" "$stage/testdata/goldens/"
done
git archive --format=tar HEAD -- . ':!models' | xz -T2 -3 >"$stage/channel-src.tar.xz"
# What a CUDA build of llama-bench needs (the stored snapshot lacks ggml-sycl.cpp, never built here).
if [[ -n $llama ]]; then
  git -C "$llama" archive --format=tar HEAD CMakeLists.txt cmake ggml src include common tools \
    vendor licenses LICENSE ':!ggml/src/ggml-sycl' | xz -T2 -6 >"$stage/llama-src.tar.xz"
fi
cp "${RUN:-bench/cuda_h200_device.sh}" "$stage/run.sh"
du -sh "$stage"

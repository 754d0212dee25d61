#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite:
#   1. the release build: unit, CLI and golden tests (ctest);
#   2. an ASan+UBSan build of the unit tests;
#   3. the training smoke test (CPU, tiny config).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

bash scripts/setup.sh

echo "== release build =="
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs" --timeout 900)

echo "== ASan+UBSan build of the unit tests =="
# Line tables only (-g1): reports keep file:line, the build is much cheaper than full -g.
# The library stays at -O2: at -O1 GCC 12 reports its false "used uninitialized" on
# _mm512_undefined_ps() in the AVX-512 kernels (a known GCC 12 bug); the test code itself is
# compiled at -O0 (tests/CMakeLists.txt).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHANNEL_SANITIZE=ON \
  -DCHANNEL_BUILD_BENCH=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" >/dev/null
cmake --build build-asan -j"$jobs" --target unit_tests
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j"$jobs" -L unit -LE slow --timeout 900)

if [[ -x train/smoke_test.sh ]]; then
  echo "== training smoke test =="
  bash train/smoke_test.sh
fi

#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: set up, build with warnings as errors,
# run every test (unit tests, and the differential tests against llama.cpp), then rebuild the
# unit tests under AddressSanitizer + UBSan and run them again (GGUF corruption tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDAISY_WERROR=ON >/dev/null
cmake --build build --parallel "$jobs"
(cd build && ctest --output-on-failure --timeout 900 -j "$jobs")

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDAISY_WERROR=ON \
  -DDAISY_SANITIZE=address,undefined -DDAISY_BENCH=OFF >/dev/null
cmake --build build-asan --parallel "$jobs"
(cd build-asan && ctest --output-on-failure --timeout 900 -j "$jobs" -L unit)

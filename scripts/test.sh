#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: set up, build with warnings as errors,
# run every test (unit tests, and the differential tests against llama.cpp), then rebuild with
# clang under AddressSanitizer + UBSan and run the unit tests again (GGUF corruption tests
# included) and every libFuzzer target briefly (docs/fuzzing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDAISY_WERROR=ON >/dev/null
cmake --build build --parallel "$jobs"
(cd build && ctest --output-on-failure --timeout 900 -j "$jobs")

cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DDAISY_FUZZ=ON -DDAISY_FUZZ_COVERAGE=OFF -DDAISY_SANITIZE=address,undefined -DDAISY_BENCH=OFF >/dev/null
cmake --build build-sanitize --parallel "$jobs"
(cd build-sanitize && ctest --output-on-failure --timeout 900 -j "$jobs" -L unit)
FUZZ_BUILD=build-sanitize FUZZ_SECONDS="${FUZZ_SECONDS:-10}" scripts/fuzz.sh

#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: set up, build with warnings as errors,
# run every test (unit tests, and the differential tests against llama.cpp), then rebuild with
# clang under AddressSanitizer + UBSan and run the unit tests again (GGUF corruption tests
# included), the multi-process tests and every libFuzzer target briefly (docs/fuzzing.md), and
# last under ThreadSanitizer the threaded parts.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's start time on stderr, so a slow CI run shows where its time went.
stage() { echo "== $(date -u +%T) $*" >&2; }
stage setup
scripts/setup.sh
jobs=$(nproc)
stage "Release build and tests"

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDAISY_WERROR=ON >/dev/null
cmake --build build --parallel "$jobs"
(cd build && ctest --output-on-failure --timeout 900 -j "$jobs")

# The SIMD kernel tables this CPU runs, as the release build's own checks (kernel_table.cc) find
# them: the sanitizer builds compile only those, as a table the host cannot run is never called
# there (the AVX-512 files were ~1 minute of each on an AVX2-only host); the release build above
# compiles all of them (its tests check every table is complete).
isas=$(build/bench/daisy-bench-kernels --list | grep -v '^scalar$' | paste -sd';' -)
echo "kernel tables this host runs: scalar ${isas//;/ }" >&2

stage "ASan+UBSan build and unit tests"
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DDAISY_FUZZ=ON -DDAISY_FUZZ_COVERAGE=OFF -DDAISY_SANITIZE=address,undefined -DDAISY_BENCH=OFF \
  "-DDAISY_KERNEL_ISAS=$isas" >/dev/null
cmake --build build-sanitize --parallel "$jobs"
(cd build-sanitize && ctest --output-on-failure --timeout 900 -j "$jobs" -L unit)
stage "multi-process tests under ASan+UBSan"
# The multi-process tests again with every daisy process under ASan+UBSan (a report in any
# process's stderr fails the test: tests/integration/lib.mjs).
(cd build-sanitize && ctest --output-on-failure --timeout 900 -j "$jobs" -R '^(pipeline|serve|resume|faults)$')
stage "fuzz smoke"
FUZZ_BUILD=build-sanitize FUZZ_SECONDS="${FUZZ_SECONDS:-5}" scripts/fuzz.sh

stage "ThreadSanitizer build and tests"
# ThreadSanitizer over the threaded parts: the links and TLS, the HTTP server, the pipeline and
# the scheduler (unit tests), then serving and resuming with real processes. The host's kernel
# tables only, as above. (Not the scalar table alone, though the threads are the same whichever
# table computes: its instrumented loops made speculative_test run 749 s instead of 25.)
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DDAISY_SANITIZE=thread -DDAISY_BENCH=OFF "-DDAISY_KERNEL_ISAS=$isas" >/dev/null
cmake --build build-tsan --parallel "$jobs" --target net_test http_test pipeline_test scheduler_test speculative_test daisy
for t in transport/net_test http/http_test pipeline/pipeline_test coord/scheduler_test coord/speculative_test; do
  TSAN_OPTIONS=halt_on_error=1 "build-tsan/src/$t" --gtest_brief=1
done
# The two files side by side, as ctest -j runs them in the other builds (resume mostly waits out
# its peer timeouts).
DAISY=build-tsan/apps/daisy node --test --test-concurrency=2 tests/integration/serve.test.mjs tests/integration/resume.test.mjs
stage done

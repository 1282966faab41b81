#!/usr/bin/env bash
# bench/crash_layer.sh: what the crash-consistency layer (crash_host with
# unsynced: lose, harness/faults/durable.c) costs the programs of a tracked host.
# One BENCH line (format of bench/run):
#   crash_layer_fsync_write   a task writing 16 files of 16 MiB (256 MiB), each
#                             with dd conv=fsync (so one fsync per file, which
#                             the layer answers by copying the file into its
#                             store), on a host that a crash_host with
#                             unsynced: lose targets, vs the same task on a
#                             host that a plain crash_host targets (nothing
#                             preloaded).  Both disks are tmpfs (a tracked
#                             host's is one of its own), and the fault never
#                             fires (at: 59s; the task is done long before).
#                             MiB/s as the task times itself; the ratio is
#                             tracked over untracked
# Each is run CRASH_BENCH_ROUNDS times (default 3), the order alternating;
# the best of each (interference on this shared machine only slows a round
# down).  Every round, and the same comparison for 2000 files of 4 KiB
# (the layer's cost per fsync), go to stderr.  Needs root (faultline run).
set -euo pipefail
cd "$(dirname "$0")/.."
FL=$PWD/build/bin/faultline
[ -x "$FL" ] || { echo "bench/crash_layer.sh: build faultline first (make)" >&2; exit 1; }
W=$(mktemp -d /tmp/fl-bench-crash.XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM HUP

# scenario NAME UNSYNCED FILES KIB: the task writes FILES files of KIB KiB
# with dd conv=fsync and emits its seconds (event bench.secs, read from the
# run's database: a host cannot write into {scenario_dir})
scenario() {
  cat >"$W/$1.yaml" <<EOF
name: bench-crash-layer-$1
hosts: [a]
cluster: {node: [a]}
run:
  command: |
    t0=\$(date +%s.%N)
    i=0
    while [ \$i -lt $3 ]; do
      dd if=/dev/zero of=f\$i bs=$(( $4 < 1024 ? $4 : 1024 ))K count=$(( $4 < 1024 ? 1 : $4 / 1024 )) conv=fsync status=none
      i=\$((i + 1))
    done
    t1=\$(date +%s.%N)
    {bin}/faultline emit bench.secs secs=\$(echo "\$t0 \$t1" | awk '{{ print \$2 - \$1 }}')
timeout: 60s
faults:
  - {at: 59s, crash_host: a, unsynced: $2}
expect:
  all:
    all: {exit: 0}
EOF
}
scenario big_lose lose 16 16384
scenario big_keep keep 16 16384
scenario small_lose lose 2000 4
scenario small_keep keep 2000 4

run() { # NAME -> appends the task's seconds to the array named NAME
  rm -f "$W/fl.db"
  "$FL" run -q --db "$W/fl.db" --out "$W/out" "$W/$1.yaml" >"$W/$1.log" 2>&1 ||
    { echo "bench/crash_layer.sh: $1 failed: $(cat "$W/$1.log")" >&2; exit 1; }
  local secs
  secs=$(sqlite3 "$W/fl.db" "SELECT attrs FROM events WHERE kind='bench.secs'" |
    sed -n 's/.*secs=\([0-9.e+-]*\).*/\1/p')
  eval "$1+=($secs)"
}
big_lose=() big_keep=() small_lose=() small_keep=()
rounds=${CRASH_BENCH_ROUNDS:-3}
for r in $(seq "$rounds"); do
  if (( r % 2 )); then run big_keep; run big_lose; run small_keep; run small_lose
  else run big_lose; run big_keep; run small_lose; run small_keep; fi
  echo "bench/crash_layer.sh: round $r: 256 MiB in 16 files: untracked ${big_keep[-1]} s," \
       "tracked ${big_lose[-1]} s; 2000 files of 4 KiB: untracked ${small_keep[-1]} s," \
       "tracked ${small_lose[-1]} s" >&2
done
best() { printf '%s\n' "$@" | sort -g | head -n 1; }
bl=$(best "${big_lose[@]}") bk=$(best "${big_keep[@]}")
sl=$(best "${small_lose[@]}") sk=$(best "${small_keep[@]}")
awk -v l="$sl" -v k="$sk" 'BEGIN {
  printf "bench/crash_layer.sh: 2000 fsyncs of 4 KiB files: %.1f us each tracked, %.1f us untracked (+%.1f us)\n",
         l / 2000 * 1e6, k / 2000 * 1e6, (l - k) / 2000 * 1e6 }' >&2
awk -v l="$bl" -v k="$bk" 'BEGIN {
  v = 256 / l; b = 256 / k
  printf "BENCH name=crash_layer_fsync_write value=%.6g unit=MiB_per_s baseline=untracked_fsync_write baseline_value=%.6g ratio=%.4f\n",
         v, b, v / b }'

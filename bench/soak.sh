#!/usr/bin/env bash
# bench/soak.sh: how many soak runs one machine makes in an hour (issue 26:
# a night's soak on one shard), with the nightly profile
# scenarios/soak/psrt-robust-harsh.yaml (psrt on four hosts, about fifteen
# faults drawn per run) over SOAK_BENCH_ITERATIONS iterations (default 6,
# seed 7), against `faultline run --repeat` of the same profile's scenario
# without faults (what the soak adds: drawing, its faults, their recovery).
# Prints: BENCH name=soak_runs_per_hour value=R unit=runs/h
#         baseline=plain_runs_per_hour baseline_value=B ratio=R/B
set -euo pipefail
cd "$(dirname "$0")/.."
n=${SOAK_BENCH_ITERATIONS:-6}
out=$(mktemp -d /tmp/fl-bench-soak.XXXXXX)
trap 'rm -rf "$out"' EXIT
fl=build/bin/faultline
start=$(date +%s%N)
if ! $fl soak scenarios/soak/psrt-robust-harsh.yaml --iterations "$n" --seed 7 --budget 0 -q \
  --out "$out/soak" >"$out/soak.txt" 2>&1; then
  echo "bench/soak.sh: the soak failed (a failure is kept, not timed):" >&2
  tail -n 20 "$out/soak.txt" >&2
fi
end=$(date +%s%N)
soak_s=$(awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e9 }')
start=$(date +%s%N)
if ! $fl run -q --repeat "$n" --no-db --out "$out/plain" scenarios/soak/psrt-robust-harsh.yaml \
  >"$out/plain.txt" 2>&1; then
  echo "bench/soak.sh: the profile's scenario without faults failed:" >&2
  tail -n 20 "$out/plain.txt" >&2
  exit 1
fi
end=$(date +%s%N)
plain_s=$(awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e9 }')
echo "bench/soak.sh: $n soak iterations in $soak_s s; $n plain runs in $plain_s s" >&2
awk -v n="$n" -v a="$soak_s" -v b="$plain_s" 'BEGIN { r = n * 3600 / a; p = n * 3600 / b; printf "BENCH name=soak_runs_per_hour value=%.0f unit=runs/h baseline=plain_runs_per_hour baseline_value=%.0f ratio=%.4f\n", r, p, r / p }'

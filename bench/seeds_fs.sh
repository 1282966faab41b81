#!/usr/bin/env bash
# bench/seeds_fs.sh: the reproducer suite (scenarios/seeds/) with every
# host's disk served through the faultline filesystem (`faultline run
# --disk-fs`) against the same suite on plain disks, in the same run: the
# first round of each (what a user meets first) and the median of 3,
# alternating plain and --disk-fs so that a machine getting busier weighs
# on both.  ratio = fs / plain (issue 22's target: at most 1.5).
# Prints: BENCH name=fusedisk_seed_suite value=S unit=s baseline=seed_suite_plain ...
#         BENCH name=fusedisk_seed_suite_first ... (the first round of each)
set -euo pipefail
cd "$(dirname "$0")/.."
fl=build/bin/faultline
out=$(mktemp -d /tmp/fl-bench-seeds-fs.XXXXXX)
trap 'rm -rf "$out"' EXIT
plain=() fs=()
one() { # one round: $1 = label, rest = options; prints seconds
  local label=$1
  shift
  local start end
  start=$(date +%s%N)
  if ! $fl run -q "$@" --db "$out/$label.db" --out "$out/$label" scenarios/seeds \
    >"$out/$label.txt" 2>&1; then
    echo "bench/seeds_fs.sh: the seed suite failed ($label):" >&2
    tail -n 30 "$out/$label.txt" >&2
    exit 1
  fi
  end=$(date +%s%N)
  awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e9 }'
}
for round in 1 2 3; do
  plain+=("$(one "plain$round")")
  fs+=("$(one "fs$round" --disk-fs)")
done
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
mp=$(median "${plain[@]}")
mf=$(median "${fs[@]}")
echo "BENCH name=fusedisk_seed_suite value=$mf unit=s baseline=seed_suite_plain baseline_value=$mp ratio=$(awk -v a="$mf" -v b="$mp" 'BEGIN { printf "%.4f", a / b }')"
echo "BENCH name=fusedisk_seed_suite_first value=${fs[0]} unit=s baseline=seed_suite_plain_first baseline_value=${plain[0]} ratio=$(awk -v a="${fs[0]}" -v b="${plain[0]}" 'BEGIN { printf "%.4f", a / b }')"

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
. bench/suite.bash
out=$(mktemp -d /tmp/fl-bench-seeds-fs.XXXXXX)
trap 'rm -rf "$out"' EXIT
plain=() fs=()
for round in 1 2 3; do
  plain+=("$(suite_seconds bench/seeds_fs.sh "$out" "plain$round" --db "$out/plain$round.db" \
    scenarios/seeds)")
  fs+=("$(suite_seconds bench/seeds_fs.sh "$out" "fs$round" --db "$out/fs$round.db" --disk-fs \
    scenarios/seeds)")
done
mp=$(median3 "${plain[@]}")
mf=$(median3 "${fs[@]}")
echo "BENCH name=fusedisk_seed_suite value=$mf unit=s baseline=seed_suite_plain baseline_value=$mp ratio=$(awk -v a="$mf" -v b="$mp" 'BEGIN { printf "%.4f", a / b }')"
echo "BENCH name=fusedisk_seed_suite_first value=${fs[0]} unit=s baseline=seed_suite_plain_first baseline_value=${plain[0]} ratio=$(awk -v a="${fs[0]}" -v b="${plain[0]}" 'BEGIN { printf "%.4f", a / b }')"

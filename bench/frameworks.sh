#!/usr/bin/env bash
# bench/frameworks.sh: wall time of the real-framework suite
# (scenarios/frameworks/pytorch: Debian's PyTorch on faultline's hosts, every
# variant), as `faultline run` runs it: the first round (what a user meets
# first: a cold Python and torch import on every host) and the median of 3.
#
# Baseline: a budget of 150 s for the suite on this 2-core machine (issue 23
# asks that `make check`, which runs it, stay under 10 minutes); no measured
# baseline fits better, the suite's work is PyTorch's as much as faultline's.
# (60 s while the suite had two scenarios; five scenarios, 14 runs, each
# starting three to six Python processes that import torch, took 107 s.)
# ratio = value / 150: below 1 is within budget.  Skipped (a line on stderr,
# no BENCH line) when /usr/bin/python3 cannot import torch.
# Prints: BENCH name=frameworks_pytorch_wall value=S unit=s baseline=budget_150s ...
set -euo pipefail
cd "$(dirname "$0")/.."
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "bench/frameworks.sh: SKIP: /usr/bin/python3 cannot import torch (python3-torch: run ci/install-deps)" >&2
  exit 0
fi
. bench/suite.bash
out=$(mktemp -d /tmp/fl-bench-fw.XXXXXX)
trap 'rm -rf "$out"' EXIT
times=()
for round in 1 2 3; do
  times+=("$(suite_seconds bench/frameworks.sh "$out" "round$round" --no-db scenarios/frameworks/pytorch)")
done
median=$(median3 "${times[@]}")
echo "BENCH name=frameworks_pytorch_wall value=$median unit=s baseline=budget_150s baseline_value=150 ratio=$(awk -v a="$median" 'BEGIN { printf "%.4f", a / 150 }') cold_value=${times[0]} cold_ratio=$(awk -v a="${times[0]}" 'BEGIN { printf "%.4f", a / 150 }')"

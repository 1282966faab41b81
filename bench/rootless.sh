#!/usr/bin/env bash
# bench/rootless.sh: what running without root costs (issue 25,
# harness/sys/rootless.c), each figure against the same done as root in
# this script.  A user made for the benchmark (useradd, removed at the end
# with its home) runs faultline copied into its home, as the cli_rootless
# tests do.
#   hosts_up_down_256_rootless  256 hosts up and down (best of 5 rounds,
#                               `_bench-hosts`), baseline the same as root;
#                               the issue's target is 0.6 s
#   seed_suite_wall_rootless    the reproducer suite (scenarios/seeds), median
#                               of 3, baseline the same as root; the issue's
#                               target is a ratio of at most 1.3
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/suite.bash
user=fl-bench-rl-$$
home=/home/$user
out=$(mktemp -d /tmp/fl-bench-rootless.XXXXXX)
trap 'userdel -r "$user" >/dev/null 2>&1; rm -rf "$out"' EXIT
useradd -m -d "$home" -s /bin/sh "$user"
mkdir -p "$home/fl/build/bin" "$home/fl/build/lib"
cp build/bin/faultline build/bin/psrt build/bin/fl-probe build/bin/fl-disk-probe "$home/fl/build/bin/"
cp build/lib/*.so "$home/fl/build/lib/"
cp -r scenarios "$home/fl/"
chown -R "$user:" "$home"
as_user() { su -s /bin/sh "$user" -c "cd $home && $*"; }

root=$(build/bin/faultline _bench-hosts 256 5 2>/dev/null)
ours=$(as_user fl/build/bin/faultline _bench-hosts 256 5 2>/dev/null)
awk -v a="$ours" -v b="$root" 'BEGIN { printf "BENCH name=hosts_up_down_256_rootless value=%s unit=s baseline=hosts_up_down_256_root baseline_value=%s ratio=%.4f target_s=0.6\n", a, b, a / b }'

# the suite, alternating root and rootless rounds
rt=() ut=()
for round in 1 2 3; do
  rt+=("$(suite_seconds bench/rootless.sh "$out" "root$round" --db "$out/root.db" scenarios/seeds)")
  start=$(date +%s%N)
  if ! as_user fl/build/bin/faultline run -q --out "out$round" --db rl.db fl/scenarios/seeds >"$out/rl$round.txt" 2>&1; then
    echo "bench/rootless.sh: the suite failed rootless (round $round):" >&2
    tail -n 30 "$out/rl$round.txt" >&2
    exit 1
  fi
  end=$(date +%s%N)
  ut+=("$(awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e9 }')")
  echo "bench/rootless.sh: round $round: seed suite as root ${rt[-1]} s, rootless ${ut[-1]} s" >&2
done
r=$(median3 "${rt[@]}")
u=$(median3 "${ut[@]}")
awk -v a="$u" -v b="$r" 'BEGIN { printf "BENCH name=seed_suite_wall_rootless value=%s unit=s baseline=seed_suite_wall_root baseline_value=%s ratio=%.4f target_ratio=1.3\n", a, b, a / b }'

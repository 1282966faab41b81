#!/usr/bin/env bash
# bench/netem.sh: the userspace link emulator's cost (netem/emu.h).
#   netem_delay0_throughput  TCP throughput (iperf3, 4 s) from host a to host b
#                            of a `faultline run` while a link fault with
#                            delay 0ms (both ways) sends every packet through
#                            the emulator, vs the same run without the fault.
#                            value and baseline_value in Mbit/s, ratio = value /
#                            baseline.  NETEM_BENCH_ROUNDS rounds (default 3)
#                            of each, alternating; best of each, every round on
#                            stderr.
#   netem_delay_{1,10,100}ms_{p99,max}
#                            one-way latency of UDP datagrams (one per ms)
#                            between two hosts through a link fault with
#                            delay 1ms, 10ms +- 5ms, 100ms (build/bin/
#                            netem-lat-bench: the kernel's receive time of
#                            each, so the receiver's wake-up is not counted).
#                            value = p99 or maximum in ms, baseline = the
#                            configured bound (delay + jitter), ratio =
#                            value / bound; no_fault_* is the same path
#                            without the fault, measured first.  Goal (issue
#                            24): p99 <= bound + max(0.5 ms, 5%), max <= that
#                            + 2 ms.  timer_late_p99/max: the machine's
#                            own floor in the same run (how late a thread at
#                            the emulator's priority wakes from a 1 ms sleep;
#                            on an idle VM a halted vCPU's wake-up).  Then
#                            again beside two busy loops (names ending _hogs).
set -euo pipefail
cd "$(dirname "$0")/.."
fl=$PWD/build/bin/faultline
rounds=${NETEM_BENCH_ROUNDS:-3}
W=$(mktemp -d /tmp/fl-bench-netem.XXXXXX)
trap 'rm -rf "$W"' EXIT

cat >"$W/iperf_tx.py" <<'PY'
import json, subprocess, sys, time
bin_dir = sys.argv[1]
subprocess.run([bin_dir + "/faultline", "emit", "--sync", "tx.go"], check=True)
deadline = time.monotonic() + 20
while True:   # until the server listens
    p = subprocess.run(["iperf3", "-c", "b", "-p", "5201", "-t", "4", "-J"], capture_output=True, text=True)
    if p.returncode == 0:
        break
    if time.monotonic() > deadline:
        sys.exit("iperf3 never connected: " + p.stdout[-300:] + p.stderr[-300:])
    time.sleep(0.05)
mbit = int(json.loads(p.stdout)["end"]["sum_received"]["bits_per_second"] / 1e6)
print(f"mbit={mbit}", flush=True)
subprocess.run([bin_dir + "/faultline", "emit", "netem.iperf", f"mbit={mbit}"], check=True)
PY
scenario() {   # name, fault line
  cat >"$W/$1.yaml" <<Y
name: bench-netem-$1
timeout: 60s
hosts: [a, b]
cluster:
  rx: [b]
  tx: [a]
run:
  rx: {command: "iperf3 -s -1 -p 5201"}
  tx: {command: "python3 {scenario_dir}/iperf_tx.py {bin}"}
faults: $2
expect:
  all:
    all: {exit: 0}
Y
}
scenario plain "[]"
scenario delay0 "[{after: {event: tx.go}, link: {hosts: [a, b], delay: 0ms}}]"

measure() {
  rm -f "$W/fl.db"
  "$fl" run -q --db "$W/fl.db" --out "$W/out" "$W/$1.yaml" >"$W/run.log" 2>&1 ||
    { echo "bench/netem.sh: faultline run $1 failed: $(tail -5 "$W/run.log")" >&2; return 1; }
  sqlite3 "$W/fl.db" "SELECT attrs FROM events WHERE kind='netem.iperf'" | sed -n 's/.*mbit=\([0-9]*\).*/\1/p'
}
best_p=0 best_d=0
for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then p=$(measure plain); d=$(measure delay0); else d=$(measure delay0); p=$(measure plain); fi
  echo "bench/netem.sh: round $r: no fault $p Mbit/s, delay 0ms through the emulator $d Mbit/s" >&2
  [ "$p" -gt "$best_p" ] && best_p=$p
  [ "$d" -gt "$best_d" ] && best_d=$d
done
awk -v v="$best_d" -v b="$best_p" \
  'BEGIN { printf "BENCH name=netem_delay0_throughput value=%s unit=mbit_per_s baseline=iperf3_no_fault baseline_value=%s ratio=%.3f\n", v, b, v / b }'

lat() {
  build/bin/netem-lat-bench 1 0 3000 1000
  build/bin/netem-lat-bench 10 5 2000 1000
  build/bin/netem-lat-bench 100 0 2000 1000
}
lat
hogs=()
for _ in 1 2; do (while :; do :; done) & hogs+=($!); done
trap 'kill "${hogs[@]}" 2>/dev/null; rm -rf "$W"' EXIT
NETEM_LAT_TAG=_hogs lat
kill "${hogs[@]}"

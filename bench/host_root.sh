#!/usr/bin/env bash
# bench/host_root.sh: what a host's root of its own (an overlay of the
# machine's root whose upper layer lies on the run's tmpfs, harness/sys/host.c)
# costs a program's first writes.  Two BENCH lines (format of bench/run):
#   host_root_first_write  creating a file and writing 4 KiB into it (open,
#                          write, close) in a directory of the host's own
#                          layer (/var/tmp: the machine's directory, copied up
#                          at the first file) vs the same in the host's /tmp
#                          (a directory on the run's tmpfs, no overlay)
#   host_root_copy_up      the first write (1 byte appended) to a file the
#                          machine has (the overlay copies it up whole: 16 KiB
#                          here) vs the same to a file of 16 KiB on the
#                          host's /tmp
# Microseconds per file, the median of 300 files timed one by one inside the
# host (python3, perf_counter_ns); the best of BENCH_ROOT_ROUNDS runs
# (default 3).  Needs root (faultline run) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
FL=$PWD/build/bin/faultline
[ -x "$FL" ] || { echo "bench/host_root.sh: build faultline first (make)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench/host_root.sh: needs python3" >&2; exit 1; }
W=$(mktemp -d /tmp/fl-bench-root.XXXXXX)
# files the machine has, for the copy-up: on its root filesystem (not under
# /tmp, which each host has its own of), made here, the same for every run
L=$(mktemp -d /var/tmp/fl-bench-root.XXXXXX)
trap 'rm -rf "$W" "$L"' EXIT INT TERM HUP
N=300
for i in $(seq $N); do head -c 16384 /dev/zero >"$L/f$i"; done

cat >"$W/firstwrite.py" <<'PY'
import os, statistics, subprocess, sys, time
bin_dir, lower, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
buf = b"x" * 4096
def create(d):
    os.makedirs(d, exist_ok=True)
    out = []
    for i in range(n):
        t = time.perf_counter_ns()
        fd = os.open(f"{d}/f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, buf)
        os.close(fd)
        out.append(time.perf_counter_ns() - t)
    return statistics.median(out) / 1000
def append(files):
    out = []
    for f in files:
        t = time.perf_counter_ns()
        fd = os.open(f, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"y")
        os.close(fd)
        out.append(time.perf_counter_ns() - t)
    return statistics.median(out) / 1000
layer = create("/var/tmp/fl-bench-root")
tmp = create("/tmp/fl-bench-root")
for i in range(n):   # files of the host's /tmp as big as the machine's
    with open(f"/tmp/fl-bench-root/g{i}", "wb") as f:
        f.write(b"\0" * 16384)
up = append([f"{lower}/f{i + 1}" for i in range(n)])
tmp_up = append([f"/tmp/fl-bench-root/g{i}" for i in range(n)])
subprocess.run([bin_dir + "/faultline", "emit", "bench.root", f"layer={layer:.2f}", f"tmp={tmp:.2f}",
                f"up={up:.2f}", f"tmp_up={tmp_up:.2f}"], check=True)
PY
cat >"$W/root.yaml" <<Y
name: bench-host-root
timeout: 60s
hosts: [a]
cluster: {node: [a]}
run:
  node: {command: "python3 {scenario_dir}/firstwrite.py {bin} $L $N"}
expect:
  all:
    all: {exit: 0}
Y
best_l= best_t= best_u= best_tu=
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b + 0 < a + 0) ? b : a }'; }
for r in $(seq "${BENCH_ROOT_ROUNDS:-3}"); do
  rm -f "$W/fl.db"
  "$FL" run -q --db "$W/fl.db" --out "$W/out" "$W/root.yaml" >"$W/run.log" 2>&1 ||
    { echo "bench/host_root.sh: faultline run failed: $(tail -5 "$W/run.log")" >&2; exit 1; }
  a=" $(sqlite3 "$W/fl.db" "SELECT attrs FROM events WHERE kind='bench.root'")"
  get() { echo "$a" | sed -n "s/.*[^_a-z]$1=\([0-9.]*\).*/\1/p"; }
  l=$(get layer) t=$(get tmp) u=$(get up) tu=$(get tmp_up)
  echo "bench/host_root.sh: round $r: new 4 KiB file ${l} us on the layer, ${t} us on /tmp;" \
       "first write to a 16 KiB file ${u} us on the machine's (copy-up), ${tu} us on /tmp" >&2
  best_l=$(min "$best_l" "$l") best_t=$(min "$best_t" "$t")
  best_u=$(min "$best_u" "$u") best_tu=$(min "$best_tu" "$tu")
done
awk -v v="$best_l" -v b="$best_t" 'BEGIN {
  printf "BENCH name=host_root_first_write value=%s unit=us baseline=host_tmp_first_write baseline_value=%s ratio=%.3f\n", v, b, v / b }'
awk -v v="$best_u" -v b="$best_tu" 'BEGIN {
  printf "BENCH name=host_root_copy_up value=%s unit=us baseline=host_tmp_append baseline_value=%s ratio=%.3f\n", v, b, v / b }'

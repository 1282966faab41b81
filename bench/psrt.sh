#!/usr/bin/env bash
# bench/psrt.sh: psrt's figures, one BENCH line each (format of bench/run):
#   ps_sparse_updates_per_core  sparse SGD updates/s on one core of a ps (existing
#                               rows, random order) vs random updates of a plain
#                               array of the same size (the memory-bound ceiling)
#   ps_sparse_push_10m          one worker pushes 10M (uint64, float32) pairs over
#   ps_sparse_pull_10m          2 ps on loopback (SGD applied on push), then pulls
#                               them back (ms) vs sending the same bytes to the
#                               same ps tasks, discarded there.  5 pushes on
#                               each of PSRT_BENCH_SPARSE_ROUNDS (default 3)
#                               pairs of fresh ps tasks: the push figure is
#                               the later 4 (warm: tables cleared by init,
#                               their memory kept), the pull and transfer
#                               figures all 5; median in each round, median
#                               of the rounds.  The push is streamed (split
#                               and sent piece by piece); the same push split
#                               whole first and sent as one message per ps is
#                               measured too (first round), printed on stderr
#                               only, for comparison
#   ps_sparse_push_10m_cold     the first push of each round alone (fresh ps
#                               tasks: tables for 2^16 rows, no memory faulted
#                               in yet; the driver's own split buffers are
#                               touched before it), median of the rounds,
#                               vs the warm figure (ps_sparse_push_10m)
#   ps_table_grow_max_pause     the longest single insert into a ps's table
#                               growing from 2^17 slots to 10M keys (ms; psrt
#                               bench grow: each insert's least time over 3
#                               runs, so that preemptions drop out) vs one
#                               copy of the final entry array (256 MiB) into
#                               fresh memory, the least a rehash of the whole
#                               table at once would pause it
#   ps_dense_pushpull           dense pull+push between a worker and 2 ps in two
#                               network namespaces joined by a veth pair (Gbit/s)
#                               vs iperf3 between the same namespaces; loopback
#                               for both when namespaces cannot be made here.
#                               PSRT_BENCH_ROUNDS rounds (default 3) of iperf3
#                               and psrt (2 s each, alternating order); best of
#                               each, every round on stderr
#   ckpt_robust_save_1g         robust save of a 1 GiB model over 4 ps.  A save
#                               makes 2 GiB durable: every shard on its ps
#                               (<train_dir>/ps<i>/) and the whole bundle on the
#                               chief, and here every "host" is a directory on
#                               the one disk of this machine.  So the like-for-
#                               like baseline is dd_write_2g_fsync: dd writing
#                               the same 2 GiB (bs=8M, conv=fsync) to that disk.
#                               value and baseline_value are durable MiB/s (2048
#                               MiB / seconds); the ratio is dd's time over the
#                               save's.  The save's ratio against dd of 1 GiB
#                               (the model's size; half the bytes) is printed on
#                               stderr.  PSRT_BENCH_ROUNDS rounds (default 3)
#                               of dd 2 GiB, dd 1 GiB and the save, in an order
#                               rotating between rounds, each after syncfs;
#                               best round of each (the shared virtual disk is
#                               bimodal: see bench/bundle.sh), every round on
#                               stderr.  The save timed is the first one of a
#                               fresh chief (its buffers not yet allocated);
#                               the ps tasks keep running across rounds, as
#                               they do across the saves of a training run.
#   disk_write_2g_parallel_direct
#                               what this disk allows any save that makes
#                               2 GiB durable: 8 dd writers of 256 MiB each
#                               at once (oflag=direct, conv=fsync), in the
#                               same rounds, vs dd writing 1 GiB with fsync.
#                               Its ratio is the most a replicated save of
#                               the 1 GiB model can reach against dd of 1 GiB
#                               here; the save's own ratio against dd of 1 GiB
#                               is the next line
#   ckpt_robust_save_1g_vs_dd_1g
#                               the save again, as model MiB/s (1024 MiB over
#                               its seconds), vs dd writing 1 GiB with fsync
#   ckpt_robust_save_1g_ps_disks_elsewhere
#                               the same save with the ps tasks' shards on
#                               tmpfs, standing for their own machines' disks
#                               (written in parallel on a real cluster), so the
#                               disk here takes the chief's 1 GiB bundle only:
#                               the critical path of a save across hosts, vs
#                               dd writing 1 GiB (conv=fsync) to that disk
#   ckpt_robust_restore_1g      robust restore of it by a new chief (each ps
#                               from its own copy, crc-checked; the files are
#                               dropped from the page cache first) vs dd
#                               reading a 1 GiB file from the disk (O_DIRECT).
#                               The ps tasks are the ones that saved, as when
#                               a chief restarts.  PSRT_BENCH_ROUNDS rounds
#                               of both, order alternating; best of each
# The namespaces are made with `ip -n` (the veth is created inside the first
# namespace with its peer in the second: nothing touches the root namespace)
# and removed, with every process started here, by the EXIT trap.
set -euo pipefail
cd "$(dirname "$0")/.."
B=$PWD/build/bin/psrt
[ -x "$B" ] || { echo "bench/psrt.sh: build psrt first (make)" >&2; exit 1; }
W=$(mktemp -d /tmp/psrt-bench.XXXXXX)
pids=()
NS_A="psrtb-a-$$"
NS_B="psrtb-b-$$"
ns_made=0
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "$ns_made" = 1 ]; then
    ip netns del "$NS_A" 2>/dev/null || true
    ip netns del "$NS_B" 2>/dev/null || true
  fi
  rm -rf "$W" "${SHM:-}"
}
trap cleanup EXIT

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { print b - a }'; } # seconds since $1
bench() { # name value unit baseline baseline_value
  awk -v n="$1" -v v="$2" -v u="$3" -v b="$4" -v bv="$5" 'BEGIN {
    printf "BENCH name=%s value=%.6g unit=%s baseline=%s baseline_value=%.6g ratio=%.4f\n",
           n, v, u, b, bv, (bv > 0 ? v / bv : 0) }'
}
kv() { # key line -> value
  echo "$2" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# start_ps DIR TASK NPS "PREFIX" FLAGS... ; sets PORT (read from its log)
start_ps() {
  local dir=$1 task=$2 nps=$3 prefix=$4; shift 4
  local hosts; hosts=$(printf '127.0.0.1:0,%.0s' $(seq "$nps")); hosts=${hosts%,}
  mkdir -p "$W/$dir"
  (cd "$W/$dir" && exec $prefix "$B" --job_name=ps --task_index="$task" --ps_hosts="$hosts" \
      --worker_hosts=127.0.0.1:1 "$@" >"$W/$dir.log" 2>&1) &
  pids+=($!)
  for _ in $(seq 500); do
    PORT=$(grep -o 'on port [0-9]*' "$W/$dir.log" 2>/dev/null | awk '{print $3}') || true
    [ -n "${PORT:-}" ] && return 0
    sleep 0.01
  done
  echo "bench/psrt.sh: ps $dir did not start: $(cat "$W/$dir.log")" >&2
  return 1
}
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}

only=${PSRT_BENCH_ONLY:-sparse,dense,robust}   # a subset, for development

# ---- sparse: one core, then 10M pairs over 2 ps --------------------------
if [[ ,$only, == *,sparse,* ]]; then
line=$("$B" bench table --keys=5000000)
bench ps_sparse_updates_per_core "$(kv update_per_s "$line")" updates_per_s \
  random_array_update "$(kv array_update_per_s "$line")"

# fresh ps tasks every round: its first push meets tables not grown yet
cold=() warm=() pull=() sink=()
for r in $(seq "${PSRT_BENCH_SPARSE_ROUNDS:-3}"); do
  start_ps s0 0 2 "" --model=sparse_lr --optimizer=sgd; p0=$PORT
  start_ps s1 1 2 "" --model=sparse_lr --optimizer=sgd; p1=$PORT
  line=$("$B" bench sparse --ps_hosts=127.0.0.1:$p0,127.0.0.1:$p1 --pairs=10000000 --reps=5)
  cold+=("$(kv cold_push_ms "$line")") warm+=("$(kv warm_push_ms "$line")")
  pull+=("$(kv pull_ms "$line")") sink+=("$(kv transfer_ms "$line")")
  echo "bench/psrt.sh: sparse round $r: first push ${cold[-1]} ms, later pushes ${warm[-1]} ms" \
       "(median of 4), pull ${pull[-1]} ms, transfer ${sink[-1]} ms" >&2
  if [ "$r" = 1 ]; then
    whole=$("$B" bench sparse --ps_hosts=127.0.0.1:$p0,127.0.0.1:$p1 --pairs=10000000 --reps=5 --stream=0)
    echo "bench/psrt.sh: push of 10M pairs streamed ${warm[-1]} ms; split whole first, then sent: $(kv push_ms "$whole") ms" >&2
  fi
  stop_all
done
bench ps_sparse_push_10m "$(median "${warm[@]}")" ms transfer_same_bytes "$(median "${sink[@]}")"
bench ps_sparse_push_10m_cold "$(median "${cold[@]}")" ms ps_sparse_push_10m "$(median "${warm[@]}")"
bench ps_sparse_pull_10m "$(median "${pull[@]}")" ms transfer_same_bytes "$(median "${sink[@]}")"
line=$("$B" bench grow --keys=10000000 --runs=3)
echo "bench/psrt.sh: table growth: $line" >&2
bench ps_table_grow_max_pause "$(kv max_insert_ms "$line")" ms copy_whole_table "$(kv copy_table_ms "$line")"
fi

# ---- dense: two hosts -----------------------------------------------------
if [[ ,$only, == *,dense,* ]]; then
addr_b=127.0.0.1
in_a=""
in_b=""
if ip netns add "$NS_A" 2>/dev/null && ip netns add "$NS_B" 2>/dev/null; then
  ns_made=1
  if ip -n "$NS_A" link add veth-a type veth peer name veth-b netns "$NS_B" &&
     ip -n "$NS_A" addr add 10.201.0.1/24 dev veth-a &&
     ip -n "$NS_B" addr add 10.201.0.2/24 dev veth-b &&
     ip -n "$NS_A" link set veth-a up && ip -n "$NS_B" link set veth-b up &&
     ip -n "$NS_A" link set lo up && ip -n "$NS_B" link set lo up; then
    addr_b=10.201.0.2
    in_a="ip netns exec $NS_A"
    in_b="ip netns exec $NS_B"
  fi
fi
[ -z "$in_a" ] && echo "bench/psrt.sh: no network namespaces here: dense figures on loopback" >&2
$in_b iperf3 -s -p 5299 >"$W/iperf-s.log" 2>&1 &
pids+=($!)
# the client must not try before the server listens (it said nothing and
# failed the whole bench when it did)
iperf_listens() { [ -n "$($in_b ss -Hltn 'sport = :5299')" ]; }
for _ in $(seq 500); do
  iperf_listens && break
  sleep 0.01
done
iperf_listens ||
  { echo "bench/psrt.sh: iperf3 -s did not start: $(cat "$W/iperf-s.log")" >&2; exit 1; }
start_ps d0 0 2 "$in_b" --model=bench_dense --dense_floats=4194304; d0=$PORT
start_ps d1 1 2 "$in_b" --model=bench_dense --dense_floats=4194304; d1=$PORT
# rounds of iperf3 and psrt, the order alternating; best of each (other
# work on this shared machine only ever slows a round down)
ipg=() psg=()
m_iperf() {
  local out
  out=$($in_a iperf3 -c "$addr_b" -p 5299 -t 2 -f g 2>&1) ||
    { echo "bench/psrt.sh: iperf3 -c $addr_b -p 5299 failed: $out" >&2; return 1; }
  ipg+=("$(awk '/receiver/ { for (i = 1; i <= NF; i++) if ($i == "Gbits/sec") print $(i-1) }' <<<"$out")")
}
m_psrt() {
  psg+=("$(kv gbit_per_s "$($in_a "$B" bench dense --ps_hosts=$addr_b:$d0,$addr_b:$d1 \
    --dense_floats=4194304 --secs=2)")")
}
for r in $(seq "${PSRT_BENCH_ROUNDS:-3}"); do
  if [ $((r % 2)) = 1 ]; then m_iperf; m_psrt; else m_psrt; m_iperf; fi
  echo "bench/psrt.sh: dense round $r: iperf3 ${ipg[-1]:-?} Gbit/s, psrt ${psg[-1]} Gbit/s" >&2
done
stop_all
top() { printf '%s\n' "$@" | sort -g | tail -n 1; }
bench ps_dense_pushpull "$(top "${psg[@]}")" gbit_per_s iperf3 "$(top "${ipg[@]}")"
fi

# ---- robust checkpoint of 1 GiB over 4 ps -----------------------------------
if [[ ,$only, == *,robust,* ]]; then
rounds=${PSRT_BENCH_ROUNDS:-3}
settle() { sync -f "$W"; }
# the restore's baseline reads this 1 GiB file (O_DIRECT), in rounds with
# the restores below
dd if=/dev/zero of="$W/dd_read.bin" bs=8M count=128 conv=fsync status=none
hosts=""
for i in 0 1 2 3; do
  start_ps "r$i" "$i" 4 "" --model=bench_dense --dense_floats=67108864 --checkpoint_protocol=robust \
    --train_dir=./train_logs
  hosts="$hosts,127.0.0.1:$PORT"
done
mkdir -p "$W/chief"
dd2=() dd1=() sv=() ceil=()
m_ceil() { # 2 GiB by 8 parallel O_DIRECT writers -> appends seconds to ceil
  settle; local t0 j w=(); t0=$(now)
  for j in 0 1 2 3 4 5 6 7; do
    dd if=/dev/zero of="$W/ceil$j.bin" bs=8M count=32 oflag=direct conv=fsync status=none &
    w+=($!)
  done
  wait "${w[@]}" # these writers only: the ps tasks run in the background too
  ceil+=("$(since "$t0")"); rm -f "$W"/ceil?.bin
}
m_dd() { # MiB -> appends seconds to dd2 or dd1
  settle; local t0 s; t0=$(now)
  dd if=/dev/zero of="$W/dd.bin" bs=8M count=$(($1 / 8)) conv=fsync status=none
  s=$(since "$t0"); rm -f "$W/dd.bin"
  if [ "$1" = 2048 ]; then dd2+=("$s"); else dd1+=("$s"); fi
}
m_save() {
  rm -rf "$W/chief/train_logs" "$W"/r?/train_logs; settle
  line=$(cd "$W/chief" && "$B" bench robust --phase=save --ps_hosts="${hosts#,}" \
    --dense_floats=67108864 --train_dir=./train_logs)
  sv+=("$(kv save_s "$line")")
}
# the order rotates from round to round: whatever runs first meets the disk
# as the previous round left it
for r in $(seq "$rounds"); do
  case $((r % 3)) in
    1) m_dd 2048; m_save; m_dd 1024; m_ceil ;;
    2) m_save; m_ceil; m_dd 1024; m_dd 2048 ;;
    0) m_ceil; m_dd 1024; m_dd 2048; m_save ;;
  esac
  echo "bench/psrt.sh: robust round $r: dd 2 GiB ${dd2[-1]} s, dd 1 GiB ${dd1[-1]} s," \
       "8 parallel O_DIRECT writers of 2 GiB ${ceil[-1]} s, save ${sv[-1]} s" \
       "(second save $(kv second_save_s "$line") s)" >&2
done
best() { printf '%s\n' "$@" | sort -g | head -n 1; }
mib=$(awk -v b="$(kv bytes "$line")" 'BEGIN { print b / 1048576 }')
echo "bench/psrt.sh: robust save: best ${sv[*]} -> $(best "${sv[@]}") s (median $(median "${sv[@]}")), dd 2 GiB best $(best "${dd2[@]}") s (median $(median "${dd2[@]}")), dd 1 GiB best $(best "${dd1[@]}") s, 8 parallel O_DIRECT writers of 2 GiB best $(best "${ceil[@]}") s; ratio vs dd 1 GiB: $(awk -v a="$(best "${dd1[@]}")" -v b="$(best "${sv[@]}")" 'BEGIN { printf "%.3f", a / b }') (the disk allows at most $(awk -v a="$(best "${dd1[@]}")" -v b="$(best "${ceil[@]}")" 'BEGIN { printf "%.3f", a / b }') for 2 GiB)" >&2
# a restore after a restart reads from the disk: drop the saved files from the
# page cache (they are ours; fsynced, so clean) and compare with O_DIRECT dd;
# rounds as for the save, order alternating, best of each
rs=() dr=()
m_read() {
  local t0; t0=$(now)
  dd if="$W/dd_read.bin" of=/dev/null bs=8M iflag=direct status=none
  dr+=("$(since "$t0")")
}
m_restore() {
  find "$W" -name 'model.ckpt-*' -type f -exec dd if={} iflag=nocache count=0 status=none \;
  local l; l=$(cd "$W/chief" && "$B" bench robust --phase=restore --ps_hosts="${hosts#,}" \
    --dense_floats=67108864 --train_dir=./train_logs)
  rs+=("$(kv restore_s "$l")")
}
for r in $(seq "$rounds"); do
  if (( r % 2 )); then m_read; m_restore; else m_restore; m_read; fi
  echo "bench/psrt.sh: robust restore round $r: dd read 1 GiB ${dr[-1]} s, restore ${rs[-1]} s" >&2
done
rm -f "$W/dd_read.bin"
stop_all
bench ckpt_robust_save_1g "$(awk -v m="$mib" -v s="$(best "${sv[@]}")" 'BEGIN { print 2 * m / s }')" \
  durable_MiB_per_s dd_write_2g_fsync "$(awk -v s="$(best "${dd2[@]}")" 'BEGIN { print 2048 / s }')"
bench disk_write_2g_parallel_direct "$(awk -v s="$(best "${ceil[@]}")" 'BEGIN { print 1024 / s }')" \
  model_MiB_per_s dd_write_1g_fsync "$(awk -v s="$(best "${dd1[@]}")" 'BEGIN { print 1024 / s }')"
bench ckpt_robust_save_1g_vs_dd_1g "$(awk -v m="$mib" -v s="$(best "${sv[@]}")" 'BEGIN { print m / s }')" \
  model_MiB_per_s dd_write_1g_fsync "$(awk -v s="$(best "${dd1[@]}")" 'BEGIN { print 1024 / s }')"
bench ckpt_robust_restore_1g "$(awk -v m="$mib" -v s="$(best "${rs[@]}")" 'BEGIN { print m / s }')" \
  MiB_per_s dd_read "$(awk -v s="$(best "${dr[@]}")" 'BEGIN { print 1024 / s }')"

# The same save with the ps tasks' disks elsewhere, as on separate machines:
# their shards go to tmpfs (standing for the other machines' disks, written
# in parallel), so this machine's disk takes the chief's 1 GiB bundle only,
# the critical path of a save across hosts.  Against dd writing 1 GiB with
# fsync to that disk; same rounds and rotation as above.
SHM=$(mktemp -d /dev/shm/psrt-bench.XXXXXX)
hosts=""
for i in 0 1 2 3; do
  start_ps "o$i" "$i" 4 "" --model=bench_dense --dense_floats=67108864 --checkpoint_protocol=robust \
    --train_dir="$SHM/o$i/train_logs"
  hosts="$hosts,127.0.0.1:$PORT"
done
dd1=() sv=()
for r in $(seq "$rounds"); do
  rm -rf "$SHM"/o?/train_logs
  if (( r % 2 )); then m_dd 1024; m_save; else m_save; m_dd 1024; fi
  echo "bench/psrt.sh: robust, ps disks elsewhere, round $r: dd 1 GiB ${dd1[-1]} s, save ${sv[-1]} s" >&2
done
stop_all
rm -rf "$SHM"
bench ckpt_robust_save_1g_ps_disks_elsewhere \
  "$(awk -v m="$mib" -v s="$(best "${sv[@]}")" 'BEGIN { print m / s }')" \
  durable_MiB_per_s dd_write_1g_fsync "$(awk -v s="$(best "${dd1[@]}")" 'BEGIN { print 1024 / s }')"
fi

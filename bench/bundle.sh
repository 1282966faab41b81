#!/usr/bin/env bash
# bench/bundle.sh: write and read a 1 GiB tensor bundle with the checkpoint
# library (build/bin/ckpt-bench), against dd writing and reading the same
# number of bytes, in the same run.  Prints two lines on stdout:
#   BENCH name=bundle_write_1g value=<MB/s> unit=MB/s baseline=dd_write_1g baseline_value=<MB/s> ratio=<v/b>
#   BENCH name=bundle_read_1g  ...                    baseline=dd_read_1g  ...
# MB = 10^6 bytes.  Method (details on stderr):
#   write: dd if=/dev/zero bs=8M conv=fsync vs. ckpt-bench write (16 float
#          tensors of 64 MiB from memory, crc32c, finish with CKPT_SYNC: data
#          and index fsynced, renamed, directory fsynced);
#   read:  cold cache for both: each file is evicted from the page cache just
#          before it is read (dd iflag=nocache count=0 = posix_fadvise
#          DONTNEED on that file only, checked with fincore; the global
#          drop_caches is not used so other work on the machine keeps its
#          cache), then dd of=/dev/null bs=8M vs. ckpt-bench read (every
#          tensor read into memory and its crc32c checked).
# Each figure is the best of BUNDLE_BENCH_ROUNDS rounds (default 7), the
# order of dd and bundle alternating between rounds.  Best, not median: on
# this shared virtual disk every measurement, dd's and the bundle's alike,
# lands either near 300-900 or near 1700-3300 MB/s depending on what else
# the host is doing, so a median flips between the two clusters from run to
# run; interference only ever slows a round down, so the best round of each
# side is the figure that compares.  Every round and the medians are printed
# on stderr.  The files live in a
# temporary directory under ${TMPDIR:-/tmp}, removed at exit (also on error).
set -euo pipefail
cd "$(dirname "$0")/.."

mib=${BUNDLE_BENCH_MIB:-1024}
rounds=${BUNDLE_BENCH_ROUNDS:-7}
bin=build/bin/ckpt-bench
[ -x "$bin" ] || make -s "$bin" >&2
bytes=$((mib * 1024 * 1024))
dir=$(mktemp -d "${TMPDIR:-/tmp}/fl-bench-bundle.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM HUP

now() { date +%s.%N; }
rate() { awk -v b="$bytes" -v a="$1" -v z="$2" 'BEGIN { printf "%.1f", b / (z - a) / 1e6 }'; }
evict() {
  local f
  for f in "$@"; do
    dd if="$f" iflag=nocache count=0 status=none
    if command -v fincore >/dev/null; then
      local res
      res=$(fincore -nb -o RES "$f" 2>/dev/null | tr -d ' ' || echo "?")
      [ "$res" = 0 ] || echo "bench/bundle.sh: warning: $res bytes of $f still cached" >&2
    fi
  done
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
best() { printf '%s\n' "$@" | sort -g | tail -n 1; }

# The file system may be mounted with `discard`: removing the previous
# round's files queues TRIMs that would slow whichever write comes next.
# syncfs (sync -f) commits them, and any other dirty data, before each timed
# write, so both writes start from the same state.
settle() { sync -f "$dir"; }

dd_write() {
  local t0 t1
  settle
  t0=$(now)
  dd if=/dev/zero of="$dir/dd.bin" bs=8M count=$((mib / 8)) conv=fsync status=none
  t1=$(now)
  rate "$t0" "$t1"
}
dd_read() {
  local t0 t1
  evict "$dir/dd.bin"
  t0=$(now)
  dd if="$dir/dd.bin" of=/dev/null bs=8M status=none
  t1=$(now)
  rate "$t0" "$t1"
}
bundle_write() { settle; "$bin" write "$dir/bundle" "$mib" 16 2>>"$dir/log"; }
bundle_read() {
  evict "$dir/bundle.index" "$dir/bundle.data-00000-of-00001"
  "$bin" read "$dir/bundle" 2>>"$dir/log"
}

dw=() bw=() dr=() br=()
for ((i = 0; i < rounds; i++)); do
  rm -f "$dir"/dd.bin "$dir"/bundle.*
  if ((i % 2 == 0)); then
    dw+=("$(dd_write)"); bw+=("$(bundle_write)")
    dr+=("$(dd_read)"); br+=("$(bundle_read)")
  else
    bw+=("$(bundle_write)"); dw+=("$(dd_write)")
    br+=("$(bundle_read)"); dr+=("$(dd_read)")
  fi
  echo "bench/bundle.sh: round $((i + 1)): write bundle ${bw[-1]} dd ${dw[-1]}; read bundle ${br[-1]} dd ${dr[-1]} MB/s" >&2
done

line() {
  awk -v n="$1" -v v="$2" -v bn="$3" -v b="$4" \
    'BEGIN { printf "BENCH name=%s value=%s unit=MB/s baseline=%s baseline_value=%s ratio=%.3f\n", n, v, bn, b, v / b }'
}
echo "bench/bundle.sh: medians: write bundle $(median "${bw[@]}") dd $(median "${dw[@]}");" \
  "read bundle $(median "${br[@]}") dd $(median "${dr[@]}") MB/s" >&2
line bundle_write_1g "$(best "${bw[@]}")" dd_write_1g "$(best "${dw[@]}")"
line bundle_read_1g "$(best "${br[@]}")" dd_read_1g "$(best "${dr[@]}")"

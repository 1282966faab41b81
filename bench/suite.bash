# bench/suite.bash: sourced by the benchmarks that time a whole suite of
# scenarios (seeds.sh, seeds_fs.sh, frameworks.sh); not a benchmark itself.
#
# suite_seconds NAME OUT LABEL ARGS...: one `faultline run -q ARGS`, its
#   output and runs in OUT/LABEL*; prints its wall time in seconds, or says
#   on stderr that the suite failed (the tail of its output) and exits 1.
# median3 A B C: the middle one.
suite_seconds() {
  local name=$1 out=$2 label=$3
  shift 3
  local start end
  start=$(date +%s%N)
  if ! build/bin/faultline run -q --out "$out/$label" "$@" >"$out/$label.txt" 2>&1; then
    echo "$name: the suite failed ($label):" >&2
    tail -n 30 "$out/$label.txt" >&2
    exit 1
  fi
  end=$(date +%s%N)
  awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e9 }'
}

median3() {
  printf '%s\n' "$@" | sort -g | sed -n 2p
}

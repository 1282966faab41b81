#!/usr/bin/env bash
# bench/merge.sh: `faultline runs merge` of 10 results databases of 1000
# runs each into a new one (issue 26: at most 2 s), against sqlite3 copying
# the same rows, in the same run.
#
# The inputs: 8 real runs (`faultline run` of scenarios/seeds/s001-2ps-3w,
# s004-relaunch-ps, scenarios/examples/tour and the test scenario
# event-unfired: checkpoint saves and restores, a relaunch, a partition, a
# fault that never fired; 36 events, 4 processes, 7 checks, 5 checkpoint
# operations a run on average) replicated with SQL into 10 databases x 1000
# runs, each run a copy of one of the 8 with every row of every table that
# refers to it, under a run id of its own (bench-KK-JJJJ-<real id>) and its
# own start time.  ~540,000 rows in all.
#
# Baseline: sqlite3 (the shell) copying the same rows from the same 10
# files into a database with the same schema and the settings the merge
# writes with (a rollback journal, synchronous NORMAL, no foreign key
# checked row by row, WAL mode again at the end), one transaction a
# file, with the least SQL that does it: INSERT ... SELECT of every table, run ids shifted by a constant,
# no comparison of runs both hold (there are none), no check of the inputs.
# That is what a merge cannot do with less; the ratio is what merging them
# right (checking every input first, mapping ids, comparing, counting)
# costs on top.  Each figure is the median of 3 rounds, the order of the two
# alternating; every round on stderr, with the load average.
# Prints: BENCH name=merge_10x1000_runs value=S unit=s baseline=sqlite3_insert_select
#         baseline_value=S ratio=R       (and the 2 s target on stderr)
set -euo pipefail
cd "$(dirname "$0")/.."
fl=build/bin/faultline
[ -x "$fl" ] || make -s "$fl" >&2
command -v sqlite3 >/dev/null || { echo "bench/merge.sh: needs sqlite3 (Debian: sqlite3)" >&2; exit 1; }
ndb=${MERGE_BENCH_DBS:-10}
nruns=${MERGE_BENCH_RUNS:-1000}
dir=$(mktemp -d "${TMPDIR:-/tmp}/fl-bench-merge.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM HUP

# ---- the 8 real runs ----
if ! $fl run -q --out "$dir/out" --db "$dir/tmpl.db" scenarios/seeds/s001-2ps-3w.yaml \
  scenarios/seeds/s004-relaunch-ps.yaml scenarios/examples/tour.yaml \
  harness/tests/scenarios/event-unfired.yaml >"$dir/run.txt" 2>&1; then
  echo "bench/merge.sh: the template runs failed:" >&2
  tail -n 20 "$dir/run.txt" >&2
  exit 1
fi
ntmpl=$(sqlite3 "$dir/tmpl.db" "SELECT count(*) FROM runs")

# ---- replicated: database k holds runs 1..nruns, each a copy of template (j % ntmpl) ----
cols() { # every column of table $1 but $2, comma-separated, prefixed by $3
  sqlite3 "$dir/tmpl.db" "SELECT group_concat('$3' || name, ', ') FROM pragma_table_info('$1') WHERE name <> '$2'"
}
children=$(sqlite3 "$dir/tmpl.db" "SELECT m.name FROM sqlite_schema m, pragma_foreign_key_list(m.name) f
  WHERE m.type = 'table' AND f.\"table\" = 'runs' AND f.\"from\" = 'run'")
runcols=$(cols runs id "")
runsel=$(cols runs id "r.")
version=$(sqlite3 "$dir/tmpl.db" 'PRAGMA user_version')
# every column list before the copies: a sqlite3 reading tmpl.db while the
# pipe's sqlite3 has it attached in a transaction may find it locked
declare -A ccols csel
for c in $children; do
  ccols[$c]=$(cols "$c" run "")
  csel[$c]=$(cols "$c" run x.)
done
sqlite3 "$dir/tmpl.db" ".schema" | grep -v '^CREATE TABLE sqlite_' >"$dir/schema.sql"
for ((k = 0; k < ndb; k++)); do
  db=$(printf '%s/in%02d.db' "$dir" "$k")
  {
    echo "PRAGMA journal_mode=WAL;"
    cat "$dir/schema.sql"
    echo "PRAGMA user_version=$version;"
    echo "ATTACH '$dir/tmpl.db' AS t; BEGIN;"
    echo "CREATE TEMP TABLE n AS WITH RECURSIVE c(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM c WHERE j < $nruns - 1) SELECT j FROM c;"
    echo "CREATE TEMP TABLE tr AS SELECT id AS tid, row_number() OVER (ORDER BY id) - 1 AS ti FROM t.runs;"
    echo "CREATE TEMP TABLE m AS SELECT n.j + 1 AS id, tr.tid FROM n JOIN tr ON tr.ti = n.j % $ntmpl;"
    sel=$runsel
    id="printf('bench-%02d-%04d-', $k, m.id) || r.run_id"
    at="r.started_at + ($k * $nruns + m.id) * 1000"
    sel=${sel/r.run_id/$id}
    sel=${sel/r.started_at/$at}
    echo "INSERT INTO runs(id, $runcols) SELECT m.id, $sel FROM m JOIN t.runs r ON r.id = m.tid ORDER BY m.id;"
    for c in $children; do
      echo "INSERT INTO $c(run, ${ccols[$c]}) SELECT m.id, ${csel[$c]} FROM m JOIN t.$c x ON x.run = m.tid ORDER BY m.id, x.rowid;"
    done
    echo "INSERT INTO scenario_texts SELECT * FROM t.scenario_texts;"
    echo "COMMIT;"
  } | sqlite3 "$db" >/dev/null
done
rows=0
for c in runs $children scenario_texts; do
  rows=$((rows + $(sqlite3 "$dir/in00.db" "SELECT count(*) FROM $c") * ndb))
done
echo "bench/merge.sh: $ndb databases x $nruns runs (copies of $ntmpl real runs), $rows rows, $(du -ch "$dir"/in*.db | tail -n 1 | cut -f1)" >&2
inputs=("$dir"/in*.db)

# ---- the timed parts ----
now() { date +%s%N; }
secs() { awk -v ns=$(($2 - $1)) 'BEGIN { printf "%.3f", ns / 1e9 }'; }
ours() {
  rm -f "$dir"/m.db*
  local t0 t1
  t0=$(now)
  $fl runs merge "$dir/m.db" "${inputs[@]}" >"$dir/merge.txt"
  t1=$(now)
  secs "$t0" "$t1"
}
base() {
  rm -f "$dir"/b.db*
  {
    echo "PRAGMA journal_mode=WAL;"
    cat "$dir/schema.sql"
  } | sqlite3 "$dir/b.db" >/dev/null
  local t0 t1 i=0 sql="PRAGMA journal_mode=DELETE; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=OFF;"
  for f in "${inputs[@]}"; do
    sql+="ATTACH '$f' AS s; BEGIN;"
    sql+="INSERT INTO runs(id, $runcols) SELECT id + $((i * nruns)), $(cols runs id "") FROM s.runs;"
    for c in $children; do
      sql+="INSERT INTO $c(run, $(cols "$c" run "")) SELECT run + $((i * nruns)), $(cols "$c" run "") FROM s.$c;"
    done
    sql+="INSERT OR IGNORE INTO scenario_texts SELECT * FROM s.scenario_texts; COMMIT; DETACH s;"
    i=$((i + 1))
  done
  sql+="PRAGMA journal_mode=WAL;"
  t0=$(now)
  sqlite3 "$dir/b.db" "$sql" >/dev/null
  t1=$(now)
  secs "$t0" "$t1"
}

o=() b=()
for round in 0 1 2; do
  if ((round % 2 == 0)); then
    o+=("$(ours)"); b+=("$(base)")
  else
    b+=("$(base)"); o+=("$(ours)")
  fi
  echo "bench/merge.sh: round $((round + 1)): merge ${o[-1]} s, sqlite3 ${b[-1]} s (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done
# both copied every row
for c in runs $children scenario_texts; do
  a=$(sqlite3 "$dir/m.db" "SELECT count(*) FROM $c")
  z=$(sqlite3 "$dir/b.db" "SELECT count(*) FROM $c")
  [ "$a" = "$z" ] || { echo "bench/merge.sh: $c: $a rows merged, $z copied by sqlite3" >&2; exit 1; }
done
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
mo=$(median "${o[@]}")
mb=$(median "${b[@]}")
awk -v a="$mo" 'BEGIN { printf "bench/merge.sh: target 2 s: %s\n", a <= 2 ? "met" : "missed" }' >&2
awk -v n="merge_${ndb}x${nruns}_runs" -v a="$mo" -v b="$mb" \
  'BEGIN { printf "BENCH name=%s value=%s unit=s baseline=sqlite3_insert_select baseline_value=%s ratio=%.3f\n", n, a, b, a / b }'

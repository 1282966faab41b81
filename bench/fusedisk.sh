#!/usr/bin/env bash
# bench/fusedisk.sh: the faultline filesystem (fusedisk/) against a plain
# tmpfs directory, in the same run (build/bin/fusedisk-bench): a sequential
# 1 GiB write + fsync in 1 MiB writes, and 10000 small files (create, write
# 4 KiB, fsync, close).  ratio = fusedisk's throughput / tmpfs's, best of 3
# rounds; cold_ratio the first round's.  Targets (issue 22): write >= 0.5,
# small files >= 0.3.  And the cost of one FUSE round trip (a stat() of a
# missing name: the kernel asks the server, which answers at once), the
# floor under the small files: each takes five round trips (getattr of the
# directory, lookup, create, write, fsync), so their ratio cannot pass
# (tmpfs's time per file) / (5 round trips) whatever the server does.
# Prints: BENCH name=fusedisk_write_1024 ..., name=fusedisk_small_files_10000
# ... and name=fusedisk_roundtrip (microseconds).
set -euo pipefail
cd "$(dirname "$0")/.."
build/bin/fusedisk-bench write 1024 3
build/bin/fusedisk-bench small 10000 3
build/bin/fusedisk-bench lookup 20000 3

#!/usr/bin/env bash
# bench/fusedisk.sh: the faultline filesystem (fusedisk/) against a plain
# tmpfs directory, in the same run (build/bin/fusedisk-bench): a sequential
# 1 GiB write + fsync in 1 MiB writes, and 10000 small files (create, write
# 4 KiB, fsync, close).  ratio = fusedisk's throughput / tmpfs's, best of 3
# rounds; cold_ratio the first round's.  Targets (issue 22): write >= 0.5,
# small files >= 0.3.
# Prints: BENCH name=fusedisk_write_1024 ... and name=fusedisk_small_files_10000 ...
set -euo pipefail
cd "$(dirname "$0")/.."
build/bin/fusedisk-bench write 1024 3
build/bin/fusedisk-bench small 10000 3

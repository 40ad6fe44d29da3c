#!/bin/sh
# bench/run.sh BUILD SF [options] - make bench: csq against native SQLite and
# DuckDB in one run (bench/run.py says what and how), then the loads of one
# CSV file (bench/import.py); /usr/bin/python3 because its sqlite3 module
# can load extensions. BENCH_ARGS adds run.py options:
#   make bench SF=1 BENCH_ARGS="--timeout 120 --suites tpch"
b="${1:-build}"; sf="${2:-0.1}"
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
# BENCH_ARGS is split into words on purpose: it holds several options
# shellcheck disable=SC2086
/usr/bin/python3 bench/run.py "$b" "$sf" $BENCH_ARGS "$@" || exit $?
# loading one CSV file: csq_import against .import and DuckDB (bench/import.py)
exec /usr/bin/python3 bench/import.py "$b" "$sf"

#!/bin/sh
# bench/run.sh BUILD SF [options] - make bench: csq against native SQLite and
# DuckDB in one run (bench/run.py says what and how; /usr/bin/python3 because
# its sqlite3 module can load extensions).
b="${1:-build}"; sf="${2:-0.1}"
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
exec /usr/bin/python3 bench/run.py "$b" "$sf" "$@"

#!/bin/sh
# bench/run.sh BUILD SF - make bench: csq against native SQLite in one run.
exec /usr/bin/python3 bench/run.py "${1:-build}" "${2:-0.1}"

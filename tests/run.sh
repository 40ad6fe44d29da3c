#!/bin/sh
# tests/run.sh - run every csq test and print one summary line:
#   N passed, N failed, N skipped
# Unit programs (build/tests/test_*) count one each (exit 0 pass, 77 skip);
# tests/layers.sh (the include rules of device/'s rooms) counts one;
# SQL-level suites (tests/sql/test_*.py, run by /usr/bin/python3, whose
# sqlite3 module can load extensions) count one per test function; the
# sqllogictest conformance sample counts one per file.
BUILD=${BUILD:-build}
PY=/usr/bin/python3
pass=0; fail=0; skip=0; failed=""
log=$(mktemp -d)
export CSQ_EXT="$(pwd)/$BUILD/csq.so"
export CSQ_BUILD="$(pwd)/$BUILD"
if [ -n "$SANITIZE" ]; then
  # the extension is loaded into python/sqlite3: preload the runtimes it needs
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi

for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  timeout 600 "$t" > "$log/$name.out" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS $name"
  elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "SKIP $name: $(tail -n 1 "$log/$name.out")"
  else fail=$((fail+1)); failed="$failed $name"; echo "FAIL $name (exit $rc)"
    # a sanitizer's report from its first line (its tail is only the legend)
    grep -m 1 -A 40 -E 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error:' "$log/$name.out" | sed 's/^/    /'
    tail -n 20 "$log/$name.out" | sed 's/^/    /'
  fi
done

# the layering of device/: no room includes a header of a higher one (one test)
if sh tests/layers.sh > "$log/layers.out" 2>&1; then pass=$((pass+1)); head -n 1 "$log/layers.out"
else fail=$((fail+1)); failed="$failed layers"; cat "$log/layers.out"; fi

for t in tests/sql/test_*.py; do
  [ -f "$t" ] || continue
  name=$(basename "$t" .py)
  timeout 1200 $PY tests/sql/harness.py "$t" > "$log/$name.out" 2>&1
  rc=$?
  grep -E '^(PASS|FAIL|SKIP) ' "$log/$name.out"
  p=$(grep -c '^PASS ' "$log/$name.out"); f=$(grep -c '^FAIL ' "$log/$name.out"); s=$(grep -c '^SKIP ' "$log/$name.out")
  pass=$((pass+p)); fail=$((fail+f)); skip=$((skip+s))
  if [ $f -gt 0 ]; then failed="$failed $name"; grep -A 15 '^FAIL ' "$log/$name.out" | grep -v '^PASS' | head -40 | sed 's/^/    /'; fi
  if [ $rc -ne 0 ] && [ $f -eq 0 ]; then fail=$((fail+1)); failed="$failed $name"; echo "FAIL $name (harness exit $rc)"; tail -n 20 "$log/$name.out" | sed 's/^/    /'; fi
done

# sqllogictest sample, every table rewritten into a csq table
SLT=../shared/conformance
if [ -f "$SLT/slt_run.py" ]; then
  # under the sanitizers select4 (index selection only, minutes of plain
  # scanning) is left to the plain run
  if [ -n "$SANITIZE" ]; then
    slt_files=$(find "$SLT/sqllogictest" -name '*.test' ! -name select4.test | sort)
  else
    slt_files="$SLT/sqllogictest"
  fi
  $PY "$SLT/slt_run.py" -j 2 --load "$BUILD/csq.so" --vtab-module csq $slt_files > "$log/slt.out" 2>&1
  rc=$?
  while read -r line; do
    case "$line" in
      TOTAL:*) echo "     $line" ;;
      *": "*" passed, "*" failed"*)
        f=$(echo "$line" | sed -E 's/.*passed, ([0-9]+) failed.*/\1/')
        if [ "$f" = 0 ]; then pass=$((pass+1)); echo "PASS slt ${line%%:*}"
        else fail=$((fail+1)); failed="$failed slt:${line%%:*}"; echo "FAIL slt $line"; fi ;;
    esac
  done < "$log/slt.out"
  if [ $rc -ne 0 ] && ! grep -q "failed" "$log/slt.out"; then
    fail=$((fail+1)); echo "FAIL slt (exit $rc)"; tail -n 20 "$log/slt.out"
  fi
  [ $rc -ne 0 ] && grep -B2 -A8 -m 10 'FAIL\|Error\|error' "$log/slt.out" | head -60
  # again with every filter forced onto the device (select4, which only
  # exercises index selection and takes minutes, is left to the first pass)
  files=$(find "$SLT/sqllogictest" -name '*.test' ! -name select4.test | sort)
  $PY "$SLT/slt_run.py" -j 2 --load "$BUILD/csq.so" --vtab-module csq --vtab-arg "pushdown='always'" \
    $files > "$log/slt2.out" 2>&1
  rc=$?
  f=$(sed -nE 's/^TOTAL: [0-9]+ passed, ([0-9]+) failed.*/\1/p' "$log/slt2.out")
  if [ $rc -eq 0 ] && [ "$f" = 0 ]; then pass=$((pass+1)); echo "PASS slt pushdown=always: $(grep ^TOTAL "$log/slt2.out")"
  else fail=$((fail+1)); failed="$failed slt-pushdown"; echo "FAIL slt pushdown=always (exit $rc)"; grep -v ' 0 failed' "$log/slt2.out" | head -30; fi
else
  skip=$((skip+1)); echo "SKIP sqllogictest: $SLT/slt_run.py not found"
fi

rm -rf "$log"
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]

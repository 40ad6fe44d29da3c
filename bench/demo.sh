#!/bin/sh
# bench/demo.sh BUILD - the main job (make demo): load TPC-H tables onto the
# database's default device with the stock sqlite3 shell's extension
# loading, run a few queries, and show the answers with the bytes that
# crossed the device boundary for each.
set -e
BUILD=${1:-build}
SF=${DEMO_SF:-0.05}
DIR=$(mktemp -d /tmp/csq-demo.XXXXXX)
DB=$DIR/tpch.db
echo "== csq demo: TPC-H SF $SF in $DB (tables on the device image $DB-csd)"
"$BUILD/bench/gen" tpch "$SF" "$DB" --csq "$BUILD/csq.so" --tables lineitem,orders,nation --quiet
ls -l "$DB-csd" | awk '{print "   device image: " $5 " bytes"}'
q() {
  echo
  echo "-- $1"
  # a new connection per query: csq_stats counts this query alone
  sqlite3 -header -column "$DB" <<SQL
.load $BUILD/csq
$1;
.headers off
.mode list
SELECT printf('   [device -> host: %,d bytes; media read: %,d bytes; commands: %d; rows scanned: %,d]',
  (SELECT value FROM csq_stats WHERE name='bytes_to_host'),
  (SELECT value FROM csq_stats WHERE name='media_bytes_read'),
  (SELECT value FROM csq_stats WHERE name='commands'),
  (SELECT value FROM csq_stats WHERE name='rows_scanned'));
SQL
}
q "SELECT count(*) AS lineitems, sum(l_quantity) AS qty FROM lineitem"
q "SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem WHERE l_shipdate >= '1994-01-01' AND l_shipdate < '1995-01-01' AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"
q "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, round(avg(l_extendedprice),2) AS avg_price, count(*) AS count_order FROM lineitem WHERE l_shipdate <= date('1998-12-01', '-90 days') GROUP BY 1, 2 ORDER BY 1, 2"
q "SELECT o_orderpriority, count(*) AS n FROM orders WHERE o_orderdate >= '1993-07-01' AND o_orderdate < '1993-10-01' GROUP BY 1 ORDER BY 1"
q "SELECT count(*) AS nations FROM nation; SELECT path, backend, engines, blocks_used, compute FROM csq_devices"
echo
echo "-- the same Q1 through the csq shell: the whole query is split, the device aggregates"
"$BUILD/csq" -header -stats -explain "$DB" "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, round(avg(l_extendedprice), 2) AS avg_price, count(*) AS count_order FROM lineitem WHERE l_shipdate <= date('1998-12-01', '-90 days') GROUP BY 1, 2 ORDER BY 1, 2" 2>&1
rm -rf "$DIR"

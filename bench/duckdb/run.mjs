// bench/duckdb/run.mjs - the DuckDB side of make bench: load CSV files into
// tables of the given types and time queries, in one process (one per
// suite), and print the results as one JSON object.
//
//   CSQ_DUCKDB_DIR=~/.cache/csq-bench/duckdb node bench/duckdb/run.mjs JOB.json
//
// CSQ_DUCKDB_DIR is the npm prefix @duckdb/node-api was installed into
// (outside the repository: bench/run.py installs it there). JOB.json:
//   {"threads": 2, "runs": 5, "timeout_s": 300, "slow_s": 2,
//    "tables": [{"name": "lineitem", "csv": "/tmp/li.csv",
//                "columns": [["l_orderkey", "BIGINT"], ["l_shipdate", "DATE"], ...]}],
//    "queries": [{"name": "Q6", "sql": "SELECT ..."}]}
// Output on stdout:
//   {"version": "...", "loads": [{"name", "seconds", "rows", "hwm_kb"}],
//    "queries": [{"name", "times": [...], "median", "rows": [[...]], "columns": [...],
//                 "hwm_kb", "base_kb", "timeout", "error"}]}
// Each query runs once to warm up, then `runs` timed times; the median is of
// the timed runs. As in bench/worker.py, a warm-up over slow_s seconds is the
// only run, and fewer runs are made where they would not end within
// timeout_s; a query still running at timeout_s is interrupted
// (connection.interrupt()) and reported with "timeout": true. hwm_kb is this process's peak resident memory while the
// load or query ran: the peak is reset before each (writing 5 to
// /proc/self/clear_refs) and read from VmHWM afterwards, so it includes
// node's and DuckDB's baseline (base_kb: the resident set just before).
// Answers are converted to plain JSON numbers and strings (BIGINT/HUGEINT
// as numbers, exact below 2^53) so that the Python driver can compare them
// with SQLite's.
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

const dir = process.env.CSQ_DUCKDB_DIR;
if (!dir) {
  console.error('run.mjs: set CSQ_DUCKDB_DIR to the npm prefix holding @duckdb/node-api');
  process.exit(2);
}
const require = createRequire(join(dir, 'package.json'));
const duck = require('@duckdb/node-api');
const job = JSON.parse(readFileSync(process.argv[2], 'utf8'));

// Reset the peak-RSS mark; false where /proc does not allow it.
function resetPeak() {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
    return true;
  } catch {
    return false;
  }
}

function statusKb(field) {
  const m = new RegExp(field + ':\\s+(\\d+)').exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : null;
}

// One DuckDB value as JSON: numbers stay numbers, wide integers and
// decimals become numbers, anything else its text.
function plain(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'bigint') return Number(v);
  const s = v.toString();
  const n = Number(s);
  return Number.isFinite(n) && s.trim() !== '' ? n : s;
}

function median(a) {
  const s = [...a].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function quote(s) {
  return "'" + String(s).replaceAll("'", "''") + "'";
}

const instance = await duck.DuckDBInstance.create(':memory:', { threads: String(job.threads ?? 2) });
const con = await instance.connect();
const out = { version: duck.version ? String(duck.version()) : null, loads: [], queries: [] };

for (const t of job.tables) {
  const cols = '{' + t.columns.map(([n, ty]) => `${quote(n)}: ${quote(ty)}`).join(', ') + '}';
  resetPeak();
  const t0 = performance.now();
  await con.run(`CREATE TABLE ${t.name} AS SELECT * FROM read_csv(${quote(t.csv)}, header = false, ` +
                `delim = ',', quote = '"', auto_detect = false, columns = ${cols})`);
  const sec = (performance.now() - t0) / 1000;
  const n = (await con.runAndReadAll(`SELECT count(*) FROM ${t.name}`)).getRows()[0][0];
  out.loads.push({ name: t.name, seconds: sec, rows: plain(n), hwm_kb: statusKb('VmHWM') });
}

const timeoutS = job.timeout_s ?? 300;
const slowS = job.slow_s ?? 2;
for (const q of job.queries) {
  const r = { name: q.name, times: [], median: null, rows: null, columns: null, hwm_kb: null,
              base_kb: statusKb('VmRSS'), timeout: false, error: null };
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    con.interrupt();
  }, timeoutS * 1000);
  try {
    resetPeak();
    const start = performance.now();
    let t0 = performance.now();
    let rd = await con.runAndReadAll(q.sql);  // the warm-up, not counted
    const warm = (performance.now() - t0) / 1000;
    const left = 0.9 * timeoutS - (performance.now() - start) / 1000;
    const runs = warm > slowS ? 0 : Math.min(job.runs ?? 5, Math.floor(left / Math.max(warm, 1e-9)));
    if (runs < 1) r.times.push(warm);  // too slow to repeat: the warm-up is the one run
    for (let i = 0; i < runs; i++) {
      t0 = performance.now();
      rd = await con.runAndReadAll(q.sql);
      r.times.push((performance.now() - t0) / 1000);
    }
    r.median = median(r.times);
    r.columns = rd.columnNames();
    r.rows = rd.getRows().map((row) => row.map(plain));
    r.hwm_kb = statusKb('VmHWM');
  } catch (e) {
    r.timeout = timedOut;
    r.error = timedOut ? `no answer within ${timeoutS} s` : String(e && e.message ? e.message : e);
  }
  clearTimeout(timer);
  out.queries.push(r);
}
con.closeSync();
instance.closeSync();
process.stdout.write(JSON.stringify(out) + '\n');

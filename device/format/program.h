/*
** device/format/program.h - csq device programs (program type CSQ_PTYPE_CSQ): the one
** contract between planner/ (which emits the bytes) and device/ (which
** verifies and runs them). This header documents the byte format completely;
** device/format/program.c holds the parser/verifier shared by both sides and the
** encoder the host uses; device/engine/exec_*.c is the device's executor;
** device/host/scan.c the host call that runs a program over a table.
**
** WHAT A PROGRAM DOES
**   For one row group at a time: read some column chunks (the inputs), keep
**   the rows that are not deleted and satisfy a predicate, and return some of
**   the inputs (the outputs) of those rows, in row order. The predicate is a
**   conjunction (AND) of clauses; a clause is a disjunction (OR) of one or
**   more terms; a term compares one input column with constants, or with
**   another input column of the same row (COLUMN COMPARISONS).
**
** TERMINATION
**   A program has no jumps and no loops: the executor runs every clause once
**   per batch of up to CSQ_PROG_BATCH rows, and a row group has at most
**   CSQ_CHUNK_MAX_VALS rows, so a program always terminates, and its work is
**   bounded by (rows x terms x longest constant) - the verifier bounds terms,
**   constants and size. LIKE/GLOB matching is bounded by pattern x value
**   length per value (no exponential backtracking: see exec_value.c).
**
** BYTE FORMAT (every multi-byte number little-endian; no padding except
** where stated; the whole program is exactly `nTotal` bytes)
**
**   Header, 32 bytes
**     0  u32 magic      CSQ_PROG_MAGIC ("CSQP")
**     4  u16 version    CSQ_PROG_VERSION (1)
**     6  u16 flags      0 (reserved)
**     8  u32 nTotal     size of the whole program in bytes
**    12  u16 nIn        input columns (0..CSQ_PROG_MAX_IN)
**    14  u16 nOut       output columns (0..CSQ_PROG_MAX_OUT)
**    16  u16 nClause    clauses (0 = every live row qualifies)
**    18  u16 nTerm      terms over all clauses (0..CSQ_PROG_MAX_TERMS)
**    20  u16 nConst     constants (0..CSQ_PROG_MAX_CONSTS)
**    22  u16 rsvd       0
**    24  u32 nHeap      bytes of the constant heap (0..CSQ_PROG_MAX_HEAP)
**    28  u32 rsvd2      0
**   Inputs, nIn x u32: the chunk index inside the row group of input slot i
**     (0 = the rowid chunk, 1 + c = column c). Distinct, < 65536.
**   Outputs, nOut x u32: the input slot whose values output column j carries.
**     To return rowids, make chunk 0 an input and output it (first, by
**     convention of dev_scan).
**   Clauses, nClause x u32: how many consecutive terms clause k has (>= 1);
**     they sum to nTerm. Clause 0 owns terms [0, n0), clause 1 the next n1...
**   Terms, nTerm x 16 bytes
**     0  u8  op        CSQ_OP_*
**     1  u8  flags     CSQ_TF_* (bits not defined must be 0)
**     2  u16 slot      input slot compared (< nIn)
**     4  u16 k0        first constant (see op)
**     6  u16 k1        second constant or a count (see op)
**     8  u32 esc       LIKE ESCAPE character as a Unicode code point, 0 = none
**    12  u32 rsvd      0
**   Constants, nConst x 16 bytes
**     0  u8  cls       CSQ_INT, CSQ_REAL, CSQ_TEXT, CSQ_BLOB or CSQ_NULL (vec.h)
**     1  u8  rsvd[3]   0
**     4  u32 len       TEXT/BLOB: bytes; else 0
**     8  u64 v         INT: the value; REAL: IEEE-754 bits (NaN refused);
**                      TEXT/BLOB: offset of the bytes in the heap; NULL: 0
**   Heap: nHeap bytes (TEXT without terminator), then zero bytes up to a
**     multiple of 8.
**   So nTotal = 32 + 4*(nIn + nOut + nClause) + 16*(nTerm + nConst)
**             + ((nHeap + 7) & ~7), and the verifier insists on it.
**
** OPERATORS (x = the input value of the row, a = constant k0, b = constant k1)
**   EQ NE LT LE GT GE  x op a                  k1 = 0
**   IS, ISNOT          x IS a / x IS NOT a     (NULL-aware: NULL IS NULL is true)
**   ISNULL, NOTNULL    x IS NULL / NOT NULL    k0 = k1 = 0
**   BETWEEN            a <= x AND x <= b
**   IN                 x IN (consts k0 .. k0+k1-1), k1 >= 1
**   LIKE               x LIKE a [ESCAPE esc]   a TEXT or NULL, k1 = 0
**   GLOB               x GLOB a                a TEXT or NULL, esc = 0, k1 = 0
**   BPF                a user's eBPF program over several inputs (below)
**   BLOOM              x may be in a join's key set (JOIN FILTERS, below)
**   COLCMP             x op y, y = the row's value of input slot k0
**                      (COLUMN COMPARISONS, below)
**   Flag CSQ_TF_NOT negates BETWEEN, IN, LIKE and GLOB (only those) with
**   SQL's three-valued logic: the row qualifies only where the un-negated
**   term is FALSE (not NULL). So NOT IN with a NULL in the list, or NOT LIKE a
**   NULL pattern, never qualifies.
**
** COMPARISON SEMANTICS (SQLite's, exactly)
**   A term is true only when its SQL value is TRUE; any comparison involving
**   a NULL (value or constant) is NULL, i.e. not true (IS/ISNOT/ISNULL/
**   NOTNULL excepted). Values order as SQLite orders storage classes:
**   NULL < INTEGER = REAL (compared numerically, integer against real exactly,
**   with no rounding) < TEXT (by the term's collation) < BLOB (memcmp, then
**   length). Collations: BINARY (memcmp, then length), NOCASE (ASCII letters
**   folded), RTRIM (trailing spaces ignored).
**   Affinity: the planner decides it and converts the constants accordingly
**   before encoding them (e.g. '5' -> 5 against a NUMERIC column, 5 -> '5'
**   against a TEXT column), as SQLite does; the executor never converts
**   column values, because SQLite does not either (stored values already
**   carry the column's affinity). The term's affinity field (CSQ_TF_AFF_*)
**   records the decision for explain output and is otherwise not used.
**   LIKE and GLOB work on the text of the value, as SQLite's functions do:
**   numbers are rendered as SQLite renders them (integers in decimal, reals
**   as "%!.15g"), and matching stops at a NUL.
**   LIKE folds ASCII case unless CSQ_TF_LIKE_CASE; '_' and '?' match one
**   UTF-8 character. A BLOB value never matches (LIKE is false, NOT LIKE
**   true), as in SQLite built with SQLITE_LIKE_DOESNT_MATCH_BLOBS (Debian's
**   and most distributions' builds); with CSQ_TF_BLOB_TEXT its bytes are
**   matched as text instead, as in a build without that option (the planner
**   can tell which by evaluating x'61' LIKE 'a' once).
**
** EBPF TERMS (op CSQ_OP_BPF)
**   k0 is a BLOB constant holding an eBPF call descriptor (device/format/
**   bpf.h: the program's instructions and where each argument comes from,
**   an input slot or a constant); slot is the slot of its first input
**   argument (or 0); flags is 0, or CSQ_TF_NOT for the rows where the
**   program returns 0 (NOT of the call, exact: a call is never NULL); k1
**   and esc are 0. Only filter terms may be
**   eBPF terms, not the conditions of CASE. The term is true for a row when
**   the program returns non-zero; NULL arguments reach the program as NULL
**   slots (it decides). The verifier here checks the descriptor and csq's
**   rules (csq_bpf_call_parse); Load Program runs the eBPF verifier too
**   (device/engine/bpf_rt.c), so a program it refuses is never loaded. A
**   program that fails while running (csq_fail, a helper misused) faults
**   the Execute with reason CSQ_FAULT_BPF in bits 7:0, what happened in
**   bits 15:8 (1 a helper was given an argument index out of range, 2 the
**   program called csq_fail, 3 csq_find with a needle length outside
**   1..8) and, for csq_fail, bits 63:16 its code's low 48 bits (shown
**   sign-extended: csq_bpf_fault_reason, csq_bpf_fault_text). Zone
**   maps never skip a row group for an eBPF term.
**   What a program may do (device/format/bpf.h has the rules and the
**   argument block): at most CSQ_BPF_MAX_INS (4096) instructions of the
**   classes clang emits, no loops and no unreachable code (the eBPF
**   verifier), read its arguments (16-byte slots) and read and write its
**   own stack only, call csq's helpers 1..14 only (REAL arithmetic and
**   comparison, bounded byte access to TEXT/BLOB, csq_fail), no maps, no
**   packet loads, no calls of its own functions; so it ends, touches
**   nothing else, and its work per row is bounded by its size.
**
** JOIN FILTERS (op CSQ_OP_BLOOM)
**   "x may be one of the keys of a join's build side": k0 is a BLOB
**   constant holding a Bloom filter of the keys' hashes (device/format/
**   bloom.h: its length a power of two from 32 bytes to 16 MiB), k1 and
**   esc are 0, and flags hold no more than an affinity (CSQ_TF_AFF_*,
**   informative): no collation (keys compare BINARY) and no NOT (a filter
**   only answers "maybe" or "certainly not", so its negation would lose
**   rows: an anti-join cannot use one). Only filter terms, not the
**   conditions of CASE. The term is true when the filter holds the hash
**   of x (device/format/keyhash.h: equal by SQLite's = means equal
**   hashes, 4 and 4.0 alike), false for NULL. It keeps every row that
**   joins and some that do not (the filter's false positive rate), so the
**   host still joins the rows it gets. Affinity is the planner's: it hashes
**   the build side's keys as they compare with the probe column's values
**   (e.g. '5' as 5 against an INTEGER column), as it converts constants.
**   The device tests each value once per row (each dictionary entry once
**   per row group); the filter travels in the program (the heap), hence
**   the limits below. Zone maps skip a row group whose column is all NULL,
**   holds one value, or holds integers only within a range of at most
**   4096 values, when the filter holds none of them.
**
** JOIN KEY BITMAPS (op CSQ_OP_KEYMAP)
**   "x is one of the keys of a join's build side", every key an integer
**   (REALs equal to one counted as it): k0 is a BLOB constant holding a
**   bitmap of the keys (device/format/keymap.h: an int64 base, then one bit
**   per integer of the span), k1, esc and flags as for CSQ_OP_BLOOM (no
**   NOT, no collation, an affinity at most; only filter terms). The term is
**   true when x is an INTEGER, or a REAL equal to an integer, whose bit is
**   set; false for NULL, TEXT, BLOB and anything outside the span. Unlike a
**   Bloom filter it is exact: the planner sends it instead of one when the
**   keys' span fits a bitmap not much larger than their Bloom filter, which
**   saves hashing each value. Zone maps skip a row group whose column holds
**   no number, or integers only, all outside the span or (within a range
**   of at most 4096 values) none with its bit set. The op number is new in
**   this version's readers (as COLCMP's was).
**
** COLUMN COMPARISONS (op CSQ_OP_COLCMP)
**   "x op y" for two input columns of one row, as in WHERE l_commitdate <
**   l_receiptdate: slot is x's input slot, k0 is y's (< nIn; it may equal
**   slot), k1 is the comparison op, one of CSQ_OP_EQ NE LT LE GT GE IS
**   ISNOT, esc is 0, and flags hold no more than a collation and an
**   affinity (CSQ_TF_COLL_MASK, CSQ_TF_AFF_*: informative): no NOT. The
**   verifier refuses anything else (k0 out of range, another k1, a NOT or
**   LIKE flag, an escape), each with its reason. Semantics are those of
**   COMPARISON SEMANTICS above with y in the place of the constant: NULL on
**   either side makes EQ..GE not true, IS is true when both are NULL or
**   they compare equal, ISNOT is its negation; numbers compare exactly
**   across INTEGER and REAL, TEXT by the term's collation. Neither value
**   is converted: the planner sends such a term only where SQLite would
**   not convert either column for the comparison (both of one affinity,
**   or both numeric), so the stored values are what SQLite compares. A
**   condition of CASE may be one too (the executor runs condition terms
**   as filter terms). Zone maps never skip a row group for one. The op
**   number is new in this version's readers; programs without it keep
**   their bytes, so no version number changes (an older verifier refuses
**   the opcode as unknown, never misreads it).
**
** LIMITS: nTotal <= CSQ_PROG_MAX_BYTES, and the CSQ_PROG_MAX_* counts below;
**   a LIKE or GLOB pattern holds at most CSQ_PROG_MAX_PATTERN bytes (so
**   matching stays bounded whatever the heap holds).
**
** RUNNING A PROGRAM: EXECUTE (CSQ_CP_EXECUTE) on one row group
**   Ranges (inline or an MRS), all in SLM:
**     range 0  the job descriptor (below)
**     range 1  the input area: the row group's needed chunks, as read from
**              the media (normally by Memory Copy of their blocks)
**     range 2  the output area, where the result is written
**   Parameters: aParam[0] = the program's identifier (XXH3-64 of its bytes;
**     a mismatch with the program in the slot faults with
**     CSQ_FAULT_STALE_PROGRAM, so a slot reloaded by someone else is never
**     run by mistake); aParam[1] (CDW14 | CDW15 << 32): bits 30:0 the first
**     row to process (0, or the nextRow of a result that did not fit); bit
**     31 CSQ_EXEC_ACC, accumulate (aggregation programs only): the output
**     area already holds a complete result of this program (from an
**     earlier Execute over other rows), and this run merges its rows into
**     it, so the host reads one result for many row groups; then bits
**     63:32 must be that result's csq_res_check (its Execute's DW0), which
**     the engine verifies before trusting it (else CSQ_FAULT_CHECKSUM).
**     Without the flag, bits 63:32 are a row cap (programs without
**     aggregation only; 0 = none): the result holds at most that many
**     rows and is partial past them (nextRow = the first row left out), so
**     a LIMIT does not bring a whole row group's survivors to the host.
**     Accumulating is exact only where the order in which rows reach the
**     aggregates cannot show (the host decides: dev_scan's order-free
**     test).
**   Job descriptor, 24 + 24*nIn bytes [+ omit mask] + delete bitmap
**     0  u32 magic      CSQ_JOB_MAGIC ("CSQJ")
**     4  u32 nRow       rows of the row group (<= CSQ_CHUNK_MAX_VALS)
**     8  u32 nIn        must equal the program's nIn
**    12  u32 delBytes   bytes of the delete bitmap that follows the chunk
**                       table (0 = no row deleted; else >= (nRow+7)/8)
**    16  u64 xxh3       XXH3-64 of the whole descriptor (24 + 24*nIn bytes +
**                       the delete bitmap) read with this field as 0
**                       (csq_job_hash); checked, so a descriptor damaged on
**                       its way to the device faults instead of answering
**    24  nIn x { u64 off (in the input area), u64 len, u64 xxh3 }: input
**                       slot i's chunk; xxh3 is XXH3-64 of its len bytes
**                       (the catalog's checksum) and is checked
**    ..  omit mask      programs with CSQ_PF_ROWNUM only: (nOut + 63) / 64
**                       u64 words; bit j%64 of word j/64 set = leave output
**                       column j out of this result (see ROW NUMBERS)
**    ..  delete bitmap  bit r (byte r/8, bit r%8) set = row r is deleted
**   Result in the output area (every section offset a multiple of 8)
**     0  u32 magic      CSQ_RES_MAGIC ("CSQR")
**     4  u32 nRows      rows in this result
**     8  u32 nextRow    first row not yet processed (nRow when complete; less
**                       when the output area was full: Execute again from it)
**    12  u32 nCol       output columns (the program's nOut)
**    16  u64 nBytes     bytes of the result, header included (multiple of 8)
**    24  nCol x 16-byte column descriptors:
**          u8 clsMask (OR of 1 << class), u8 bCls (class array present),
**          u8 bLen (length array present), u8 bAbsent (1: the job's omit
**          mask left this column out: every other field is 0 and it has no
**          sections), u32 rsvd, u64 nHeap
**    then each column in turn:
**          if bCls: nRows u8 classes (else every value has the one class of
**                   clsMask, or NULL when nRows is 0), padded to 8
**          nRows x u64 values (INT value, REAL bits, TEXT/BLOB heap offset,
**                   NULL 0)
**          if bLen: nRows x u32 byte lengths (0 for non TEXT/BLOB), padded
**                   to 8
**          nHeap bytes of TEXT/BLOB, padded to 8
**    then, with CSQ_PF_ROWNUM: nRows x u32 row numbers, padded to 8
**   Completion: DW0 = csq_res_check() of the result, DW1 = nBytes | P,
**   where P (bit 0; nBytes is a multiple of 8) is 1 when nextRow < nRow (the
**   host reads nBytes and checks DW0 against what arrived; P lets it know
**   the result is partial without reading it).
**   Faults: status CSQ_SC_PROGRAM_FAULT with DW0-DW1 = a CSQ_FAULT_* reason.
**
** RUNNING OVER A RANGE OF ROW GROUPS: aParam[1] bit 30 CSQ_EXEC_RANGE
**   (aggregation programs only; bits 29:0 must be 0; bit 31 CSQ_EXEC_ACC
**   and bits 63:32 as above). One Execute runs the program over nRg
**   consecutive row groups of a table, merging them into one result, so
**   the host sends the program's inputs once whatever the table's size:
**   the device reads the row groups' records from the on-media catalog
**   (device/store/FORMAT.md "Catalog": a table's records are back to back,
**   CSQ_CATREC_HDR + CSQ_CATREC_CHUNK * nChunk bytes each), builds each
**   job itself, reads the needed chunk blocks (and any delete bitmap) into
**   the input area, and runs the program as above, each row group
**   accumulating into the last one's result. Range 0 starts with:
**     0  u32 magic    CSQ_RANGE_MAGIC ("CSQG")
**     4  u32 nRg      row groups (records) to run, >= 1
**     8  u64 catLba   first block of the catalog
**    16  u64 recOff   byte offset of the first record from catLba's first byte
**    24  u32 nChunk   chunks per record (every record must hold as many)
**    28  u32 nScratch bytes from offset 4096 of range 0 where records and
**                     delete bitmaps are read (a multiple of 4096, at least
**                     the blocks one record or one bitmap spans)
**    32  u64 recXxh3  XXH3-64 of the nRg records' bytes back to back: the
**                     catalog the host planned with (checked, else
**                     CSQ_FAULT_RANGE_STALE and no result)
**    40  u32 jobOff   where in range 0 each job is built (>= 4096 + nScratch)
**    44  20 zero bytes
**   Range 0 must be 4096-aligned in SLM, as must range 1. The result, DW0
**   and DW1 are those of the last row group's run. A merged result that
**   no longer fits the output area faults with CSQ_FAULT_RANGE_FULL: the
**   host then runs the row groups one Execute each.
**
** ROW NUMBERS (version 2, header flag CSQ_PF_ROWNUM; not with CSQ_PF_AGG)
**   The result ends with each returned row's number in its row group (its
**   index in the chunks, ascending), and each job carries an omit mask.
**   Together they let the host ask for fewer columns than it might need:
**   an output it left out, or the rowid it did not ask for, can still be
**   read for exactly the returned rows from the row group's own chunk
**   (NVM Read) if it turns out to be needed after all.
**
** TOP-N (version 2, header flag CSQ_PF_TOPN; not with CSQ_PF_AGG or
** CSQ_PF_ROWNUM)
**   A section follows the (padded) heap (offset A, as for aggregation):
**     0  u32 nTop      rows kept (1..CSQ_TOPN_MAX)
**     4  u16 nKey      sort keys (1..CSQ_TOPN_MAX_KEYS)
**     6  u16 rsvd      0
**     8  nKey x 4 bytes: u16 slot (an input slot), u8 flags (CSQ_TOPN_DESC
**        or 0), u8 rsvd 0; then zero bytes up to a multiple of 8
**   So nTotal = A + 8 + ((4*nKey + 7) & ~7).
**   Of the rows an Execute qualifies, the result holds only the nTop that
**   sort first by the keys, in row order. The order is SQLite's ORDER BY
**   with BINARY collation (NULL first, then numbers by value, TEXT by bytes,
**   BLOBs by bytes), CSQ_TOPN_DESC reversing a key, and equal keys going to
**   the earlier row: the rows a top-N over the whole table in row order
**   would keep from this row group are among them, so the host merges the
**   row groups' results with a top-N of its own. Its row cap must be 0.
**
** AGGREGATION (version 2)
**   A version 2 program is a version 1 program whose header flags may hold
**   CSQ_PF_AGG; then an aggregation section follows the (padded) heap, and the
**   program groups the qualifying rows and returns one row per group with
**   partial aggregate states instead of rows. Version 1 programs (flags 0) are
**   read as before; the encoder emits version 1 whenever it can, so filter
**   programs keep their bytes and ids. With CSQ_PF_AGG, nOut must be 0: the
**   result columns are defined by the section.
**   Section (offset A = the nTotal of the same program without it):
**     0  u16 nExpr     expression instructions (0..CSQ_AGG_MAX_EXPR)
**     2  u16 nKey      GROUP BY keys (0..CSQ_AGG_MAX_KEYS)
**     4  u16 nAgg      aggregates (0..CSQ_AGG_MAX_AGGS); nKey + nAgg >= 1
**     6  u16 nCond     condition terms (0..CSQ_AGG_MAX_CONDS), used by CASE
**     8  u64 rsvd      0
**    16  nExpr x 8 bytes: u8 op (CSQ_EX_*), u8 flags (0), u16 a, u16 b, u16 c
**        nKey x 4 bytes:  u16 expr, u16 flags (0)
**        nAgg x 4 bytes:  u8 fn (CSQ_AGG_*), u8 flags, u16 expr
**        zero bytes up to a multiple of 8
**        nCond x 16 bytes: terms in the filter term format (same checks; they
**        never filter, CASE tests them)
**   So nTotal = A + 16 + 8*nExpr + ((4*(nKey + nAgg) + 7) & ~7) + 16*nCond.
**
**   Expressions: straight-line code; instruction i computes one value per row
**   and may use only instructions < i, so no cycle and no loop exists.
**     COL    a = input slot                      the column's value
**     CONST  a = constant index                  any class
**     ADD SUB MUL DIV  a, b = instructions       a + b, a - b, a * b, a / b
**     NEG    a = instruction                     -a, i.e. 0 - a (as SQLite)
**     CASE   a = condition term, b, c = instr.   CASE WHEN cond THEN b ELSE c
**     BPF    a = constant (a BLOB call           a user's eBPF program over the
**            descriptor, bpf.h)                  row: its u64 as an INTEGER
**                                                (never NULL); see EBPF TERMS
**     MAP    a = instruction, b = constant      the code of a's value in the
**            index (a BLOB, codemap.h)           key code map b: an INTEGER,
**                                                or NULL where a's value is
**                                                no key of it (a star join's
**                                                dimension, codemap.h)
**   Unused fields must be 0. Arithmetic is SQLite's: any NULL operand gives
**   NULL; INTEGER op INTEGER is INTEGER, except that + - * overflowing int64
**   (and INT64_MIN / -1) is computed in REAL instead; integer division
**   truncates toward zero; x / 0 (integer or 0.0) is NULL; otherwise both
**   operands are taken as REAL, and a NaN result (Inf - Inf) is NULL.
**   TEXT and BLOB operands would need SQLite's text-to-number conversion,
**   which the device does not do: an arithmetic operator (or SUM, TOTAL, AVG)
**   meeting a non-NULL TEXT/BLOB value whose other operand is not NULL
**   faults with CSQ_FAULT_NOT_NUMERIC; the host then runs the query without
**   the pushed aggregate (dev_agg reports -EDOM). Planners should push
**   arithmetic only over columns of INTEGER/REAL/NUMERIC affinity, where
**   such values are rare. The condition of CASE is a term (true only when
**   TRUE); both branches are computed for every row.
**
**   Keys: NULL is a group of its own; values group under SQLite's equality
**   with BINARY collation (1 and 1.0 are one group; TEXT 'a' and BLOB x'61'
**   are not). When a group's key occurs as INTEGER and as an equal REAL, the
**   first in row order is reported.
**
**   Aggregates (fn; expr ignored and 0 for COUNT_STAR) and the state columns
**   each contributes to a result row, in this order:
**     COUNT_STAR, COUNT   1 column: INT n (rows / non-NULL values)
**     SUM, TOTAL, AVG     8 columns, CSQ_AGG_SUM_COLS:
**                         INT cnt (non-NULL values), INT nReal (REAL values
**                         among them), INT ilo, INT ihi (the exact sum of the
**                         INTEGER values as a 128-bit two's complement number:
**                         ihi * 2^64 + (uint64)ilo), REAL rsum, REAL rerr (the
**                         REAL values summed with Kahan-Babuska-Neumaier
**                         compensation: sum = rsum + rerr), INT ipos, INT
**                         ineg (the sum of the positive INTEGER values and
**                         of the negative ones' magnitudes, each saturating
**                         at INT64_MAX: they bound every running sum, so the
**                         host can tell when SQLite's row-order "integer
**                         overflow" cannot happen)
**     MIN, MAX            1 column: the smallest / largest non-NULL value in
**                         SQLite's order (numbers < TEXT < BLOB; TEXT by the
**                         collation in flags & CSQ_TF_COLL_MASK, BINARY
**                         default), NULL when there is none; on ties the first
**                         in row order stays. Other flag bits must be 0.
**   Result: the format above with nCol = nKey + the aggregates' state
**   columns (csq_prog.nResCol): key values first (in their own classes),
**   then the states; one row per group seen in the processed rows, in no
**   particular order; no row at all when no row qualified (also without
**   keys). A result that would not fit the output area is cut at a row
**   (nextRow < nRow): Execute again from there and merge both parts.
**   Finalisation (host, dev_agg_*): COUNT n; SUM NULL if cnt = 0, INTEGER if
**   nReal = 0 and the exact sum fits in int64, the error "integer overflow"
**   if it does not, else REAL; TOTAL 0.0 if cnt = 0, else REAL; AVG NULL if
**   cnt = 0, else REAL sum / cnt. (SQLite's own overflow test follows the
**   order of additions: it fails when a running sum overflows, even if the
**   total would fit; csq decides on the exact total of the integers, which
**   differs only when a group's running sum leaves int64 and comes back.)
*/
#ifndef CSQ_DEVICE_PROGRAM_H
#define CSQ_DEVICE_PROGRAM_H

#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>
#include "device/format/vec.h"
#include "device/format/value.h"

#define CSQ_PROG_MAGIC   0x50515343u /* "CSQP" */
#define CSQ_PROG_VERSION 1u
#define CSQ_JOB_MAGIC    0x4A515343u /* "CSQJ" */
#define CSQ_RES_MAGIC    0x52515343u /* "CSQR" */

#define CSQ_PROG_HDR      32
#define CSQ_PROG_TERM_SZ  16
#define CSQ_PROG_CONST_SZ 16
#define CSQ_JOB_HDR       24
#define CSQ_JOB_CHUNK_SZ  24
#define CSQ_RES_HDR       24
#define CSQ_RES_COL_SZ    16

/* Execute's aParam[1] (see RUNNING A PROGRAM). */
#define CSQ_EXEC_START_MASK 0x7FFFFFFFull
#define CSQ_EXEC_ACC        0x80000000ull
#define CSQ_EXEC_RANGE      0x40000000ull

/* Execute over a range of row groups (see RUNNING OVER A RANGE). */
#define CSQ_RANGE_MAGIC  0x47515343u /* "CSQG" */
#define CSQ_RANGE_HDR    64
#define CSQ_RANGE_SCR    4096 /* offset of the scratch area in range 0 */
#define CSQ_CATREC_HDR   44   /* a catalog row group record, before its chunks */
#define CSQ_CATREC_CHUNK 110  /* one chunk's entry in it (zone map included) */

/* The heap holds up to two largest join filters (bloom.h) besides the
** constants; the rest of a program stays within 256 KiB. */
#define CSQ_PROG_MAX_BYTES   (32u * 1024 * 1024 + 256u * 1024)
#define CSQ_PROG_MAX_IN      1024
#define CSQ_PROG_MAX_OUT     1024
#define CSQ_PROG_MAX_TERMS   512
#define CSQ_PROG_MAX_CONSTS  8192
#define CSQ_PROG_MAX_HEAP    (32u * 1024 * 1024 + 128u * 1024)
#define CSQ_PROG_MAX_PATTERN (128u * 1024) /* bytes of a LIKE / GLOB pattern */
#define CSQ_PROG_BATCH       1024          /* rows per batch of the executor */

/* Version 2: the aggregation section (see AGGREGATION above). */
#define CSQ_PROG_VERSION_AGG 2u
#define CSQ_PF_AGG           0x0001 /* header flag: an aggregation section follows the heap */
#define CSQ_PF_ROWNUM        0x0002 /* header flag: row numbers and omit masks (ROW NUMBERS) */
#define CSQ_PF_TOPN          0x0004 /* header flag: a top-N section follows the heap (TOP-N) */
#define CSQ_TOPN_HDR         8
#define CSQ_TOPN_MAX         65536
#define CSQ_TOPN_MAX_KEYS    16
#define CSQ_TOPN_DESC        0x01
#define CSQ_AGG_HDR          16
#define CSQ_AGG_MAX_EXPR     256
#define CSQ_AGG_MAX_KEYS     8
#define CSQ_AGG_MAX_AGGS     64
#define CSQ_AGG_MAX_CONDS    64

/* Expression operators. */
#define CSQ_EX_COL   1
#define CSQ_EX_CONST 2
#define CSQ_EX_ADD   3
#define CSQ_EX_SUB   4
#define CSQ_EX_MUL   5
#define CSQ_EX_DIV   6
#define CSQ_EX_NEG   7
#define CSQ_EX_CASE  8
#define CSQ_EX_BPF   9
#define CSQ_EX_MAP   10 /* new in this version's readers, as CSQ_OP_KEYMAP */
#define CSQ_EX_MAX   10

/* Aggregate functions. */
#define CSQ_AGG_COUNT_STAR 1
#define CSQ_AGG_COUNT      2
#define CSQ_AGG_SUM        3
#define CSQ_AGG_TOTAL      4
#define CSQ_AGG_AVG        5
#define CSQ_AGG_MIN        6
#define CSQ_AGG_MAX        7
#define CSQ_AGG_FN_MAX     7
#define CSQ_AGG_SUM_COLS   8 /* state columns of SUM / TOTAL / AVG */

/* State columns an aggregate function contributes to a partial row. */
static inline int csq_agg_state_cols(int fn) {
  return fn == CSQ_AGG_SUM || fn == CSQ_AGG_TOTAL || fn == CSQ_AGG_AVG ? CSQ_AGG_SUM_COLS : 1;
}

/* Term operators. */
#define CSQ_OP_EQ      1
#define CSQ_OP_NE      2
#define CSQ_OP_LT      3
#define CSQ_OP_LE      4
#define CSQ_OP_GT      5
#define CSQ_OP_GE      6
#define CSQ_OP_IS      7
#define CSQ_OP_ISNOT   8
#define CSQ_OP_ISNULL  9
#define CSQ_OP_NOTNULL 10
#define CSQ_OP_BETWEEN 11
#define CSQ_OP_IN      12
#define CSQ_OP_LIKE    13
#define CSQ_OP_GLOB    14
#define CSQ_OP_BPF     15 /* a user's eBPF program (EBPF TERMS) */
#define CSQ_OP_BLOOM   16 /* x may be in a join's key set (JOIN FILTERS) */
#define CSQ_OP_COLCMP  17 /* x op another input column (COLUMN COMPARISONS) */
#define CSQ_OP_KEYMAP  18 /* x is in a join's integer key set (JOIN KEY BITMAPS) */
#define CSQ_OP_MAX     18

/* Term flags. */
#define CSQ_TF_NOT         0x01 /* negate BETWEEN / IN / LIKE / GLOB / BPF */
#define CSQ_TF_COLL_MASK   0x06 /* collation for TEXT comparisons: */
#define CSQ_TF_BINARY      0x00
#define CSQ_TF_NOCASE      0x02
#define CSQ_TF_RTRIM       0x04
#define CSQ_TF_LIKE_CASE   0x08 /* LIKE is case sensitive (PRAGMA case_sensitive_like) */
#define CSQ_TF_AFF_MASK    0x30 /* affinity the planner applied (informative): */
#define CSQ_TF_AFF_NONE    0x00
#define CSQ_TF_AFF_NUMERIC 0x10
#define CSQ_TF_AFF_TEXT    0x20
#define CSQ_TF_BLOB_TEXT   0x40 /* LIKE/GLOB see a BLOB's bytes as text (see below) */
#define CSQ_TF_ALL         0x7F
_Static_assert(CSQ_TF_BINARY == CSQ_COLL_BINARY && CSQ_TF_NOCASE == CSQ_COLL_NOCASE &&
                   CSQ_TF_RTRIM == CSQ_COLL_RTRIM,
               "the program's collation codes are value.h's");

/* Fault reasons (DW0-DW1 of a CSQ_SC_PROGRAM_FAULT completion). */
#define CSQ_FAULT_BAD_RANGES    1  /* fewer than 3 ranges, or one too small */
#define CSQ_FAULT_BAD_JOB       2  /* job descriptor malformed */
#define CSQ_FAULT_CHUNK_RANGE   3  /* a chunk lies outside the input area */
#define CSQ_FAULT_CHECKSUM      4  /* a chunk's XXH3 differs from the job's */
#define CSQ_FAULT_CORRUPT_CHUNK 5  /* a chunk does not decode */
#define CSQ_FAULT_SHORT_CHUNK   6  /* a chunk has fewer values than the row group */
#define CSQ_FAULT_OUTPUT_FULL   7  /* not even one row fits in the output area */
#define CSQ_FAULT_NOMEM         8  /* the engine ran out of memory */
#define CSQ_FAULT_STALE_PROGRAM 9  /* aParam[0] is not this program's identifier */
#define CSQ_FAULT_NOT_NUMERIC   10 /* arithmetic/SUM met a TEXT or BLOB value */
#define CSQ_FAULT_BPF           11 /* an eBPF term's program failed (EBPF TERMS) */
#define CSQ_FAULT_RANGE_STALE   12 /* range Execute: the catalog records are not the host's */
#define CSQ_FAULT_RANGE_FULL    13 /* range Execute: the merged result outgrew the output area */
const char *csq_fault_name(uint64_t reason);
/* The reason of fault `reason` as a sentence in z[0..n): csq_fault_name,
** with the detail a CSQ_FAULT_BPF reason carries (EBPF TERMS). */
void csq_fault_text(uint64_t reason, char *z, size_t n);

/* A parsed, verified program: a read-only view into the bytes (the bytes must
** outlive it), used by the device executor and by host-side helpers. */
typedef struct csq_pconst {
  uint8_t cls;
  uint32_t len;     /* TEXT/BLOB bytes */
  int64_t i;        /* INT */
  double r;         /* REAL */
  const uint8_t *z; /* TEXT/BLOB bytes (inside the program) */
} csq_pconst;

typedef struct csq_pterm {
  uint8_t op, flags;
  uint16_t slot, k0, k1;
  uint32_t esc;
} csq_pterm;

typedef struct csq_pexpr {
  uint8_t op;
  uint16_t a, b, c;
} csq_pexpr;

typedef struct csq_pagg {
  uint8_t fn, flags;
  uint16_t expr;
} csq_pagg;

typedef struct csq_prog {
  uint32_t nTotal;
  int nIn, nOut, nClause, nTerm, nConst;
  uint16_t aIn[CSQ_PROG_MAX_IN];   /* chunk index per input slot */
  uint16_t aOut[CSQ_PROG_MAX_OUT]; /* input slot per output column */
  uint16_t *aClause;               /* nClause term counts (malloc'd) */
  csq_pterm *aTerm;                /* nTerm (malloc'd) */
  csq_pconst *aConst;              /* nConst (malloc'd) */
  /* Aggregation (version 2 with CSQ_PF_AGG; else bAgg = 0 and all empty). */
  int bAgg;
  int nExpr, nKey, nAgg, nCond;
  csq_pexpr *aExpr;                /* nExpr (malloc'd) */
  uint16_t aKey[CSQ_AGG_MAX_KEYS]; /* instruction per key */
  csq_pagg aAgg[CSQ_AGG_MAX_AGGS];
  csq_pterm *aCond; /* nCond (malloc'd) */
  int nResCol;      /* columns of a result: nOut, or the aggregation's */
  int bRowNum;      /* CSQ_PF_ROWNUM: row numbers in results, omit masks in jobs */
  /* Top-N (CSQ_PF_TOPN; else nTop = 0). */
  uint32_t nTop;
  int nTopKey;
  uint16_t aTopSlot[CSQ_TOPN_MAX_KEYS];
  uint8_t aTopDesc[CSQ_TOPN_MAX_KEYS];
} csq_prog;

/* Verify program p[0..n) and parse it into *pOut (free with
** csq_prog_clear). Returns 0, or -EINVAL with a message naming the fault in
** zErr (never reads outside p[0..n), whatever the bytes), or -ENOMEM. */
int csq_prog_parse(const uint8_t *p, size_t n, csq_prog *pOut, char *zErr, size_t nErr);
void csq_prog_clear(csq_prog *p);

/* XXH3-64 of the program bytes: its identifier for Load Program / Execute. */
uint64_t csq_prog_id(const uint8_t *p, size_t n);
/* The job descriptor's checksum field: XXH3-64 of p[0..n) with bytes
** [16, 24) read as zero. */
uint64_t csq_job_hash(const uint8_t *p, size_t n);
/* What Execute returns in the low 32 bits of its completion for a result of
** n bytes at p: the low 32 bits of XXH3-64 of those bytes (the high 32 bits
** are n), so the host can tell a result damaged between the engine and
** its own memory. */
static inline uint32_t csq_res_check(const uint8_t *p, size_t n) {
  return (uint32_t)XXH3_64bits(p, n);
}
/* Execute's 64-bit return value (DW0-DW1) for the result of nBytes (a
** multiple of 8) at p, partial or not; and the parts the host reads back:
** the size, the partial bit, and bits that must be 0. */
static inline uint64_t csq_res_ret(const uint8_t *p, uint64_t nBytes, int bPartial) {
  return (uint64_t)csq_res_check(p, nBytes) | ((nBytes | (bPartial ? 1 : 0)) << 32);
}
static inline uint64_t csq_ret_bytes(uint64_t ret) {
  return (ret >> 32) & ~(uint64_t)7;
}
static inline int csq_ret_partial(uint64_t ret) {
  return (int)((ret >> 32) & 1);
}
static inline int csq_ret_bad(uint64_t ret) {
  return ((ret >> 32) & 6) != 0;
}

/* Where the sections of one result column of nRows values sit (RESULT
** above), as byte offsets from the column's start: the classes (if bCls)
** at 0, then the values, the lengths (if bLen), the heap of nHeap bytes;
** nBytes is the whole column, padding included. Both sides lay a column
** out with it: the engine to write one, the host to read one. */
typedef struct csq_res_lay {
  uint64_t oVal, oLen, oHeap, nBytes;
} csq_res_lay;
static inline csq_res_lay csq_res_col_lay(int bCls, int bLen, uint64_t nRows, uint64_t nHeap) {
  csq_res_lay l;
  l.oVal = bCls ? (nRows + 7) & ~(uint64_t)7 : 0;
  l.oLen = l.oVal + 8 * nRows;
  l.oHeap = l.oLen + (bLen ? (4 * nRows + 7) & ~(uint64_t)7 : 0);
  l.nBytes = l.oHeap + ((nHeap + 7) & ~(uint64_t)7);
  return l;
}
/* The one class of class mask m (CSQ_INT .. CSQ_NULL), or 0 if m holds
** none or several: the class of every value of a column without a class
** array. */
static inline int csq_res_mask_cls(uint8_t m) {
  int c = 0;
  for (int k = CSQ_INT; k <= CSQ_NULL; k++)
    if (m == (1u << k)) c = k;
  return c;
}

/* ---- Encoder (host side) -------------------------------------------------
** Build a program step by step; every call returns a non-negative index or 0
** on success, or a negative errno (-EINVAL for an argument out of range or a
** limit reached, -ENOMEM); after an error csq_pb_finish fails too. */
typedef struct csq_pb csq_pb;
csq_pb *csq_pb_new(void); /* NULL on OOM */
void csq_pb_free(csq_pb *b);
/* A copy of builder b to go on with apart (NULL on OOM). */
csq_pb *csq_pb_copy(const csq_pb *b);
/* Forget the outputs added so far (inputs stay): a program built for rows
** made into a grouped one. */
void csq_pb_drop_outputs(csq_pb *b);
/* The input slot of chunk iChunk (0 rowid, 1+c column c), added if new. */
int csq_pb_input(csq_pb *b, uint32_t iChunk);
/* Add an output column carrying input slot `slot`. */
int csq_pb_output(csq_pb *b, int slot);
/* Constants; return the constant index. */
int csq_pb_const_null(csq_pb *b);
int csq_pb_const_int(csq_pb *b, int64_t v);
int csq_pb_const_real(csq_pb *b, double v);
int csq_pb_const_bytes(csq_pb *b, int cls, const void *p, uint32_t n); /* TEXT or BLOB */
/* Start a new clause (AND with the previous ones); terms added after it are
** ORed together inside it. A term added before any clause starts one. */
int csq_pb_clause(csq_pb *b);
/* Add a term to the current clause (fields as in the format above). */
int csq_pb_term(csq_pb *b, int op, int flags, int slot, int k0, int k1, uint32_t esc);
/* Add a join filter term (JOIN FILTERS) to the current clause: input slot
** `slot` may be in the key set whose Bloom filter is pFilter[0..nBytes)
** (copied into the program; nBytes: csq_bloom_size_ok). flags: 0 or a
** CSQ_TF_AFF_* only (-EINVAL for CSQ_TF_NOT or a collation). */
int csq_pb_bloom(csq_pb *b, int flags, int slot, const void *pFilter, uint32_t nBytes);
/* The same with a bitmap of integer keys (JOIN KEY BITMAPS): pMap[0..nBytes)
** in keymap.h's format (nBytes: csq_keymap_size_ok). */
int csq_pb_keymap(csq_pb *b, int flags, int slot, const void *pMap, uint32_t nBytes);
/* Add a column comparison (COLUMN COMPARISONS) to the current clause:
** input slot `slot` cmp input slot `slot2`, cmp one of CSQ_OP_EQ .. ISNOT,
** flags a collation and an affinity only (-EINVAL otherwise). For a
** condition of CASE: csq_pb_cond(b, CSQ_OP_COLCMP, flags, slot, slot2,
** cmp, 0). */
int csq_pb_colcmp(csq_pb *b, int cmp, int flags, int slot, int slot2);
/* Ask for row numbers (CSQ_PF_ROWNUM) in the results of a program without
** aggregation. */
void csq_pb_rownums(csq_pb *b);
/* Keep only the nTop rows that sort first (CSQ_PF_TOPN): set nTop, then add
** the keys in order, each an input slot, ascending or descending. */
int csq_pb_topn(csq_pb *b, uint32_t nTop);
int csq_pb_topn_key(csq_pb *b, int slot, int bDesc);
/* Emit the program: *pp is malloc'd (caller frees), *pn its size. A program
** with a group key or an aggregate is emitted as version 2 with CSQ_PF_AGG
** (then csq_pb_output must not have been used), one with row numbers or a
** top-N as version 2 with CSQ_PF_ROWNUM or CSQ_PF_TOPN, else as version 1. */
int csq_pb_finish(csq_pb *b, uint8_t **pp, size_t *pn);

/* Aggregation (version 2). Expressions return their instruction index; an
** operand is an index returned earlier. Errors as above (-EINVAL for an
** index out of range or a limit reached). */
int csq_pb_expr(csq_pb *b, int op, int a, int bb, int c); /* raw instruction */
int csq_pb_expr_col(csq_pb *b, int slot);                 /* input slot's value */
int csq_pb_expr_const(csq_pb *b, int k);                  /* constant k */
int csq_pb_expr_arith(csq_pb *b, int op, int e1, int e2); /* CSQ_EX_ADD/SUB/MUL/DIV */
int csq_pb_expr_neg(csq_pb *b, int e);
/* The code of expression e's value in key code map pMap[0..nBytes)
** (codemap.h; copied into the program as a BLOB constant). */
int csq_pb_expr_map(csq_pb *b, int e, const void *pMap, uint32_t nBytes);
/* A condition term for CASE (fields as csq_pb_term); returns its index. */
int csq_pb_cond(csq_pb *b, int op, int flags, int slot, int k0, int k1, uint32_t esc);
int csq_pb_expr_case(csq_pb *b, int cond, int eThen, int eElse);
/* GROUP BY expression e; returns the key index (0..7). */
int csq_pb_group(csq_pb *b, int e);
/* Aggregate fn (CSQ_AGG_*) of expression e (ignored for COUNT_STAR: pass
** -1); flags: collation for MIN/MAX. Returns the aggregate index. */
int csq_pb_agg(csq_pb *b, int fn, int flags, int e);

/* ---- Zone maps (host side) -----------------------------------------------
** 1 if no row of a row group of nRow rows (nDel of them deleted) can satisfy
** the program's predicate, judging from the zone maps of its chunks:
** xZone(pCtx, aIn[i]) returns the zone of the row group's chunk aIn[i], or
** NULL if it has no such chunk. 0 if some row might (or a chunk is missing).
** Exact: it answers 1 only when certain, so skipping such a row group never
** changes a result. The store applies it to its row groups (store_rg_zone_skip
** in device/store/store.h). */
struct csq_zone;
int csq_prog_zone_skip(const csq_prog *pProg, uint32_t nRow, uint32_t nDel,
                       const struct csq_zone *(*xZone)(const void *pCtx, int iChunk),
                       const void *pCtx);

#endif /* CSQ_DEVICE_PROGRAM_H */

"""bench/answers.py - whether two engines gave the same answer to a query.

Owns the rules make bench (bench/run.py) and tests/sql/test_tpch_ssb.py
compare answers by, so that both judge alike:

- Order: SQL defines the order of an answer only by its ORDER BY keys. Where
  the outermost ORDER BY names result columns, the keys must come in the
  same order row by row, and rows whose keys tie may come in any order
  (Q3.x of SSB orders by d_year, revenue: equal revenues tie). Without ORDER
  BY the rows compare as a multiset. An ORDER BY on an expression compares
  position by position.
- Values: exact, except REAL results the query computes (sums and averages
  of REALs, and what is derived from them): SQLite's sum() adds in row order,
  and a csq device adds per row group and merges partial sums, so the last
  bits legitimately differ; those compare within 1e-9 relative. A result
  column named like a stored column (s_acctbal, o_totalprice, ...) is the
  stored value passed through and must be exact.
- Types: between two SQLite engines, an INTEGER and a REAL of the same value
  differ (sum() of integers must stay an integer). DuckDB answers with its
  own types (DECIMAL sums, DATE), so against it numbers compare by value,
  each within 1e-9 relative, and types are not compared.
"""
import math

REL_TOL = 1e-9


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _eq(u, v, tolerant, strict_types):
    if strict_types and type(u) is not type(v):
        return False
    if _num(u) and _num(v):
        if u == v:
            return True
        if tolerant and (isinstance(u, float) or isinstance(v, float)):
            return math.isclose(u, v, rel_tol=REL_TOL, abs_tol=0.0)
        return False
    return u == v


def _row_eq(a, b, tol, strict_types):
    return len(a) == len(b) and all(_eq(u, v, t, strict_types) for u, v, t in zip(a, b, tol))


def _canon(row):
    """A sort key for multiset comparison: types apart, REALs rounded to 9
    significant digits so that values equal within the tolerance sort alike."""
    key = []
    for v in row:
        if v is None:
            key.append((0, 0))
        elif _num(v):
            key.append((1, float("%.8e" % v)))
        else:
            key.append((2, str(v)))
    return key


def _multiset_diff(a, b, tol, strict_types, at):
    a2, b2 = sorted(a, key=_canon), sorted(b, key=_canon)
    for i, (x, y) in enumerate(zip(a2, b2)):
        if not _row_eq(x, y, tol, strict_types):
            return "rows %d-%d (any order): %r vs %r" % (at, at + len(a) - 1, tuple(x), tuple(y))
    return None


def order_keys(terms, columns):
    """ORDER BY terms (bench/queries.py order_by) as result column indices,
    or None when one of them is not a result column."""
    if terms is None:
        return None
    names = [c.lower() for c in columns]
    out = []
    for key, _desc in terms:
        if isinstance(key, int) and 1 <= key <= len(names):
            out.append(key - 1)
        elif key in names:
            out.append(names.index(key))
        else:
            return None
    return out


def diff(ref, got, columns, terms, has_order, exact_names=(), strict_types=True):
    """None when `got` is the same answer as `ref`, else what differs first.
    ref, got: lists of rows (lists or tuples); columns: result column names;
    terms: the ORDER BY terms (None without one); has_order: the query has
    an outermost ORDER BY; exact_names: column names compared exactly."""
    if ref is None or got is None:
        return "no answer"
    if len(ref) != len(got):
        return "%d rows vs %d" % (len(ref), len(got))
    exact = {n.lower() for n in exact_names}
    width = len(columns) if columns else (len(ref[0]) if ref else 0)
    tol = [not (columns and columns[i].lower() in exact) for i in range(width)]
    if not has_order:
        return _multiset_diff(ref, got, tol, strict_types, 0)
    keys = order_keys(terms, columns or [])
    if keys is None:
        for i, (x, y) in enumerate(zip(ref, got)):
            if not _row_eq(x, y, tol, strict_types):
                return "row %d: %r vs %r" % (i, tuple(x), tuple(y))
        return None
    ktol = [tol[k] for k in keys]
    i = 0
    while i < len(ref):
        kr = [ref[i][k] for k in keys]
        j = i + 1
        while j < len(ref) and _row_eq([ref[j][k] for k in keys], kr, ktol, strict_types):
            j += 1
        for r in range(i, j):
            if not _row_eq([got[r][k] for k in keys], kr, ktol, strict_types):
                return "row %d: ORDER BY keys %r vs %r" % (r, tuple(kr), tuple(got[r][k] for k in keys))
        d = _multiset_diff(ref[i:j], got[i:j], tol, strict_types, i)
        if d:
            return d
        i = j
    return None

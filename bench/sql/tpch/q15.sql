-- TPC-H Q15, top supplier; DATE = 1996-01-01, + interval '3' month = 1996-04-01;
-- the view revenue0 as a CTE (the spec allows either)
WITH revenue0 (supplier_no, total_revenue) AS (
  SELECT l_suppkey, sum(l_extendedprice * (1 - l_discount))
  FROM lineitem
  WHERE l_shipdate >= '1996-01-01'
    AND l_shipdate < '1996-04-01'
  GROUP BY l_suppkey)
SELECT s_suppkey, s_name, s_address, s_phone, total_revenue
FROM supplier, revenue0
WHERE s_suppkey = supplier_no
  AND total_revenue = (SELECT max(total_revenue) FROM revenue0)
ORDER BY s_suppkey;

"""Per-tool use: how often, how reliably, how fast, how much output, and in what order."""
from __future__ import annotations

import duckdb
import pandas as pd

from .common import run_sql, included_sql, params, resolve_runs


def tool_stats_sql() -> str:
    return f"""
    WITH inc AS ({included_sql()}),
    calls AS (  -- the next call by self-join: cheaper than a window over every call
        SELECT t.*, nxt.tool AS next_tool, t.call_idx = 0 AS is_first, nxt.tool IS NULL AS is_last
        FROM tool_calls t JOIN inc i USING (rollout_id)
        LEFT JOIN tool_calls nxt ON nxt.rollout_id = t.rollout_id AND nxt.call_idx = t.call_idx + 1),
    totals AS (SELECT count(*) AS rollouts, count(*) FILTER (WHERE n_tool_calls > 0) AS with_calls FROM inc),
    per_tool AS (
        SELECT tool, count(*) AS calls, count(DISTINCT rollout_id) AS rollouts_using,
               count(*) FILTER (WHERE status <> 'ok') AS errors,
               quantile_cont(latency_s, 0.5) AS latency_p50, quantile_cont(latency_s, 0.95) AS latency_p95,
               quantile_cont(output_chars, 0.5) AS output_chars_p50,
               quantile_cont(output_chars, 0.95) AS output_chars_p95,
               count(*) FILTER (WHERE is_first) AS first_calls, count(*) FILTER (WHERE is_last) AS last_calls
        FROM calls GROUP BY tool),
    next_counts AS (
        SELECT tool, next_tool, count(*) AS n, sum(count(*)) OVER (PARTITION BY tool) AS total
        FROM calls WHERE next_tool IS NOT NULL GROUP BY tool, next_tool),
    top_next AS (
        SELECT tool, arg_max(next_tool, (n, next_tool)) AS top_next_tool, max(n) / any_value(total) AS top_next_share
        FROM next_counts GROUP BY tool)
    SELECT p.tool, p.calls, p.calls / totals.rollouts AS calls_per_rollout,
           p.rollouts_using / totals.rollouts AS share_of_rollouts,
           p.errors, p.errors / p.calls AS error_rate,
           p.latency_p50, p.latency_p95, p.output_chars_p50, p.output_chars_p95,
           p.first_calls / nullif(totals.with_calls, 0) AS first_share,
           p.last_calls / nullif(totals.with_calls, 0) AS last_share,
           n.top_next_tool, n.top_next_share
    FROM per_tool p CROSS JOIN totals LEFT JOIN top_next n USING (tool)
    ORDER BY p.calls DESC, p.tool
    """


def tool_stats(con: duckdb.DuckDBPyConnection, run: str, include_errors: bool = False) -> pd.DataFrame:
    """Per tool of one run: calls per rollout, share of rollouts using it, errors and error rate
    (status other than ok), latency and output-size p50/p95, how often it opens (``first_share``)
    and closes (``last_share``) a rollout's calls, and the tool most often called right after it."""
    return run_sql(con, tool_stats_sql(), params(resolve_runs(con, run), include_errors)).df()


def tool_pairs_sql() -> str:
    return f"""
    WITH inc AS ({included_sql()})
    SELECT tool, next_tool, count(*) AS pairs, count(*) / sum(count(*)) OVER () AS share
    FROM (SELECT a.tool, b.tool AS next_tool
          FROM tool_calls a JOIN tool_calls b ON b.rollout_id = a.rollout_id AND b.call_idx = a.call_idx + 1
          WHERE a.rollout_id IN (SELECT rollout_id FROM inc))
    GROUP BY tool, next_tool ORDER BY pairs DESC, tool, next_tool LIMIT $limit
    """


def tool_pairs(con: duckdb.DuckDBPyConnection, run: str, limit: int = 10,
               include_errors: bool = False) -> pd.DataFrame:
    """The most common consecutive (tool, next tool) pairs of one run, with their share of all pairs."""
    return run_sql(con, tool_pairs_sql(), params(resolve_runs(con, run), include_errors, limit=int(limit))).df()

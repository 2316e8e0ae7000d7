"""Latency percentiles with bootstrap confidence intervals, for rollouts and per tool."""
from __future__ import annotations

from typing import Iterable

import duckdb
import numpy as np
import pandas as pd

from .. import stats
from .common import run_sql, included_sql, params, resolve_runs


def latency_sql() -> str:
    """Point estimates (quantile_cont) per scope: 'rollout' and each tool. $qs: fractions."""
    return f"""
    WITH inc AS ({included_sql()})
    SELECT 'rollout' AS scope, count(latency_s) AS n, quantile_cont(latency_s, $qs) AS values FROM inc
    UNION ALL
    SELECT t.tool, count(t.latency_s), quantile_cont(t.latency_s, $qs)
    FROM tool_calls t JOIN inc USING (rollout_id) GROUP BY t.tool
    ORDER BY scope <> 'rollout', scope
    """


def latency_values_sql() -> str:
    """(scope, latency_s, code) of the rollouts (scope 'rollout') and of every tool's calls, sorted
    by scope and latency; code numbers the run's dataset samples 0.. — the bootstrap's clusters,
    one numbering for every scope (integers sort far faster than ids)."""
    return f"""
    WITH inc AS (SELECT *, dense_rank() OVER (ORDER BY sample_id) - 1 AS code FROM ({included_sql()}))
    SELECT 'rollout' AS scope, latency_s, code FROM inc WHERE latency_s IS NOT NULL
    UNION ALL
    SELECT t.tool, t.latency_s, i.code FROM tool_calls t JOIN inc i USING (rollout_id) WHERE t.latency_s IS NOT NULL
    ORDER BY scope, latency_s
    """


def latency(con: duckdb.DuckDBPyConnection, run: str, percentiles: Iterable[float] = (50, 95, 99),
            ci: float = 0.95, n_boot: int = 1000, tool_n_boot: int = 200, seed: int = 0,
            include_errors: bool = False) -> pd.DataFrame:
    """Latency percentiles (seconds) of one run, overall (``scope='rollout'``) and per tool.

    CIs resample dataset samples with replacement (attempts of one sample move together),
    ``n_boot`` times for rollouts and ``tool_n_boot`` times per tool — the same resamples for
    every scope; seeded.
    """
    labels = resolve_runs(con, run)
    pcts = [float(p) for p in percentiles]
    qs = [p / 100 for p in pcts]
    p = params(labels, include_errors, qs=qs)
    points = run_sql(con, latency_sql(), p).df()
    values = run_sql(con, latency_values_sql(), p).fetchnumpy()
    scope_of, lat, code = values["scope"], np.asarray(values["latency_s"], dtype=float), values["code"]
    n_clusters = int(code.max()) + 1 if len(code) else 0
    starts = np.flatnonzero(np.r_[True, scope_of[1:] != scope_of[:-1]]) if len(scope_of) else np.array([], int)
    bounds_of = np.r_[starts, len(scope_of)]
    scopes = {str(scope_of[a]): (lat[a:b], code[a:b], n_boot if scope_of[a] == "rollout" else tool_n_boot)
              for a, b in zip(bounds_of[:-1], bounds_of[1:])}
    bounds = stats.cluster_bootstrap_quantiles_shared(scopes, n_clusters, qs, seed=seed, ci=ci)
    rows = []
    for scope, n, point in points.itertuples(index=False):  # one iteration per scope, not per row
        b = bounds.get(scope, np.full((len(qs), 2), np.nan))
        for i, pct in enumerate(pcts):
            rows.append({"scope": scope, "percentile": pct, "value": point[i] if n else np.nan,
                         "ci_low": b[i, 0], "ci_high": b[i, 1], "n": int(n)})
    return pd.DataFrame(rows, columns=["scope", "percentile", "value", "ci_low", "ci_high", "n"])


def latency_ecdf_sql() -> str:
    """Each counted rollout's latency with the share of its run's rollouts at or below it."""
    return f"""
    SELECT run_id AS run, latency_s, cume_dist() OVER (PARTITION BY run_id ORDER BY latency_s) AS share
    FROM ({included_sql()}) WHERE latency_s IS NOT NULL
    ORDER BY list_position($runs, run_id), latency_s
    """


def latency_ecdf(con: duckdb.DuckDBPyConnection, runs=None, include_errors: bool = False) -> pd.DataFrame:
    """The empirical CDF of rollout latency per run: (run, latency_s, share)."""
    return run_sql(con, latency_ecdf_sql(), params(resolve_runs(con, runs, expand=True), include_errors)).df()

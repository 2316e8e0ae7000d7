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


def latency_values_sql(scope: str) -> str:
    """(latency_s, sample_id) of the rollouts, or of one tool's calls ($tool)."""
    if scope == "rollout":
        return f"SELECT latency_s, sample_id FROM ({included_sql()}) WHERE latency_s IS NOT NULL"
    return f"""SELECT t.latency_s, i.sample_id FROM tool_calls t JOIN ({included_sql()}) i USING (rollout_id)
               WHERE t.tool = $tool AND t.latency_s IS NOT NULL"""


def latency(con: duckdb.DuckDBPyConnection, run: str, percentiles: Iterable[float] = (50, 95, 99),
            ci: float = 0.95, n_boot: int = 1000, tool_n_boot: int = 200, seed: int = 0,
            include_errors: bool = False) -> pd.DataFrame:
    """Latency percentiles (seconds) of one run, overall (``scope='rollout'``) and per tool.

    CIs resample dataset samples with replacement (attempts of one sample move together),
    ``n_boot`` times for rollouts and ``tool_n_boot`` times per tool; seeded.
    """
    labels = resolve_runs(con, run)
    pcts = [float(p) for p in percentiles]
    qs = [p / 100 for p in pcts]
    p = params(labels, include_errors, qs=qs)
    points = run_sql(con, latency_sql(), p).df()
    rows = []
    for scope, n, values in points.itertuples(index=False):  # one iteration per scope, not per row
        if n:
            sql = latency_values_sql("rollout" if scope == "rollout" else "tool")
            arrays = run_sql(con, sql, {**p, "tool": scope}).fetchnumpy()
            bounds = stats.cluster_bootstrap_quantiles(
                arrays["latency_s"], arrays["sample_id"], qs,
                n_boot=n_boot if scope == "rollout" else tool_n_boot, seed=seed, ci=ci)
        else:
            bounds = np.full((len(qs), 2), np.nan)
        for i, pct in enumerate(pcts):
            rows.append({"scope": scope, "percentile": pct, "value": values[i] if n else np.nan,
                         "ci_low": bounds[i, 0], "ci_high": bounds[i, 1], "n": int(n)})
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
    return run_sql(con, latency_ecdf_sql(), params(resolve_runs(con, runs), include_errors)).df()

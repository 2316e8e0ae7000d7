"""Score, signal, tool-use and latency summaries per run (DESIGN.md, "Metric definitions")."""
from __future__ import annotations

from typing import Iterable

import duckdb
import pandas as pd

from ... import config
from .common import run_sql, included_sql, params, resolve_runs, selected_sql, threshold

# Method-of-moments Beta prior parameters are kept within these bounds.
PRIOR_BOUNDS = (0.05, 50.0)


def comb_ratio_sql(top: str, bottom: str, k: str) -> str:
    """C(top, k) / C(bottom, k) for integers top <= bottom, k <= bottom (0 when top < k), as the
    product of (top - j) / (bottom - j) over j < k, summed in logs: plain SQL that Spark runs
    too (spark.py turns the list sum into its AGGREGATE), so no Python function on the workers."""
    return (f"CASE WHEN {top} < {k} THEN 0.0 ELSE exp(coalesce(list_sum(list_transform(range({k}), "
            f"lambda j: ln((({top}) - j) / (({bottom}) - j)))), 0.0)) END")


def per_sample_sql() -> str:
    """Per (run, sample): attempts n, successes c, mean/std/min/max score over counted rollouts.
    Rollouts that never reached a dataset sample (NULL sample) are no sample's attempts."""
    return f"""
    SELECT run_id, sample_id, count(*) AS n, count(*) FILTER (WHERE s >= pass_at) AS c,
           avg(s) AS mean, stddev_pop(s) AS std, min(s) AS min, max(s) AS max,
           any_value(floor) AS floor, any_value(pass_at) AS pass_at
    FROM ({included_sql()}) WHERE sample_id IS NOT NULL GROUP BY run_id, sample_id
    """


def pass_k_sql() -> str:
    """pass@k (Chen et al. 2021, unbiased) and pass^k (tau-bench) per run and k in $ks."""
    return f"""
    WITH per_sample AS ({per_sample_sql()})
    SELECT run_id, k,
        avg(1 - {comb_ratio_sql('n - c', 'n', 'k')}) FILTER (WHERE n >= k) AS pass_at_k,
        avg({comb_ratio_sql('c', 'n', 'k')}) FILTER (WHERE n >= k) AS pass_hat_k,
        count(*) FILTER (WHERE n >= k) AS samples_used,
        count(*) FILTER (WHERE n < k) AS samples_excluded
    FROM per_sample, unnest($ks) AS ks(k)
    GROUP BY run_id, k
    """


def summary_sql() -> str:
    lt = int(config.LONG_TAIL_CALLS)
    return f"""
    WITH sel AS ({selected_sql()}),
    inc AS (SELECT * FROM sel WHERE $include_errors OR NOT excluded),
    per_sample AS ({per_sample_sql()}),
    by_sample AS (
        SELECT run_id, count(*) AS samples, min(n) AS attempts_min, median(n) AS attempts_median,
               max(n) AS attempts_max, avg(mean) AS mean_of_sample_means, avg(max) AS best_of_n,
               count(*) FILTER (WHERE n >= 2) AS samples_multi,
               count(*) FILTER (WHERE n >= 2 AND max > min) AS samples_with_signal
        FROM per_sample GROUP BY run_id),
    by_status AS (
        SELECT run_id, count(*) AS rollouts,
               count(*) FILTER (WHERE status = 'ok') AS n_ok,
               count(*) FILTER (WHERE status = 'model_error') AS n_model_error,
               count(*) FILTER (WHERE status = 'infra_error') AS n_infra_error,
               count(*) FILTER (WHERE status = 'truncated') AS n_truncated,
               count(*) FILTER (WHERE status = 'ungraded') AS n_ungraded,
               count(*) FILTER (WHERE excluded AND NOT $include_errors) AS n_excluded
        FROM sel GROUP BY run_id),
    by_rollout AS (
        SELECT run_id, count(*) AS rollouts_used, avg(s) AS mean_score,
               avg(n_tool_calls) AS tool_calls_mean,
               quantile_cont(n_tool_calls, 0.5) AS tool_calls_p50,
               quantile_cont(n_tool_calls, 0.95) AS tool_calls_p95,
               max(n_tool_calls) AS tool_calls_max,
               avg((n_tool_calls > {lt})::INTEGER) AS long_tail_share,
               avg(n_turns) AS turns_mean,
               sum(n_tool_calls) / nullif(sum(n_turns), 0) AS parallel_width_mean,
               quantile_cont(latency_s, 0.5) AS latency_p50,
               quantile_cont(latency_s, 0.95) AS latency_p95,
               quantile_cont(latency_s, 0.99) AS latency_p99,
               avg(input_tokens) AS input_tokens_mean, avg(output_tokens) AS output_tokens_mean,
               avg(reasoning_tokens) AS reasoning_tokens_mean, NULL::DOUBLE AS cost_mean,  -- rl.cost's (below)
               min(s) AS score_min, max(s) AS score_max
        FROM inc GROUP BY run_id),
    scale AS (SELECT run_id, any_value(floor) AS reward_floor, any_value(pass_at) AS pass_threshold
              FROM sel GROUP BY run_id),
    repeats AS (  -- consecutive pairs by self-join: cheaper than a window over every call
        SELECT i.run_id, avg((a.tool = b.tool)::INTEGER) AS repeat_rate
        FROM tool_calls a JOIN tool_calls b ON b.rollout_id = a.rollout_id AND b.call_idx = a.call_idx + 1
        JOIN inc i ON i.rollout_id = a.rollout_id GROUP BY i.run_id)
    SELECT b.run_id AS run, b.rollouts, coalesce(r.rollouts_used, 0) AS rollouts_used,
           coalesce(s.samples, 0) AS samples, s.attempts_min, s.attempts_median, s.attempts_max,
           b.n_ok, b.n_model_error, b.n_infra_error, b.n_truncated, b.n_ungraded, b.n_excluded,
           r.mean_score, s.mean_of_sample_means, s.best_of_n,
           s.samples_with_signal, s.samples_multi,
           s.samples_with_signal / nullif(s.samples_multi, 0) AS signal_share,
           r.tool_calls_mean, r.tool_calls_p50, r.tool_calls_p95, r.tool_calls_max, r.long_tail_share,
           r.turns_mean, r.parallel_width_mean, p.repeat_rate,
           r.latency_p50, r.latency_p95, r.latency_p99,
           r.input_tokens_mean, r.output_tokens_mean, r.reasoning_tokens_mean, r.cost_mean,
           k.reward_floor, k.pass_threshold, r.score_min, r.score_max
    FROM by_status b LEFT JOIN by_sample s USING (run_id) LEFT JOIN by_rollout r USING (run_id)
    LEFT JOIN repeats p USING (run_id) LEFT JOIN scale k USING (run_id)
    ORDER BY list_position($runs, b.run_id)
    """


def summary(con: duckdb.DuckDBPyConnection, runs: str | Iterable[str] | None = None,
            pass_threshold: float | None = None, ks: Iterable[int] = (1, 2, 4, 8),
            include_errors: bool = False) -> pd.DataFrame:
    """One row per run: counts, scores, signal, pass@k / pass^k, tool use, latency, tokens, cost.

    ``pass_at_{k}`` / ``pass_hat_{k}`` are NaN where no sample has k attempts;
    ``pass_k_samples_{k}`` says how many samples each used. ``n_excluded`` counts the infra errors
    and ungraded rollouts left out (0 with ``include_errors=True``). The run's reward scale:
    ``reward_floor`` (what a rollout without a score counts as), ``pass_threshold`` (the run's
    own unless one is given), ``score_min`` / ``score_max`` of the counted rollouts.
    """
    labels = resolve_runs(con, runs, expand=True)
    ks = [int(k) for k in ks]
    p = params(labels, include_errors, threshold=threshold(pass_threshold))
    df = run_sql(con, summary_sql(), p).df()
    df["cost_mean"] = _cost_per_rollout(con, labels, df, pass_threshold, include_errors)
    if ks and not df.empty:
        pk = run_sql(con, pass_k_sql(), {**p, "ks": ks}).df()
        wide = pk.pivot(index="run_id", columns="k", values=["pass_at_k", "pass_hat_k", "samples_used"])
        for k in ks:
            for name, col in (("pass_at", "pass_at_k"), ("pass_hat", "pass_hat_k"),
                              ("pass_k_samples", "samples_used")):
                values = wide[(col, k)] if (col, k) in wide.columns else pd.Series(dtype=float)
                df[f"{name}_{k}"] = df["run"].map(values).astype(float if name != "pass_k_samples" else "Int64")
    return df


def _cost_per_rollout(con, labels, df, pass_threshold, include_errors) -> pd.Series:
    """``rl.cost``'s cost_per_rollout (logged cost, else tokens × dated prices): one number for
    what a rollout costs, in summary as in compare, the report and ``rolloutlab cost``. A model
    without a price gives NULL here; ``rl.cost`` and ``rolloutlab cost`` say so."""
    import warnings

    from .costs import PriceWarning, cost

    if df.empty:
        return pd.Series(dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PriceWarning)
        priced = cost(con, labels, pass_threshold=pass_threshold, include_errors=include_errors)
    return df["run"].map(dict(zip(priced["run"], priced["cost_per_rollout"]))).astype(float)


def sample_stats_sql() -> str:
    return f"""
    SELECT sample_id, n AS attempts, mean, std, min, max, (n >= 2 AND max > min) AS has_signal,
           c / n AS success_rate, c AS successes, floor AS reward_floor, pass_at AS pass_threshold
    FROM ({per_sample_sql()}) ORDER BY round(mean, 9), sample_id  -- equal means (to the last bits of a sum) tie
    """


def sample_stats(con: duckdb.DuckDBPyConnection, run: str, pass_threshold: float | None = None,
                 include_errors: bool = False) -> pd.DataFrame:
    """Per sample of one run: attempts, mean, population std, min, max, has_signal, success rate,
    and the run's ``reward_floor`` and ``pass_threshold`` (where the variance plot's bars start)."""
    labels = resolve_runs(con, run)
    return run_sql(con, sample_stats_sql(),
                       params(labels, include_errors, threshold=threshold(pass_threshold))).df()


def signal_plan_sql() -> str:
    """Expected signal share at k attempts: mean over samples of P(k attempts neither all succeed
    nor all fail) = 1 - E[p^k] - E[(1-p)^k], with p a sample's success probability under its
    posterior Beta(a + c, b + n - c). The prior Beta(a, b) is fitted to the run's per-sample
    success rates by the method of moments: the variance of the true rates is the observed
    variance of c/n less the binomial noise of a few attempts, mean of p(1-p)/(n-1) (without that
    correction the prior came out too U-shaped and the forecast fell 3–17 points short in
    simulation). Jeffreys' Beta(1/2, 1/2) when no sample ever or every sample always succeeds,
    so an unseen success is unlikely but never impossible; rates that vary no more than noise
    give the strongest prior allowed."""
    lo, hi = PRIOR_BOUNDS
    e_pow = ("exp(lgamma({x} + k) - lgamma({x}) + lgamma(alpha + beta) - lgamma(alpha + beta + k))")
    return f"""
    WITH per_sample AS ({per_sample_sql()}),
    moments AS (SELECT avg(c / n) AS m,
                       var_pop(c / n) - avg(CASE WHEN n > 1 THEN (c / n) * (1 - c / n) / (n - 1) ELSE 0 END) AS v
                FROM per_sample),
    prior AS (
        SELECT CASE WHEN m > 0 AND m < 1 THEN CASE WHEN v > 0 THEN greatest(m * (1 - m) / v - 1, 0.0)
                                                   ELSE {hi} END END AS strength,
               m FROM moments),
    ab AS (  -- greatest/least skip NULLs, hence the explicit fallback
        SELECT CASE WHEN strength IS NULL THEN 0.5 ELSE least(greatest(m * strength, {lo}), {hi}) END AS a,
               CASE WHEN strength IS NULL THEN 0.5 ELSE least(greatest((1 - m) * strength, {lo}), {hi}) END AS b
        FROM prior),
    post AS (SELECT a + c AS alpha, b + n - c AS beta, a, b FROM per_sample, ab)
    SELECT k, greatest(avg(1 - {e_pow.format(x='alpha')} - {e_pow.format(x='beta')}), 0.0) AS expected_signal_share,
           count(*) AS samples, any_value(a) AS prior_a, any_value(b) AS prior_b
    FROM post, unnest($ks) AS ks(k) GROUP BY k ORDER BY k
    """


def observed_signal_sql() -> str:
    """What the run shows, on both definitions of signal, over samples with two attempts or more:
    the median attempts per sample, the share whose attempts include a pass and a fail (what
    ``signal_plan`` forecasts) and the share whose scores vary at all (``summary``'s signal_share,
    larger with partial credit)."""
    return f"""
    WITH per_sample AS ({per_sample_sql()})
    SELECT quantile_disc(n, 0.5) FILTER (WHERE n >= 2) AS k,
           avg((c > 0 AND c < n)::INTEGER) FILTER (WHERE n >= 2) AS pass_fail,
           avg((max > min)::INTEGER) FILTER (WHERE n >= 2) AS score_varies
    FROM per_sample
    """


PLAN_DEFINITION = ("the share of samples whose attempts include both a pass and a fail (score >= the pass "
                   "threshold and below it): the signal a pass/fail reward gives")


def signal_plan(con: duckdb.DuckDBPyConnection, run: str, ks: Iterable[int] = (1, 2, 3, 4, 8, 16, 32),
                target: float = 0.3, pass_threshold: float | None = None,
                include_errors: bool = False) -> pd.DataFrame:
    """Expected signal share per number of attempts — ``PLAN_DEFINITION``: a pass and a fail among
    the attempts — from the run's own attempts (signal_plan_sql); ``recommended`` marks the smallest
    k that reaches ``target`` (the compute multiplier to ask for; none when no k does).

    It starts from what the run shows: ``observed_signal_share`` is the share seen at the run's
    median attempts per sample (``attrs["observed_k"]``; that k is always a row), on the same
    definition, beside the forecast for it. ``attrs``: ``definition``, ``observed_k``,
    ``observed_signal_share`` and ``observed_score_varies`` — the share whose scores vary at all,
    ``summary``'s signal_share, which partial credit makes larger than the pass/fail share."""
    labels = resolve_runs(con, run)
    p = params(labels, include_errors, threshold=threshold(pass_threshold))
    k_obs, seen, varies = run_sql(con, observed_signal_sql(), p).fetchone()
    ks = sorted({int(k) for k in ks} | ({int(k_obs)} if k_obs else set()))
    df = run_sql(con, signal_plan_sql(), {**p, "ks": ks}).df()
    df["observed_signal_share"] = [float(seen) if k_obs and k == k_obs and seen is not None else float("nan")
                                   for k in df.k]
    df.attrs.update(definition=PLAN_DEFINITION, observed_k=None if k_obs is None else int(k_obs),
                    observed_signal_share=None if seen is None else float(seen),
                    observed_score_varies=None if varies is None else float(varies))
    df["target"] = target
    df["reaches_target"] = df["expected_signal_share"] >= target
    first = df.index[df["reaches_target"]]
    df["recommended"] = False
    if len(first):
        df.loc[first[0], "recommended"] = True
    return df


def rollout_table_sql() -> str:
    return f"""
    SELECT run_id AS run, sample_id, attempt, rollout_id, status, s AS score, n_tool_calls, n_turns,
           latency_s, input_tokens, output_tokens, final_answer
    FROM ({included_sql()})
    ORDER BY list_position($runs, run_id), sample_id, attempt
    LIMIT $limit
    """


def rollout_table(con: duckdb.DuckDBPyConnection, runs: str | Iterable[str] | None = None,
                  include_errors: bool = False, limit: int = 1_000_000) -> pd.DataFrame:
    """One row per counted rollout (score as counted, tool calls, turns, latency, tokens): the
    points of scatter plots, with what a hover shows."""
    return run_sql(con, rollout_table_sql(), params(resolve_runs(con, runs), include_errors,
                                                    limit=int(limit))).df()

"""Per-grader statistics and how graders agree (docs/metrics.md, "Graders").

A rollout's score is usually a blend of several graders (tests and a model judge, content and
format). Each grade row is one grader's verdict on one rollout; a grade whose score is NULL is a
grader that failed. A grade passes when its ``passed`` flag says so, else when its score reaches
the pass threshold.
"""
from __future__ import annotations

import duckdb
import pandas as pd

from .common import params, resolve_runs, run_sql, selected_sql, threshold

STATS_COLUMNS = ["grader", "rollouts", "scored_share", "mean", "std", "min", "max", "pass_rate", "signal_share",
                 "samples_with_signal", "samples_multi", "weight", "n_failed", "failed_share",
                 "latency_p50", "latency_p95"]
PAIR_COLUMNS = ["grader_a", "grader_b", "rollouts", "correlation", "disagree_share", "n_disagree",
                "a_pass_b_fail", "a_fail_b_pass", "full_vs_zero", "examples"]


def grade_rows_sql() -> str:
    """One row per (rollout, grader) of the chosen runs: the mean of its scores (a grader logged twice
    for a rollout counts once), whether it passed, whether the rollout counts (not excluded)."""
    return f"""
    WITH sel AS ({selected_sql()})
    SELECT g.rollout_id, g.grader, any_value(sel.run_id) AS run_id, any_value(sel.sample_id) AS sample_id,
           any_value($include_errors OR NOT sel.excluded) AS counted,
           avg(g.score) AS score, avg(g.weight) AS weight,
           CASE WHEN count(g.score) = 0 THEN NULL
                ELSE bool_and(coalesce(g.passed, g.score >= sel.pass_at)) END AS pass,
           count(*) FILTER (WHERE g.score IS NULL) AS n_failed, count(*) AS n_grades,
           avg(g.latency_s) AS latency_s, any_value(sel.pass_at) AS pass_at, any_value(sel.floor) AS floor
    FROM grades g JOIN sel USING (rollout_id)
    GROUP BY g.rollout_id, g.grader
    """


def grader_stats_sql() -> str:
    return f"""
    WITH gr AS ({grade_rows_sql()}),
    counted_rollouts AS (
        SELECT count(*) AS n FROM ({selected_sql()}) WHERE $include_errors OR NOT excluded),
    scored AS (SELECT * FROM gr WHERE counted AND score IS NOT NULL),
    per_sample AS (
        SELECT grader, sample_id, count(*) AS n, max(score) > min(score) AS varies
        FROM scored WHERE sample_id IS NOT NULL GROUP BY grader, sample_id),
    signal AS (
        SELECT grader, count(*) FILTER (WHERE n >= 2) AS samples_multi,
               count(*) FILTER (WHERE n >= 2 AND varies) AS samples_with_signal
        FROM per_sample GROUP BY grader),
    scores AS (
        SELECT grader, count(*) AS rollouts, avg(score) AS mean, stddev_pop(score) AS std,
               min(score) AS min, max(score) AS max, avg(pass::INTEGER) AS pass_rate, avg(weight) AS weight
        FROM scored GROUP BY grader),
    failures AS (  -- over every rollout of the run: a failed grader often made its rollout an infra error
        SELECT grader, sum(n_failed) AS n_failed, sum(n_failed) / sum(n_grades) AS failed_share,
               quantile_cont(latency_s, 0.5) AS latency_p50, quantile_cont(latency_s, 0.95) AS latency_p95
        FROM gr GROUP BY grader)
    SELECT f.grader, coalesce(s.rollouts, 0) AS rollouts,
           coalesce(s.rollouts, 0) / nullif((SELECT n FROM counted_rollouts), 0) AS scored_share,
           s.mean, s.std, s.min, s.max, s.pass_rate,
           g.samples_with_signal / nullif(g.samples_multi, 0) AS signal_share,
           coalesce(g.samples_with_signal, 0) AS samples_with_signal, coalesce(g.samples_multi, 0) AS samples_multi,
           s.weight, f.n_failed, f.failed_share, f.latency_p50, f.latency_p95
    FROM failures f LEFT JOIN scores s USING (grader) LEFT JOIN signal g USING (grader)
    ORDER BY f.grader
    """


def grader_stats(con: duckdb.DuckDBPyConnection, run: str, pass_threshold: float | None = None,
                 include_errors: bool = False) -> pd.DataFrame:
    """One row per grader of one run: rollouts it scored (and their share of the counted rollouts),
    mean / std / min / max score, pass rate, signal share (samples with 2+ attempts whose score from
    this grader varies), mean weight, failed grades (count and share, over every rollout of the run)
    and grader latency where logged. ``attrs["pairs"]`` holds ``grader_pairs`` of the same run."""
    labels = resolve_runs(con, run)
    p = params(labels, include_errors, threshold=threshold(pass_threshold))
    df = run_sql(con, grader_stats_sql(), p).df()[STATS_COLUMNS]
    df.attrs["pairs"] = grader_pairs(con, run, pass_threshold=pass_threshold, include_errors=include_errors)
    return df


def grader_pairs_sql() -> str:
    """Every two graders that scored the same counted rollouts: Pearson correlation of their
    scores, pass/fail disagreement, full marks against zero, and example rollouts (largest score
    gap first)."""
    return f"""
    WITH gr AS (SELECT * FROM ({grade_rows_sql()}) WHERE counted AND score IS NOT NULL),
    paired AS (
        SELECT a.grader AS grader_a, b.grader AS grader_b, a.rollout_id, a.score AS a_score, b.score AS b_score,
               a.pass AS a_pass, b.pass AS b_pass, a.pass_at, a.floor
        FROM gr a JOIN gr b ON a.rollout_id = b.rollout_id AND a.grader < b.grader)
    SELECT grader_a, grader_b, count(*) AS rollouts,
           CASE WHEN stddev_pop(a_score) > 0 AND stddev_pop(b_score) > 0 THEN corr(a_score, b_score) END AS correlation,
           avg((a_pass <> b_pass)::INTEGER) AS disagree_share,
           count(*) FILTER (WHERE a_pass <> b_pass) AS n_disagree,
           count(*) FILTER (WHERE a_pass AND NOT b_pass) AS a_pass_b_fail,
           count(*) FILTER (WHERE b_pass AND NOT a_pass) AS a_fail_b_pass,
           count(*) FILTER (WHERE (a_score >= pass_at AND b_score <= floor) OR (b_score >= pass_at AND a_score <= floor))
               AS full_vs_zero,
           coalesce(list(rollout_id ORDER BY abs(a_score - b_score) DESC, rollout_id)
                    FILTER (WHERE a_pass <> b_pass)[1:$examples], []) AS examples
    FROM paired GROUP BY grader_a, grader_b ORDER BY grader_a, grader_b
    """


def grader_pairs(con: duckdb.DuckDBPyConnection, run: str, pass_threshold: float | None = None,
                 include_errors: bool = False, examples: int = 3) -> pd.DataFrame:
    """One row per pair of graders of one run (``grader_a`` < ``grader_b``): rollouts both scored,
    correlation of their scores (NaN when either never varies), share and counts of pass/fail
    disagreements each way, rollouts where one gave full marks (the pass threshold) and the other
    the run's lowest reward (0, or -1 for rewards in [-1, 1]), and up to
    ``examples`` disagreeing rollout ids."""
    labels = resolve_runs(con, run)
    p = params(labels, include_errors, threshold=threshold(pass_threshold), examples=int(examples))
    return run_sql(con, grader_pairs_sql(), p).df()[PAIR_COLUMNS]


def per_sample_grader_sql() -> str:
    """Per (run, sample, grader): the mean score of the counted rollouts that grader scored; the
    per-sample input of compare's per-grader rows."""
    return f"""
    SELECT run_id, sample_id, grader, avg(score) AS score
    FROM ({grade_rows_sql()}) WHERE counted AND score IS NOT NULL AND sample_id IS NOT NULL
    GROUP BY run_id, sample_id, grader
    """


def per_sample_grader_scores(con: duckdb.DuckDBPyConnection, runs: list[str], include_errors: bool = False,
                             pass_threshold: float | None = None) -> pd.DataFrame:
    return run_sql(con, per_sample_grader_sql(),
                   params(runs, include_errors, threshold=threshold(pass_threshold))).df()

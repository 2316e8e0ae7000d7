"""Base vs candidate on the same samples: paired differences with honest error bars.

Every metric is computed over the samples present in both runs (the others are counted and
reported), as a ratio of per-sample sums: per-sample metrics (score, pass@1, best-of-n) weigh
every sample once, rollout metrics (tool calls, latency...) weigh every rollout once. Tests and
intervals take samples as the unit — the pair (base attempts, candidate attempts) of a sample moves
together — and each row's p-value and CI come from one test, so they never disagree: the ratio
metrics (per-sample means among them) by a clustered t (delta method; for per-sample means the
paired t-test of the d_i), latency percentiles by the percentile bootstrap.

One metric is primary (the score by default): it is tested alone at alpha, and it is what the
report's verdict and ``rl.power`` refer to. The others are secondary, adjusted for multiplicity as
one family; exact duplicates of the primary and metrics constant in both runs are shown, not
tested (docs/metrics.md, "Which test decides").
"""
from __future__ import annotations

import math

import duckdb
import numpy as np
import pandas as pd

from .. import config
from . import stats
from .metrics.common import common_threshold, included_sql, params, resolve_runs, run_sql, selected_sql, threshold
from .metrics import costs
from .metrics.costs import priced_sql, truncated_sql
from .metrics.graders import per_sample_grader_scores
from .metrics.scores import summary

COLUMNS = ["metric", "base", "candidate", "diff", "rel_change", "ci_low", "ci_high", "p_value", "p_holm", "q_bh",
           "se", "n_samples", "significant", "unit", "family", "method"]

COMPARE_PRIMARY = config.COMPARE_PRIMARY  # (config.py says why)
COMPARE_ADJUSTMENT = config.COMPARE_ADJUSTMENT
ADJUSTMENTS = {"holm": "p_holm", "bh": "q_bh", "none": "p_value"}
ADJUSTMENT_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no adjustment"}
# ``family``: how a row takes part in the decisions
PRIMARY, SECONDARY, DUPLICATE, CONSTANT, UNTESTED = "primary", "secondary", "duplicate", "constant", "untested"
# ``method``: the test behind a row's p-value and CI
CLUSTERED_T, PERCENTILE = "clustered t", "percentile bootstrap"
# names of the two means of a run's score (docs/metrics.md, "Two means")
MEAN_OVER_ROLLOUTS = "mean over rollouts"
MEAN_OF_SAMPLE_MEANS = "mean of per-sample means"

# metric -> (numerator column, denominator column, unit); columns of per_sample_sql, per run.
RATIO_METRICS = {
    "score": ("score_mean", "one", "score"),
    "pass@1": ("pass_rate", "one", "share"),
    "best_of_n": ("best", "one", "score"),
    "signal_share": ("has_signal", "multi", "share"),
    "tool_calls_per_rollout": ("calls", "n", "calls"),
    "long_tail_share": ("tail", "n", "share"),
    "truncated_share": ("truncated", "n", "share"),
    "turns_per_rollout": ("turns", "n", "turns"),
    "parallel_width": ("calls", "turns", "calls/turn"),
    "tokens_per_rollout": ("tokens", "n_tokens", "tokens"),
    "cost_per_rollout": ("cost", "n_cost", "USD"),
    "cost_per_solved": ("cost", "passes_costed", "USD"),
    "infra_error_rate": ("infra", "total", "share"),
}
LATENCY_METRICS = {"latency_p50": 0.50, "latency_p95": 0.95}
GRADER_PREFIX = "grader:"  # per-grader rows: "grader:<name>", the sample's mean score from that grader
# Metrics where a rise is an improvement, and where a fall is: a metric's direction lives with it
# (the report's verdict says "better" / "worse" by them; any other primary: "higher" / "lower").
HIGHER_IS_BETTER = {"score", "pass@1", "best_of_n"}
LOWER_IS_BETTER = {"tool_calls_per_rollout", "long_tail_share", "truncated_share", "turns_per_rollout",
                   "tokens_per_rollout", "cost_per_rollout", "cost_per_solved", "infra_error_rate", "latency_p50",
                   "latency_p95"}


def per_sample_sql(adjusted: bool = False) -> str:
    """One row per sample present in either run: both runs' sums side by side (b_*, c_*). With
    ``adjusted``, the rollouts of $leave_out count nowhere and those of $fail score their run's floor
    (``compare_without``). Costs are
    ``rl.cost``'s, rollout by rollout (``metrics.costs.priced_sql``: the logged cost where there is
    one, else tokens × the dated prices; its parameters bound by ``costs._priced``);
    ``passes_costed`` counts the passing rollouts with a cost (the denominator of
    cost_per_solved); ``truncated`` the rollouts cut at a limit (``truncated_sql``), ``stop_known``
    those whose stop reason is known."""
    lt = int(config.LONG_TAIL_CALLS)
    cols = ["score_mean", "pass_rate", "best", "has_signal", "multi", "one", "n", "calls", "tail", "turns",
            "tokens", "n_tokens", "cost", "n_cost", "passes_costed", "truncated", "stop_known", "infra", "total"]
    pick = ", ".join(f"b.{c} AS b_{c}, c.{c} AS c_{c}" for c in cols)
    scored = ", CASE WHEN list_contains($fail, i.rollout_id) THEN i.floor ELSE i.s END AS s" if adjusted else ""
    kept = "\n              WHERE NOT list_contains($leave_out, i.rollout_id)" if adjusted else ""
    return f"""
    WITH counted AS (
        SELECT run_id, sample_id, avg(s) AS score_mean,
               count(*) FILTER (WHERE s >= pass_at) / count(*) AS pass_rate, max(s) AS best,
               (count(*) >= 2 AND max(s) > min(s))::INTEGER AS has_signal, (count(*) >= 2)::INTEGER AS multi,
               1 AS one, count(*) AS n, sum(n_tool_calls) AS calls,
               count(*) FILTER (WHERE n_tool_calls > {lt}) AS tail, sum(n_turns) AS turns,
               sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0))
                   FILTER (WHERE input_tokens IS NOT NULL OR output_tokens IS NOT NULL) AS tokens,
               count(*) FILTER (WHERE input_tokens IS NOT NULL OR output_tokens IS NOT NULL) AS n_tokens,
               sum(cost_usd) AS cost, count(cost_usd) AS n_cost,
               count(*) FILTER (WHERE s >= pass_at AND cost_usd IS NOT NULL) AS passes_costed,
               count(*) FILTER (WHERE {truncated_sql()}) AS truncated,
               count(*) FILTER (WHERE coalesce(stop_reason, 'unknown') <> 'unknown') AS stop_known
        FROM (SELECT i.* EXCLUDE (cost_usd{', s' if adjusted else ''}), p.cost_usd{scored}
              FROM ({included_sql()}) i
              LEFT JOIN (SELECT rollout_id, cost_usd FROM ({priced_sql()})) p USING (rollout_id){kept})
        WHERE sample_id IS NOT NULL GROUP BY run_id, sample_id),
    everything AS (
        SELECT run_id, sample_id, count(*) FILTER (WHERE status = 'infra_error') AS infra, count(*) AS total
        FROM ({selected_sql()}) i WHERE sample_id IS NOT NULL{kept.replace(" WHERE", " AND")}
        GROUP BY run_id, sample_id),
    per_run AS (
        SELECT e.run_id, e.sample_id, c.* EXCLUDE (run_id, sample_id), e.infra, e.total
        FROM everything e LEFT JOIN counted c USING (run_id, sample_id))
    SELECT coalesce(b.sample_id, c.sample_id) AS sample_id,
           b.sample_id IS NOT NULL AS in_base, c.sample_id IS NOT NULL AS in_candidate,
           b.n IS NOT NULL AND c.n IS NOT NULL AS shared, {pick}
    FROM (SELECT * FROM per_run WHERE run_id = $base) b
    FULL OUTER JOIN (SELECT * FROM per_run WHERE run_id = $candidate) c USING (sample_id)
    ORDER BY sample_id
    """


def latency_values_sql() -> str:
    """Latencies of the counted rollouts of samples counted in both runs, with the sample's code:
    its position among those samples ordered by sample_id (the order of per_sample_sql)."""
    return f"""
    WITH inc AS ({included_sql()}),
    shared AS (
        SELECT sample_id, row_number() OVER (ORDER BY sample_id) - 1 AS code
        FROM inc WHERE sample_id IS NOT NULL GROUP BY sample_id HAVING count(DISTINCT run_id) = 2)
    SELECT run_id = $candidate AS is_candidate, latency_s, code
    FROM inc JOIN shared USING (sample_id) WHERE latency_s IS NOT NULL
    """


def _per_sample(con, base, candidate, thr, include_errors, leave_out=None, fail=None) -> pd.DataFrame:
    p, _ = costs._priced(con, [base, candidate], None, include_errors, thr, warn=False)  # rl.cost says what has no price
    p = {**p, "base": base, "candidate": candidate}
    if leave_out is None and fail is None:
        return run_sql(con, per_sample_sql(), p).df()
    return run_sql(con, per_sample_sql(adjusted=True),
                   {**p, "leave_out": [str(r) for r in leave_out or ()], "fail": [str(r) for r in fail or ()]}).df()


def per_sample_table(con, base: str, candidate: str, pass_threshold: float | None = None,
                     include_errors: bool = False) -> pd.DataFrame:
    """What ``compare`` resamples: one row per sample in either run, both runs' per-sample sums
    side by side (``per_sample_sql``)."""
    resolve_runs(con, [base, candidate])
    return _per_sample(con, base, candidate, threshold(pass_threshold), include_errors)


def _ratio_arrays(ps: pd.DataFrame) -> tuple[pd.DataFrame, tuple[np.ndarray, ...]]:
    """The shared samples of ``per_sample_sql``'s frame, and their (samples, RATIO_METRICS)
    numerators and denominators: base's, then the candidate's."""
    shared = ps[ps.shared].reset_index(drop=True)

    def columns(prefix: str, which: int) -> np.ndarray:
        return np.column_stack([shared[f"{prefix}_{spec[which]}"].fillna(0).to_numpy(float)
                                for spec in RATIO_METRICS.values()]) if len(shared) else np.empty((0, len(RATIO_METRICS)))

    nb, db, nc, dc = columns("b", 0), columns("b", 1), columns("c", 0), columns("c", 1)
    j = list(RATIO_METRICS).index("truncated_share")
    for side, den in (("b", db), ("c", dc)):  # logs that name no stop reason cannot tell a truncation: NaN, not 0
        if not shared[f"{side}_truncated"].fillna(0).sum() and not shared[f"{side}_stop_known"].fillna(0).sum():
            den[:, j] = 0.0
    return shared, (nb, db, nc, dc)


WITHOUT_COLUMNS = ["treated_as", "rollouts", "base", "candidate", "diff", "ci_low", "ci_high", "p_value",
                   "significant", "n_samples", "unit"]
LEFT_OUT, AS_FAILURES = "left out", "counted as failures"


def compare_without(con: duckdb.DuckDBPyConnection, base: str, candidate: str, rollouts, pass_threshold=None,
                    ci: float = 0.95, include_errors: bool = False, primary: str | None = None) -> pd.DataFrame:
    """Does ``compare``'s decision survive without ``rollouts`` (ids; the candidate's audit
    suspects, say)? Its primary metric again, by the same test, twice: with those rollouts left
    out (``LEFT_OUT``: they count nowhere; a sample left with none drops out of the pairing) and
    with them counted as failures (``AS_FAILURES``: scored at their run's floor — what a hack
    would have scored honestly, at worst). One row per treatment (``WITHOUT_COLUMNS``; ``rollouts``:
    how many of the ids the runs hold). The primary must be a per-sample or ratio metric (not a
    latency percentile or a grader row)."""
    primary = COMPARE_PRIMARY if primary is None else primary
    if primary not in RATIO_METRICS:
        raise ValueError(f"primary={primary!r}: compare_without recomputes one of {', '.join(RATIO_METRICS)}")
    base, candidate = resolve_runs(con, [base, candidate])
    ids = sorted({str(r) for r in rollouts})
    held = run_sql(con, "SELECT count(*) FROM rollouts WHERE list_contains($ids, rollout_id) "
                        "AND list_contains($runs, run_id)", {"ids": ids, "runs": [base, candidate]}).fetchone()[0]
    thr = common_threshold(con, [base, candidate], pass_threshold)
    nothing = stats.SortedValues(np.empty(0), np.empty(0, dtype=int), 0)
    rows = []
    for treated_as, leave_out, fail in ((LEFT_OUT, ids, []), (AS_FAILURES, [], ids)):
        ps = _per_sample(con, base, candidate, thr, include_errors, leave_out=leave_out, fail=fail)
        _, arrays = _ratio_arrays(ps)
        table = paired_table(*arrays, nothing, nothing, (), n_boot=0, ci=ci, primary=primary)
        r = table.set_index("metric").loc[primary]
        rows.append({"treated_as": treated_as, "rollouts": int(held), **{c: r[c] for c in WITHOUT_COLUMNS[2:]}})
    df = pd.DataFrame(rows, columns=WITHOUT_COLUMNS)
    df.attrs.update(base=base, candidate=candidate, primary=primary, ci=ci, pass_threshold=thr)
    return df


def compare(con: duckdb.DuckDBPyConnection, base: str, candidate: str, pass_threshold: float | None = None,
            n_boot: int = 2000, seed: int = 0, ci: float = 0.95, include_errors: bool = False,
            adjust: str | None = None, primary: str | None = None) -> pd.DataFrame:
    """One row per metric: base and candidate values, difference, relative change, CI of the
    difference, paired p-value, adjusted p-values (``p_holm``: Holm, family-wise; ``q_bh``:
    Benjamini-Hochberg, false discovery rate), clustered SE, samples used, ``significant``,
    ``family`` and ``method`` (docs/metrics.md, "Which test decides").

    ``primary`` (default ``score``, COMPARE_PRIMARY): the metric the decision rests on, tested
    alone — its ``significant`` is p <= alpha = 1 − ``ci`` and its ``p_holm`` / ``q_bh`` are its own
    p. The other rows with a test are ``secondary``: one family, adjusted by ``adjust`` (default
    ``holm``; ``bh`` or ``none``), ``significant`` where that adjusted value is <= alpha. Rows whose
    per-sample numbers are those of the primary (``duplicate``: pass@1 of pass/fail scores, a
    grader that is the score) share its test and its decision; rows constant in both runs
    (``constant``) are shown with no p-value; rows without a test are ``untested``.

    Each row's p-value and CI come from one test (``method``): ``clustered t`` for the ratio metrics
    (samples as clusters, the delta method; for per-sample means — score, pass@1, best-of-n,
    graders — the paired t-test of the per-sample differences), ``percentile bootstrap`` (``n_boot``
    resamples of samples) for the latency percentiles. ``attrs`` hold the sample coverage,
    win/tie/loss counts, ``primary``, ``adjustment``, ``significant_from``, ``alpha``, ``tests`` (the
    secondary family's size), ``duplicates``, ``constant`` and the settings.

    After the run-level metrics and latency come per-grader rows, ``grader:<name>``: the mean of
    each sample's score from that grader, paired over the samples both runs have it for (a
    fine-tuned model can gain on the judge and lose on the tests). The score is the mean of
    per-sample means over the shared samples (``MEAN_OF_SAMPLE_MEANS``; ``summary``'s
    ``mean_score`` is the mean over rollouts)."""
    adjust = COMPARE_ADJUSTMENT if adjust is None else adjust
    if adjust not in ADJUSTMENTS:
        raise ValueError(f"adjust={adjust!r}: use one of {', '.join(ADJUSTMENTS)}")
    primary = COMPARE_PRIMARY if primary is None else primary
    base, candidate = resolve_runs(con, [base, candidate])
    thr = common_threshold(con, [base, candidate], pass_threshold)  # None: each run's own
    ps = _per_sample(con, base, candidate, thr, include_errors)
    shared, (nb, db, nc, dc) = _ratio_arrays(ps)
    graders, g_nb, g_db, g_nc, g_dc = _grader_columns(con, base, candidate, shared.sample_id, thr, include_errors)
    nb, db, nc, dc = (np.hstack([x, g]) for x, g in ((nb, g_nb), (db, g_db), (nc, g_nc), (dc, g_dc)))
    sorted_b, sorted_c = _latencies(con, base, candidate, len(shared), include_errors)
    df = paired_table(nb, db, nc, dc, sorted_b, sorted_c, graders, n_boot=n_boot, seed=seed, ci=ci, adjust=adjust,
                      primary=primary)
    d = (shared.c_score_mean - shared.b_score_mean).to_numpy(float)
    df.attrs.update(
        base=base, candidate=candidate, shared_samples=int(len(shared)),
        base_only=int((ps.in_base & ~ps.in_candidate).sum()),
        candidate_only=int((ps.in_candidate & ~ps.in_base).sum()),
        unscored=int((ps.in_base & ps.in_candidate & ~ps.shared).sum()),
        wins=int((d > 1e-12).sum()), ties=int((np.abs(d) <= 1e-12).sum()), losses=int((d < -1e-12).sum()),
        pass_threshold=thr, n_boot=n_boot, seed=seed, ci=ci, include_errors=include_errors,
    )
    return df


def paired_table(nb, db, nc, dc, sorted_b: stats.SortedValues, sorted_c: stats.SortedValues, graders=(),
                 n_boot: int = 2000, seed: int = 0, ci: float = 0.95, adjust: str = COMPARE_ADJUSTMENT,
                 primary: str = COMPARE_PRIMARY) -> pd.DataFrame:
    """The numbers of ``compare`` from its per-sample arrays: columns of (shared samples, metrics)
    numerators and denominators in the order of RATIO_METRICS then ``graders``, and the two runs'
    latencies (``SortedValues`` coded by shared sample). One row per metric (COLUMNS), each tested by
    its ``method``, in the families of ``decide``."""
    n = len(nb)
    names = list(RATIO_METRICS) + [GRADER_PREFIX + g for g in graders]
    units = [spec[2] for spec in RATIO_METRICS.values()] + ["score"] * len(graders)
    m = len(names)
    rows = []
    for j in range(m):  # over the samples that add to the metric in either run (a grader's: those it scored);
        # a numerator without a denominator counts (cost_per_solved: what unsolved samples cost)
        keep = (db[:, j] > 0) | (dc[:, j] > 0) | (nb[:, j] != 0) | (nc[:, j] != 0)
        _, se, lo, hi, p = (x[0] for x in stats.ratio_t_tests(nb[keep, j], db[keep, j], nc[keep, j], dc[keep, j],
                                                              ci=ci))
        rows.append(_row(names[j], stats.ratio(nb[:, j], db[:, j]), stats.ratio(nc[:, j], dc[:, j]), lo, hi, p, se,
                         int(keep.sum()) or n, units[j], CLUSTERED_T))
    quantiles = [(sorted_b, sorted_c, q) for q in LATENCY_METRICS.values()] if len(sorted_b.values) and \
        len(sorted_c.values) else []
    empty = np.empty((n, 0))
    _, latency_ci, _, latency_p = stats.paired_bootstrap(empty, empty, empty, empty, quantiles, n_boot=n_boot,
                                                         seed=seed, ci=ci, with_p=True)
    latency_rows = []
    for j, (metric, q) in enumerate(LATENCY_METRICS.items()):
        b_val = float(np.quantile(sorted_b.values, q)) if len(sorted_b.values) else math.nan
        c_val = float(np.quantile(sorted_c.values, q)) if len(sorted_c.values) else math.nan
        lat_lo, lat_hi = latency_ci[j] if quantiles else (math.nan, math.nan)
        lat_p = latency_p[j] if quantiles else math.nan
        latency_rows.append(_row(metric, b_val, c_val, lat_lo, lat_hi, lat_p, math.nan, n, "seconds", PERCENTILE))
    k = len(RATIO_METRICS)
    df = pd.DataFrame(rows[:k] + latency_rows + rows[k:], columns=COLUMNS)
    constant = [j for j in range(m) if _constant(nb[:, j], db[:, j], nc[:, j], dc[:, j])]
    if quantiles:
        both = np.concatenate([sorted_b.values, sorted_c.values])
        constant_latency = bool(both.min() == both.max())
    else:
        constant_latency = False
    constant_names = {names[j] for j in constant} | (set(LATENCY_METRICS) if constant_latency else set())
    if primary not in set(df.metric):
        raise ValueError(f"primary={primary!r} is not a metric of this comparison; use one of "
                         f"{', '.join(df.metric)}")
    duplicates = set()
    if primary in names:
        jp = names.index(primary)
        duplicates = {names[j] for j in range(m) if j != jp and all(
            np.allclose(x[:, j], x[:, jp], rtol=0, atol=1e-12) for x in (nb, db, nc, dc))}
    return decide(df, primary, duplicates, constant_names, alpha=round(1 - ci, 12), adjust=adjust)


def _constant(nb, db, nc, dc) -> bool:
    """Every sample's value the same, in both runs (nothing to test: 0 tool calls over 15 in both)."""
    values = np.concatenate([nb[db > 0] / db[db > 0], nc[dc > 0] / dc[dc > 0]])
    return bool(len(values)) and float(values.max() - values.min()) <= 1e-12 * max(1.0, float(np.abs(values).max()))


def decide(df: pd.DataFrame, primary: str, duplicates=(), constant=(), alpha: float = 0.05,
           adjust: str = COMPARE_ADJUSTMENT) -> pd.DataFrame:
    """The families and decisions of a compare table: ``family`` per row (the primary; its
    duplicates; constant rows, whose p-value is dropped; rows without a p-value; the secondary rest),
    ``p_holm`` and ``q_bh`` over the secondary family (the primary and its duplicates form a family
    of one: their own p), and ``significant``: p <= ``alpha`` for the primary and its duplicates, the
    adjusted value named by ``adjust`` <= ``alpha`` for the secondary rows, never for the others."""
    if adjust not in ADJUSTMENTS:
        raise ValueError(f"adjust={adjust!r}: use one of {', '.join(ADJUSTMENTS)}")
    metric = df.metric.to_numpy()
    family = np.where(metric == primary, PRIMARY, np.where(np.isin(metric, list(duplicates)), DUPLICATE,
                      np.where(np.isin(metric, list(constant)), CONSTANT, SECONDARY))).astype(object)
    p = df.p_value.to_numpy(float).copy()
    p[family == CONSTANT] = np.nan
    family[(family == SECONDARY) & np.isnan(p)] = UNTESTED
    df["p_value"], df["family"] = p, family
    alone = np.isin(family, [PRIMARY, DUPLICATE])
    secondary = family == SECONDARY
    holm, bh = np.full(len(df), np.nan), np.full(len(df), np.nan)
    holm[secondary], bh[secondary] = stats.holm(p[secondary]), stats.bh(p[secondary])
    holm[alone], bh[alone] = p[alone], p[alone]
    df["p_holm"], df["q_bh"] = holm, bh
    decide_by = df[ADJUSTMENTS[adjust]].to_numpy(float)
    df["significant"] = np.where(alone, np.nan_to_num(p, nan=np.inf) <= alpha,
                                 secondary & (np.nan_to_num(decide_by, nan=np.inf) <= alpha))
    row = df[df.metric == primary].iloc[0]
    df.attrs.update(primary=primary, primary_method=row.method, adjustment=adjust,
                    significant_from=ADJUSTMENTS[adjust], alpha=alpha, tests=int(secondary.sum()),
                    duplicates=[x for x in metric if x in set(duplicates)],
                    constant=[x for x in metric[family == CONSTANT]])
    return df


def significance(cmp: pd.DataFrame) -> str:
    """What ``significant`` means in a ``compare`` table, in words (the CLI, the report)."""
    a = cmp.attrs
    alpha = f"{a['alpha']:g}"
    how = {CLUSTERED_T: "clustered t-test, its CI from the same test",
           PERCENTILE: "percentile bootstrap"}.get(a["primary_method"], a["primary_method"])
    text = (f"significant: {a['primary']}, the primary metric, tested alone (p ≤ {alpha}, two-sided, {how}): "
            "it decides the verdict.")
    if a["tests"]:
        if a["adjustment"] == "none":
            text += f" The {a['tests']} secondary metrics: p ≤ {alpha} each, no adjustment."
        else:
            text += (f" The {a['tests']} secondary metrics: {a['significant_from']} ≤ {alpha}, adjusted together "
                     f"({ADJUSTMENT_NAMES[a['adjustment']]}); p is each metric's own.")
    if a["duplicates"]:
        text += f" Same numbers as {a['primary']}, not tested again: {', '.join(a['duplicates'])}."
    if a["constant"]:
        text += f" Constant in both runs, not tested: {', '.join(a['constant'])}."
    return text


def _grader_columns(con, base, candidate, sample_ids: pd.Series, thr, include_errors):
    """Per-grader ratio columns aligned with the shared samples: numerator the sample's mean score
    from that grader, denominator 1 where both runs have it (else 0 on both sides, so the
    difference stays paired). Graders that scored both runs only."""
    scores = per_sample_grader_scores(con, [base, candidate], include_errors, thr)
    in_both = scores.groupby("grader").run_id.nunique()
    graders = sorted(in_both.index[in_both == 2])
    n = len(sample_ids)
    empty = np.zeros((n, len(graders)))
    if not graders or not n:
        return graders, empty, empty.copy(), empty.copy(), empty.copy()
    position = pd.Series(np.arange(n), index=sample_ids.to_numpy())
    scores = scores[scores.sample_id.isin(position.index) & scores.grader.isin(graders)]
    rows = position[scores.sample_id].to_numpy()
    cols = pd.Series(np.arange(len(graders)), index=graders)[scores.grader].to_numpy()
    values = {}
    for run in (base, candidate):
        num, present = np.zeros((n, len(graders))), np.zeros((n, len(graders)), dtype=bool)
        m = (scores.run_id == run).to_numpy()
        num[rows[m], cols[m]] = scores.score.to_numpy(float)[m]
        present[rows[m], cols[m]] = True
        values[run] = (num, present)
    both = (values[base][1] & values[candidate][1]).astype(float)
    return graders, values[base][0] * both, both, values[candidate][0] * both, both.copy()


def _row(metric, b_val, c_val, lo, hi, p, se, n, unit, method) -> dict:
    diff = c_val - b_val
    rel = diff / abs(b_val) if b_val not in (0, None) and not math.isnan(b_val) else math.nan
    return {"metric": metric, "base": b_val, "candidate": c_val, "diff": diff, "rel_change": rel,
            "ci_low": lo, "ci_high": hi, "p_value": float(p), "p_holm": math.nan, "q_bh": math.nan, "se": se,
            "n_samples": n, "significant": False, "unit": unit, "family": SECONDARY, "method": method}


def _latencies(con, base, candidate, n_shared, include_errors):
    """Rollout latencies of the shared samples per run, sorted, with each one's sample code."""
    sql = latency_values_sql()
    v = run_sql(con, sql, params([base, candidate], include_errors, candidate=candidate)).fetchnumpy()
    is_c = np.asarray(v["is_candidate"], dtype=bool)
    lat, code = np.asarray(v["latency_s"], dtype=float), np.asarray(v["code"], dtype=np.int64)
    return (stats.SortedValues(lat[~is_c], code[~is_c], n_shared), stats.SortedValues(lat[is_c], code[is_c], n_shared))


def quadrant(score_diff: float, tool_diff: float) -> str:
    if abs(score_diff) <= 1e-12:
        return "no change"
    side = "better" if score_diff > 0 else "worse"
    if tool_diff < 0:
        return f"{side} and fewer tools"
    if tool_diff > 0:
        return f"{side} and more tools"
    return f"{side}, same tools"


QUADRANTS = ["better and fewer tools", "better, same tools", "better and more tools", "no change",
             "worse and fewer tools", "worse, same tools", "worse and more tools"]


def sample_deltas_sql() -> str:
    return f"""
    WITH per AS (
        SELECT run_id, sample_id, count(*) AS attempts, avg(s) AS score, avg(n_tool_calls) AS tool_calls,
               avg(latency_s) AS latency_s
        FROM ({included_sql()}) WHERE sample_id IS NOT NULL GROUP BY run_id, sample_id)
    SELECT b.sample_id, b.attempts AS base_attempts, c.attempts AS candidate_attempts,
           b.score AS base_score, c.score AS candidate_score, c.score - b.score AS score_diff,
           b.tool_calls AS base_tool_calls, c.tool_calls AS candidate_tool_calls,
           c.tool_calls - b.tool_calls AS tool_calls_diff,
           b.latency_s AS base_latency_s, c.latency_s AS candidate_latency_s,
           c.latency_s - b.latency_s AS latency_diff
    FROM (SELECT * FROM per WHERE run_id = $base) b JOIN (SELECT * FROM per WHERE run_id = $candidate) c
         USING (sample_id)
    ORDER BY score_diff DESC, sample_id
    """


def sample_deltas(con: duckdb.DuckDBPyConnection, base: str, candidate: str,
                  include_errors: bool = False) -> pd.DataFrame:
    """Per shared sample: both runs' mean score, tool calls and latency, their differences,
    ``outcome`` (win / tie / loss by score) and ``quadrant`` (score direction x tool-call direction)."""
    base, candidate = resolve_runs(con, [base, candidate])
    df = run_sql(con, sample_deltas_sql(), params([base, candidate], include_errors, base=base,
                                                    candidate=candidate)).df()
    d = df.score_diff.to_numpy(float)
    df["outcome"] = np.where(d > 1e-12, "win", np.where(d < -1e-12, "loss", "tie"))
    df["quadrant"] = [quadrant(s, t) for s, t in zip(df.score_diff, df.tool_calls_diff)]
    return df


SHIFT_METRICS = {"tool_calls": "n_tool_calls", "turns": "n_turns", "latency": "latency_s"}


def distribution_shift_sql(column: str, bins: int | None) -> str:
    value = f'"{column}"'
    if bins is None:  # discrete: counts per value
        bucket = f"{value}::DOUBLE AS value, {value}::DOUBLE + 1 AS value_high"
        group = "value, value_high"
    else:  # continuous: equal-width bins over the pooled range
        bucket = (f"least(floor(({value} - lo) / nullif(hi - lo, 0) * {bins}), {bins - 1}) AS b, "
                  f"lo + (hi - lo) * b / {bins} AS value, lo + (hi - lo) * (b + 1) / {bins} AS value_high")
        group = "b, value, value_high"
    return f"""
    WITH inc AS (SELECT * FROM ({included_sql()}) WHERE {value} IS NOT NULL),
    range AS (SELECT min({value}) AS lo, max({value}) AS hi FROM inc),
    bucketed AS (SELECT run_id, {bucket} FROM inc, range),
    counts AS (
        SELECT value, value_high, count(*) FILTER (WHERE run_id = $base) AS base_count,
               count(*) FILTER (WHERE run_id = $candidate) AS candidate_count
        FROM bucketed GROUP BY {group})
    SELECT value, value_high, base_count, candidate_count,
           base_count / sum(base_count) OVER () AS base_share,
           candidate_count / sum(candidate_count) OVER () AS candidate_share
    FROM counts ORDER BY value
    """


def distribution_shift(con: duckdb.DuckDBPyConnection, base: str, candidate: str, metric: str = "tool_calls",
                       bins: int = 30, include_errors: bool = False) -> pd.DataFrame:
    """The two runs' distributions side by side: counts and shares per bin [value, value_high):
    one per integer value for ``tool_calls`` and ``turns``, ``bins`` equal-width bins over the
    pooled range for ``latency`` (the last bin includes its upper edge)."""
    column = _shift_column(metric)
    base, candidate = resolve_runs(con, [base, candidate])
    sql = distribution_shift_sql(column, bins if metric == "latency" else None)
    return run_sql(con, sql, params([base, candidate], include_errors, base=base, candidate=candidate)).df()


def _shift_column(metric: str) -> str:
    if metric not in SHIFT_METRICS:
        raise ValueError(f"metric {metric!r}: use one of {', '.join(SHIFT_METRICS)}")
    return SHIFT_METRICS[metric]


def shift_test(con: duckdb.DuckDBPyConnection, base: str, candidate: str, metric: str = "tool_calls",
               include_errors: bool = False) -> pd.DataFrame:
    """Two-sample tests of a per-rollout metric: Kolmogorov-Smirnov and Mann-Whitney U (scipy).
    They treat rollouts as independent; attempts at one sample are not, so read p-values as rough."""
    from scipy import stats as sps

    column = _shift_column(metric)
    base, candidate = resolve_runs(con, [base, candidate])
    sql = f'SELECT run_id, "{column}" AS v FROM ({included_sql()}) WHERE "{column}" IS NOT NULL'
    values = run_sql(con, sql, params([base, candidate], include_errors)).df()
    b = values.v[values.run_id == base].to_numpy(float)
    c = values.v[values.run_id == candidate].to_numpy(float)
    if len(b) == 0 or len(c) == 0:
        raise ValueError(f"no {metric} values for {base if len(b) == 0 else candidate}")
    ks = sps.ks_2samp(b, c)
    mw = sps.mannwhitneyu(c, b, alternative="two-sided")
    return pd.DataFrame([{"metric": metric, "base_mean": b.mean(), "candidate_mean": c.mean(),
                          "base_n": len(b), "candidate_n": len(c), "ks_statistic": ks.statistic,
                          "ks_p_value": ks.pvalue, "mannwhitney_u": mw.statistic, "mannwhitney_p_value": mw.pvalue}])


NO_SPLIT = "(no split)"
BY_STEP_COLUMNS = ["run", "split", "step", "step_known", "rollouts", "samples", "mean_score", "pass_at_1", "best_of_n", "signal_share",
                   "tool_calls_mean", "long_tail_share", "truncated_share", "turns_mean", "latency_p95",
                   "input_tokens_mean", "output_tokens_mean", "n_excluded", "n_infra_error", "n_ungraded"]


def truncated_share_sql() -> str:
    """Per run ($runs): the share of counted rollouts ($include_errors) cut at a limit
    (``truncated_sql``; as ``metrics.costs.truncation``); NULL when none is truncated and none names
    a stop reason (the logs cannot tell)."""
    return f"""
    SELECT run_id AS run,
           CASE WHEN count(*) FILTER (WHERE {truncated_sql()}) > 0
                  OR count(*) FILTER (WHERE coalesce(stop_reason, 'unknown') <> 'unknown') > 0
                THEN count(*) FILTER (WHERE {truncated_sql()}) / count(*) END AS truncated_share
    FROM ({included_sql()}) GROUP BY run_id
    """


def by_step(con: duckdb.DuckDBPyConnection, runs=None, pass_threshold: float | None = None,
            include_errors: bool = False) -> pd.DataFrame:
    """Metrics per training step, one row per run, ordered by split then step: the curves that
    show tool calls falling as accuracy rises. Train and validation runs are separate lines
    (``split``; ``(no split)`` where a run names none), never one. A run without a step (a base
    model) is placed at step 0 of its own split with ``step_known`` False, so figures can mark it.
    ``truncated_share``: the counted rollouts cut at a limit (as ``metrics.costs.truncation``; NaN
    when the run's logs name no stop reason)."""
    labels = resolve_runs(con, runs, expand=True)
    info = {r: (step, split) for r, step, split in con.execute(
        "SELECT run_id, step, split FROM runs WHERE list_contains(?, run_id)", [labels]).fetchall()}
    df = summary(con, labels, pass_threshold=pass_threshold, ks=(1,), include_errors=include_errors)
    cut = run_sql(con, truncated_share_sql(), params(labels, include_errors)).df()
    df["truncated_share"] = df.run.map(dict(zip(cut.run, cut.truncated_share.astype(float)))).astype(float)
    df["split"] = [info[r][1] or NO_SPLIT for r in df.run]
    df["step_known"] = [info[r][0] is not None for r in df.run]
    df["step"] = [int(info[r][0]) if info[r][0] is not None else 0 for r in df.run]
    return df[BY_STEP_COLUMNS].sort_values(["split", "step", "run"], kind="stable").reset_index(drop=True)

"""Is this task ready for RL? Named checks -> (check, status, value, threshold, advice, details).

Each check is one function of a small context (the run's summary row plus targeted SQL); the
thresholds live in ``config.CHECK_THRESHOLDS`` and any of them can be overridden by keyword.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import duckdb
import pandas as pd

from ..store import catalog
from .. import config
from ..text import fmt
from ..text.htmltext import missing
from .metrics import graders, scores
from .metrics.costs import truncation_check
from .metrics.common import common_threshold, included_sql, params, resolve_runs, run_sql

COLUMNS = ["check", "status", "value", "threshold", "advice", "details"]

def all_thresholds() -> dict:
    """Every readiness threshold and its default."""
    return dict(config.CHECK_THRESHOLDS)
STATUSES = ("pass", "warn", "fail", "skip")


@dataclass
class Context:
    con: duckdb.DuckDBPyConnection
    run: str
    t: dict  # thresholds
    summary: pd.Series
    params: dict


def _row(check: str, status: str, value: float | None, threshold: str, advice: str, details: str = "") -> dict:
    return {"check": check, "status": status, "value": math.nan if value is None else float(value),
            "threshold": threshold, "advice": advice, "details": details}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA


def check_baseline_nonzero(c: Context) -> dict:
    """Fail when no counted rollout scores above the run's lowest reward (0, or -1 for rewards in
    [-1, 1]): the baseline never earns anything RL could reinforce."""
    mean, pass1 = c.summary["mean_score"], c.summary.get("pass_at_1")
    floor = c.summary.get("reward_floor")
    floor = 0.0 if _nan(floor) else float(floor)
    name = "baseline_nonzero"
    thr = ("fail when the mean score is 0" if floor == 0 else
           f"fail when every rollout scores the run's lowest reward ({floor:g})")
    if _nan(mean):
        return _row(name, "fail", None, thr, "No scored rollouts: every rollout was excluded "
                    "(infra errors / ungraded). Fix the infrastructure, then re-run the baseline.")
    if mean <= floor:
        return _row(name, "fail", mean, thr, "The run never earns any reward, so RL has nothing to "
                    "reinforce: make the task easier, improve tools or prompt, or start from a stronger model.")
    if not _nan(pass1) and pass1 == 0:
        return _row(name, "warn", mean, thr, "Only partial credit, never a full pass: check the pass "
                    "threshold and that full success is reachable.")
    return _row(name, "pass", mean, thr, f"Mean score {mean:.3f}: the baseline succeeds sometimes.")


def check_attempts(c: Context) -> dict:
    median = c.summary["attempts_median"]
    need = c.t["min_attempts"]
    thr = f"warn below {need}"
    if _nan(median):
        return _row("attempts_per_sample", "skip", None, thr, "No scored rollouts.")
    if median < need:
        return _row("attempts_per_sample", "warn", median, thr,
                    f"Run at least {need} attempts per sample: with fewer, score variance (the learning "
                    "signal) cannot be seen.")
    return _row("attempts_per_sample", "pass", median, thr, f"Median {median:g} attempts per sample.")


def check_signal_share(c: Context) -> dict:
    multi, share = c.summary["samples_multi"], c.summary["signal_share"]
    warn, fail = c.t["signal_warn"], c.t["signal_fail"]
    thr = f"warn below {_pct(warn)}, fail below {_pct(fail)}"
    if _nan(multi) or multi == 0:
        return _row("signal_share", "skip", None, thr, "Every sample has one attempt: run several attempts "
                    "per sample to measure variance.")
    plan = scores.signal_plan(c.con, c.run, target=c.t["signal_target"])
    rec = plan.loc[plan.recommended, "k"]
    a = plan.attrs
    # the plan forecasts pass/fail signal from what it sees of it: both shares named, and the plan's
    # own figure at the run's attempts beside the observed one
    seen = (f" ({_pct(a['observed_signal_share'])} have both a pass and a fail at the median "
            f"{a['observed_k']} attempts, which signal_plan forecasts: "
            f"{_pct(float(plan.set_index('k').expected_signal_share[a['observed_k']]))} at {a['observed_k']})"
            if a["observed_k"] else "")
    hint = (f"signal_plan: about {int(rec.iloc[0])} attempts per sample give {_pct(c.t['signal_target'])} of samples "
            "both a pass and a fail" if len(rec) else
            f"signal_plan: even {int(plan.k.max())} attempts per sample give fewer than {_pct(c.t['signal_target'])} "
            "of samples both a pass and a fail")
    lo, hi = config.CURATE_DEFAULTS["band"]
    curate = (f"To train on the samples that do vary, keep those whose pass rate lies in [{lo:g}, {hi:g}]: "
              f"`rolloutlab curate --run {c.run}` (rl.curate(con, {c.run!r}); --out writes the training files)")
    if share < fail:
        return _row("signal_share", "fail", share, thr, f"Only {_pct(share)} of samples vary in score across "
                    f"attempts{seen}: almost no learning signal. Add harder-but-solvable samples or partial credit; "
                    f"{hint}. {curate}.")
    if share < warn:
        return _row("signal_share", "warn", share, thr, f"{_pct(share)} of samples vary in score across "
                    f"attempts{seen}. Raise the compute multiplier ({hint}) or rebalance the dataset. {curate}.")
    return _row("signal_share", "pass", share, thr, f"{_pct(share)} of samples vary in score across attempts{seen}; "
                f"{hint}.")


def saturation_sql() -> str:
    return f"""
    SELECT avg((min >= pass_at)::INTEGER) AS always_max,
           avg((max < pass_at AND max = min)::INTEGER) AS always_min
    FROM ({scores.per_sample_sql()})
    """


def check_saturation(c: Context) -> dict:
    easy, hard = run_sql(c.con, saturation_sql(), c.params).fetchone()
    limit = c.t["saturation_warn"]
    thr = f"warn above {_pct(limit)} of samples always passing or never passing (with one score), together"
    if easy is None:
        return _row("saturation", "skip", None, thr, "No scored rollouts.")
    details = (f"always pass: {_pct(easy)} of samples; never pass, always the same score: {_pct(hard)}")
    saturated = easy + hard  # neither kind teaches: together they are what the dataset wastes
    if saturated > limit:
        which = ("mostly too easy (always solved)" if easy > 2 * hard else
                 "mostly too hard (never solved, no variation)" if hard > 2 * easy else
                 "too easy (always solved) or too hard (never solved, no variation)")
        return _row("saturation", "warn", saturated, thr, f"{_pct(saturated)} of samples are {which} "
                    f"({_pct(easy)} always pass, {_pct(hard)} never): they give no learning signal. Drop or replace "
                    "them (rolloutlab curate keeps the others), or reweight the dataset.", details)
    return _row("saturation", "pass", saturated, thr, f"{_pct(saturated)} of samples always pass or never pass "
                f"({_pct(easy)} and {_pct(hard)}): the rest vary.", details)


def granularity_sql() -> str:
    """Distinct counted scores, and whether they are at most two (0/1, or -1/1 where rewards span
    [-1, 1]): pass or fail, no partial credit."""
    return f"""SELECT count(DISTINCT s) AS distinct_scores, count(DISTINCT s) <= 2 AS binary,
                      list(DISTINCT s ORDER BY s) AS values
               FROM ({included_sql()})"""


def check_reward_granularity(c: Context) -> dict:
    distinct, binary, values = run_sql(c.con, granularity_sql(), c.params).fetchone()
    thr = "warn when scores take at most two values (0/1, -1/1)"
    if not distinct:
        return _row("reward_granularity", "skip", None, thr, "No scored rollouts.")
    if binary:
        shown = "/".join(f"{v:g}" for v in values)
        return _row("reward_granularity", "warn", distinct, thr, f"Scores are only {shown}: a grader with partial "
                    "credit (steps, closeness, format) gives a denser signal and trains faster.")
    return _row("reward_granularity", "pass", distinct, thr, f"{distinct} distinct score values: partial credit.")


def _error_share_check(c: Context, name: str, status_col: str, warn: float, fail: float, what: str) -> dict:
    total = c.summary["rollouts"]
    share = c.summary[status_col] / total if total else math.nan
    thr = f"warn above {_pct(warn)}, fail above {_pct(fail)}"
    advice = (f"{_pct(share)} of rollouts {what}. They are excluded from score statistics (count shown "
              "everywhere); if they were scored 0 during training they would punish good trajectories. "
              "Fix the endpoint reliability before training.")
    status = "fail" if share > fail else "warn" if share > warn else "pass"
    if status == "pass":
        advice = f"{_pct(share)} of rollouts {what}."
    return _row(name, status, share, thr, advice)


def check_infra_errors(c: Context) -> dict:
    return _error_share_check(c, "infra_errors", "n_infra_error", c.t["infra_warn"], c.t["infra_fail"],
                              "failed on tool or grader infrastructure (infra_error)")


def check_ungraded(c: Context) -> dict:
    return _error_share_check(c, "ungraded", "n_ungraded", c.t["ungraded_warn"], c.t["ungraded_fail"],
                              "never reached the grader (ungraded)")


def rejected_records_sql() -> str:
    return f"""
    SELECT count(*) AS files, sum(n_records) AS records, sum(n_rejected) AS rejected,
           list(path ORDER BY n_rejected DESC, path) FILTER (WHERE n_rejected > 0) AS worst
    FROM sources WHERE source_id IN ({catalog.run_sources_sql()})
    """


def check_rejected_records(c: Context) -> dict:
    files, records, rejected, worst = run_sql(c.con, rejected_records_sql(), {"run": c.run}).fetchone()
    warn, fail = c.t["rejected_warn"], c.t["rejected_fail"]
    thr = f"warn above {_pct(warn)}, fail above {_pct(fail)} of the records in this run's files"
    if not records:
        return _row("rejected_records", "pass", 0.0, thr, "No records were rejected.")
    share = rejected / records
    see = (f"See them with `rolloutlab rejects --run {c.run}` (or SELECT * FROM rejects) and fix or "
           "re-export those records")
    if share > fail:
        return _row("rejected_records", "fail", share, thr, f"{rejected:,} of {records:,} input records "
                    f"({_pct(share)}) did not load, so every metric here describes a filtered subset. {see}.",
                    f"files with rejects: {', '.join(worst[: c.t['examples']])}")
    if share > warn:
        return _row("rejected_records", "warn", share, thr, f"{rejected:,} of {records:,} input records "
                    f"({_pct(share)}) did not load: the metrics leave them out. {see}.",
                    f"files with rejects: {', '.join(worst[: c.t['examples']])}")
    return _row("rejected_records", "pass", share, thr, f"All {records:,} input records in {files} file(s) loaded.")


def grader_consistency_sql() -> str:
    return f"""
    SELECT sample_id, any_value(final_answer) AS answer, list(DISTINCT score ORDER BY score) AS scores
    FROM ({included_sql()})
    WHERE final_answer IS NOT NULL AND score IS NOT NULL AND sample_id IS NOT NULL
      AND status NOT IN ('infra_error', 'ungraded')
    GROUP BY sample_id, lower(trim(final_answer))
    HAVING count(DISTINCT score) > 1
    ORDER BY sample_id
    """


def check_grader_consistency(c: Context) -> dict:
    rows = run_sql(c.con, grader_consistency_sql(), c.params).fetchall()
    thr = "warn when the same answer to the same sample gets different scores"
    if not rows:
        return _row("grader_consistency", "pass", 0, thr, "The same answer always got the same score.")
    examples = "; ".join(f"{sid}: {answer!r} scored {', '.join(f'{x:g}' for x in sc)}"
                         for sid, answer, sc in rows[: c.t["examples"]])
    return _row("grader_consistency", "warn", len(rows), thr, f"{len(rows)} (sample, answer) pairs were scored "
                "differently: a nondeterministic or context-dependent grader adds noise to the reward. "
                "Pin the grader (temperature 0, fixed rubric) or grade deterministically.", examples)


def suspicious_sql() -> str:
    return f"""
    WITH inc AS ({included_sql()}),
    med AS (SELECT median(n_tool_calls) AS m FROM inc)
    SELECT rollout_id,
           CASE WHEN final_answer IS NULL OR trim(final_answer) = '' THEN 'empty final answer'
                ELSE 'no tool calls' END AS why
    FROM inc, med
    WHERE s >= pass_at AND status NOT IN ('infra_error', 'ungraded')
      AND (final_answer IS NULL OR trim(final_answer) = '' OR (n_tool_calls = 0 AND med.m >= $median_calls))
    ORDER BY rollout_id
    """


def check_suspicious_scores(c: Context) -> dict:
    rows = run_sql(c.con, suspicious_sql(), {**c.params, "median_calls": c.t["suspicious_median_calls"]}).fetchall()
    thr = "warn on any full score with an empty answer, or with no tool calls where the median uses several"
    if not rows:
        return _row("suspicious_scores", "pass", 0, thr, "No full scores that look like reward hacking.")
    details = ", ".join(f"{rid} ({why})" for rid, why in rows[: c.t["examples"]])
    return _row("suspicious_scores", "warn", len(rows), thr, f"{len(rows)} full scores look wrong: read these "
                "trajectories; a grader that rewards them will be hacked during training.", details)


def check_graders(c: Context) -> dict:
    """Graders that never vary add nothing to the reward; two graders that mostly disagree on
    pass/fail measure different things (or one of them is broken)."""
    n_min, limit = c.t["grader_min_rollouts"], c.t["grader_disagree_warn"]
    thr = (f"warn when a grader gives every rollout the same score, or two graders disagree on pass/fail "
           f"in more than {_pct(limit)} of rollouts (graders with {n_min}+ rollouts)")
    stats = graders.grader_stats(c.con, c.run, pass_threshold=c.params["threshold"])
    stats = stats[stats.rollouts >= n_min]
    if stats.empty:
        return _row("graders", "skip", None, thr, f"No grader scored {n_min} or more rollouts of this run.")
    sized = stats.attrs["pairs"]
    sized = sized[sized.rollouts >= n_min]
    pairs = sized[sized.disagree_share > limit]
    flat = stats[stats["std"] == 0]
    notes = [f"{g} always gave {v:g}" for g, v in zip(flat.grader, flat["mean"])]
    notes += [f"{a} and {b} disagree on {_pct(d)} of {n} rollouts (e.g. {', '.join(ex[:2])})"
              for a, b, d, n, ex in zip(pairs.grader_a, pairs.grader_b, pairs.disagree_share, pairs.rollouts,
                                        pairs.examples)]
    if notes:
        return _row("graders", "warn", len(notes), thr, "A grader that never varies adds no signal (check that "
                    f"it runs and sees the answer); graders that disagree on more than {_pct(limit)} of rollouts "
                    "reward different things: decide which one you mean, or fix the broken one. See "
                    "rl.grader_stats.", "; ".join(notes[: c.t["examples"]]))
    worst = sized.disagree_share.max()
    agree = ("" if worst != worst else
             f"; the two that disagree most do on {_pct(worst)} of rollouts (at most {_pct(limit)})")
    return _row("graders", "pass", 0, thr, f"{len(stats)} grader(s) vary{agree}.")


def tool_output_sql() -> str:
    return f"""SELECT quantile_cont(output_chars, 0.95) FROM tool_calls
               WHERE rollout_id IN (SELECT rollout_id FROM ({included_sql()}))"""


def check_tool_output_size(c: Context) -> dict:
    p95 = run_sql(c.con, tool_output_sql(), c.params).fetchone()[0]
    limit = c.t["tool_output_p95_warn"]
    thr = f"warn when p95 tool output exceeds {limit:,} characters"
    if p95 is None:
        return _row("tool_output_size", "skip", None, thr, "No tool output sizes in the logs.")
    if p95 > limit:
        return _row("tool_output_size", "warn", p95, thr, f"p95 tool output is {p95:,.0f} characters: long "
                    "outputs slow training and bury the signal. Truncate, paginate or summarize tool output.")
    return _row("tool_output_size", "pass", p95, thr, f"p95 tool output is {p95:,.0f} characters.")


def check_truncation(c: Context) -> dict:
    """Truncated share of the counted rollouts (``metrics.costs.truncation_check``): warn above
    ``truncation_warn``, fail above ``truncation_fail``; the advice names the tools whose outputs
    fill the cut rollouts' context."""
    return truncation_check(c.con, c.run, warn=c.t["truncation_warn"], fail=c.t["truncation_fail"],
                            examples=int(c.t["examples"]), include_errors=bool(c.params["include_errors"]))


def check_long_tail(c: Context) -> dict:
    share, limit = c.summary["long_tail_share"], c.t["long_tail_warn"]
    thr = f"warn above {_pct(limit)} of rollouts with more than {config.LONG_TAIL_CALLS} calls"
    if _nan(share):
        return _row("long_tail", "skip", None, thr, "No rollouts counted.")
    if share > limit:
        return _row("long_tail", "warn", share, thr, f"{_pct(share)} of rollouts use more than "
                    f"{config.LONG_TAIL_CALLS} tool calls: loops or flailing. Set a tool budget; fine-tuning "
                    "usually removes this tail.")
    return _row("long_tail", "pass", share, thr, f"{_pct(share)} of rollouts beyond {config.LONG_TAIL_CALLS} calls.")


def budget_sql() -> str:
    return f"SELECT avg((n_tool_calls > $budget)::INTEGER) FROM ({included_sql()})"


def check_tool_budget(c: Context) -> dict:
    budget, limit = c.t["tool_budget"], c.t["tool_budget_warn"]
    if budget is None:
        return _row("tool_budget", "skip", None, "", "No tool budget given (--tool-budget N).")
    share = run_sql(c.con, budget_sql(), {**c.params, "budget": int(budget)}).fetchone()[0]
    thr = f"warn above {_pct(limit)} of rollouts over {budget} calls"
    if share is None:
        return _row("tool_budget", "skip", None, thr, "No rollouts counted.")
    status = "warn" if share > limit else "pass"
    advice = (f"{_pct(share)} of rollouts exceed the budget of {budget} calls: they will be cut off in "
              "training; raise the budget or teach economy first." if status == "warn"
              else f"{_pct(share)} of rollouts exceed {budget} calls.")
    return _row("tool_budget", status, share, thr, advice)


def check_dataset_size(c: Context) -> dict:
    n = c.summary["samples"]
    warn, fail = c.t["dataset_warn"], c.t["dataset_fail"]
    thr = f"warn below {warn}, fail below {fail} samples"
    if n < fail:
        return _row("dataset_size", "fail", n, thr, f"{n} samples is too few to train or to measure a change.")
    if n < warn:
        return _row("dataset_size", "warn", n, thr, f"{n} samples: results will be noisy; aim for {warn}+.")
    return _row("dataset_size", "pass", n, thr, f"{n} samples.")


def check_power(c: Context) -> dict:
    """Can this validation set detect a change of ``power_delta``? The minimum detectable effect of
    a paired comparison against a future checkpoint, for the decision compare applies (its primary
    metric tested alone; rl.power, no candidate yet: it is assumed to vary like this run, with the
    stated correlation). No estimate without variance: the same sentence as rl.power's."""
    from .power_analysis import advice, detectable_sentence, power, size as _size

    delta, alpha, target, metric = (c.t["power_delta"], c.t["power_alpha"], c.t["power_target"],
                                    c.t["power_metric"])
    what = "pass rate" if metric == "pass@1" else metric
    default = delta == config.CHECK_THRESHOLDS["power_delta"]
    goal = (f"the check's target, power_delta = {_size(delta, metric)}{', a default' if default else ''}: "
            "pass power_delta= for the change you need")
    thr = (f"warn when a change of {_size(delta, metric)} in {what} is smaller than the run can detect "
           f"(two-sided α = {alpha:g}, {_pct(target)} power)")
    df = power(c.con, c.run, delta=delta, alpha=alpha, power=target, metric=metric,
               pass_threshold=c.params["threshold"])
    a = df.attrs
    if a["no_estimate"]:
        return _row("power", "skip", None, thr, a["no_estimate"])
    design = f"{a['samples']:,} samples × {a['attempts']:.3g} attempts per sample"
    details = (f"planned for {a['decision']}; assumed correlation {a['correlation']:g} between two checkpoints' per-sample "
               f"results (rl.power(con, run, candidate) measures it); variance between samples "
               f"{a['between_base']:.3g}, between attempts {a['within_base']:.3g}")
    if a["mde"] > delta:
        return _row("power", "warn", a["mde"], thr,
                    f"With {design}, a change in {what} smaller than ±{_size(a['mde'], metric)} will usually go unseen "
                    f"({goal}): {advice(df)}. See rl.power for the trade-off of samples against attempts.", details)
    return _row("power", "pass", a["mde"], thr, f"{detectable_sentence(df)} Enough for {_size(delta, metric)} "
                f"({goal}).", details)


def labelled_sql() -> str:
    return f"""SELECT count(DISTINCT rollout_id) FROM labels
               WHERE rollout_id IN (SELECT rollout_id FROM ({included_sql()}))"""


def check_grader_vs_labels(c: Context) -> dict:
    """The reward against people's labels (rl.grader_calibration): fail when the rollout's score
    agrees with the labels little beyond chance, or when the labels correct its pass rate to an
    interval that excludes what it says. Each grader is shown too, and warns on the same terms
    (a grader that measures something else than the labels — format, style — may rightly differ)."""
    from .calibration import ROLLOUT_SCORE, grader_calibration

    n_min, k_fail, k_warn = c.t["labels_min"], c.t["kappa_fail"], c.t["kappa_warn"]
    thr = (f"fail when the reward's κ against the labels is below {k_fail:g} or the prediction-powered CI of the "
           f"pass rate excludes the reward's own; warn when κ is below {k_warn:g}, or a grader fails those "
           f"({n_min}+ labelled rollouts)")
    n = run_sql(c.con, labelled_sql(), c.params).fetchone()[0]
    if n == 0:
        return _row("grader_vs_labels", "skip", None, thr, "No labelled rollouts in this run: label a random subset "
                    "(rl.labelling_sample, then rl.label or the explorer) to check the graders against people.")
    if n < n_min:
        return _row("grader_vs_labels", "skip", n, thr, f"Only {n} labelled rollouts: label at least {n_min} "
                    "(drawn at random, rl.labelling_sample) to check the graders.")
    cal = grader_calibration(c.con, c.run, pass_threshold=c.params["threshold"])
    cal = cal[cal.labelled >= n_min]
    problems, notes = {}, []
    for r in cal.itertuples():
        # an interval not shown to keep its level (too few labels) does not fail a grader on its own
        outside = not _nan(r.ppi_rate) and not (r.ppi_ci_low <= r.grader_rate <= r.ppi_ci_high) and r.ppi_level_holds
        kappa = "κ undefined" if _nan(r.kappa) else f"κ {r.kappa:.2f}"
        notes.append(f"{r.grader}: {kappa} on {r.labelled}, pass rate {_pct(r.grader_rate)} by it, "
                     f"{_pct(r.ppi_rate)} [{_pct(r.ppi_ci_low)}, {_pct(r.ppi_ci_high)}] corrected by the labels"
                     + ("" if r.ppi_level_holds else f" ({cal.attrs['ppi_note']})"))
        why = ([f"κ {r.kappa:.2f}"] if not _nan(r.kappa) and r.kappa < k_fail else []) + \
              ([f"says {_pct(r.grader_rate)}, labels say {_pct(r.ppi_rate)}"] if outside else [])
        if why:
            problems[r.grader] = ("fail", why)
        elif not _nan(r.kappa) and r.kappa < k_warn:
            problems[r.grader] = ("warn", [f"κ {r.kappa:.2f}"])
    reward = cal[cal.grader == ROLLOUT_SCORE]
    value = float(reward.kappa.iloc[0]) if len(reward) and not _nan(reward.kappa.iloc[0]) else None
    details = "; ".join(notes)
    said = "; ".join(f"{g} ({', '.join(why)})" for g, (_, why) in problems.items())
    if problems.get(ROLLOUT_SCORE, ("",))[0] == "fail":
        return _row("grader_vs_labels", "fail", value, thr, f"The reward disagrees with people: {said}. Read the "
                    "false passes (rl.grader_calibration, the explorer) and fix the grader or its rubric before "
                    "training on it.", details)
    if problems:
        return _row("grader_vs_labels", "warn", value, thr, f"Disagreement with the labels: {said}. A grader "
                    "that measures something else (format, style) may rightly differ; otherwise read where it "
                    "disagrees.", details)
    return _row("grader_vs_labels", "pass", value, thr, f"The reward and {len(cal) - len(reward)} grader(s) agree "
                f"with {n} labelled rollouts.", details)


def leakage_sql() -> str:
    return """
    WITH mine AS (SELECT DISTINCT sample_id FROM rollouts WHERE run_id = $run),
    ids AS (SELECT sample_id FROM samples WHERE split IS NOT NULL AND sample_id IN (SELECT sample_id FROM mine)
            GROUP BY sample_id HAVING count(DISTINCT split) > 1),
    prompts AS (SELECT prompt FROM samples WHERE split IS NOT NULL AND prompt IS NOT NULL
                  AND prompt IN (SELECT prompt FROM samples WHERE sample_id IN (SELECT sample_id FROM mine))
                GROUP BY prompt HAVING count(DISTINCT split) > 1)
    SELECT (SELECT count(DISTINCT split) FROM samples WHERE split IS NOT NULL) AS splits,
           (SELECT count(*) FROM ids) AS shared_ids, (SELECT list(sample_id ORDER BY sample_id) FROM ids) AS id_list,
           (SELECT count(*) FROM prompts) AS shared_prompts
    """


def check_split_leakage(c: Context) -> dict:
    splits, n_ids, ids, n_prompts = run_sql(c.con, leakage_sql(), {"run": c.run}).fetchone()
    thr = "fail on any sample id or prompt present in two splits"
    if splits < 2:
        return _row("split_leakage", "skip", None, thr, "Only one split is loaded: nothing to compare.")
    if n_ids or n_prompts:
        details = f"sample ids: {', '.join(ids[: c.t['examples']])}" if n_ids else ""
        return _row("split_leakage", "fail", n_ids + n_prompts, thr, f"{n_ids} sample ids and {n_prompts} "
                    "prompts appear in more than one split: validation scores would be inflated. "
                    "De-duplicate the splits.", details)
    return _row("split_leakage", "pass", 0, thr, "No sample id or prompt is shared between splits.")


def split_shift_sql() -> str:
    return """
    WITH me AS (SELECT model, step, split FROM runs WHERE run_id = $run),
    peers AS (SELECT r.run_id FROM runs r, me
              WHERE r.run_id <> $run AND r.model IS NOT DISTINCT FROM me.model
                AND r.step IS NOT DISTINCT FROM me.step AND r.split IS DISTINCT FROM me.split
                AND r.split IS NOT NULL AND me.split IS NOT NULL),
    stats AS (
        SELECT o.run_id, avg(coalesce(o.score, 0)) FILTER (WHERE o.status NOT IN ('infra_error', 'ungraded')) AS score,
               avg(o.n_tool_calls) AS calls, avg(length(s.prompt)) AS prompt_len
        FROM rollouts o LEFT JOIN (SELECT sample_id, any_value(prompt) AS prompt FROM samples GROUP BY sample_id) s
             USING (sample_id)
        WHERE o.run_id = $run OR o.run_id IN (SELECT run_id FROM peers) GROUP BY o.run_id)
    SELECT p.run_id, m.score, p.score, m.calls, p.calls, m.prompt_len, p.prompt_len
    FROM stats p, stats m WHERE m.run_id = $run AND p.run_id <> $run ORDER BY p.run_id
    """


def check_split_shift(c: Context) -> dict:
    rows = run_sql(c.con, split_shift_sql(), {"run": c.run}).fetchall()
    d, r = c.t["split_shift_score"], c.t["split_shift_ratio"]
    thr = f"warn when mean score differs by more than {d} or tool calls / prompt length by more than {r}x"
    if not rows:
        return _row("split_shift", "skip", None, thr, "No run of the same model and step on another split.")

    def ratio(a, b):
        return max(a, b) / min(a, b) if a and b else 1.0

    worst, notes = 0.0, []
    for peer, s_me, s_p, c_me, c_p, l_me, l_p in rows:
        score_gap = abs((s_me or 0) - (s_p or 0))
        calls_ratio, len_ratio = ratio(c_me, c_p), ratio(l_me, l_p)
        worst = max(worst, score_gap)
        if score_gap > d or calls_ratio > r or len_ratio > r:
            notes.append(f"{peer}: score {s_me:.3f} vs {s_p:.3f}, tool calls {c_me:.1f} vs {c_p:.1f}, "
                         f"prompt length {l_me or 0:.0f} vs {l_p or 0:.0f}")
    if notes:
        return _row("split_shift", "warn", worst, thr, "Train and validation differ markedly: validation "
                    "may not measure what training teaches. Re-split at random.", "; ".join(notes))
    return _row("split_shift", "pass", worst, thr, "Splits look alike in score, tool calls and prompt length.")


# Checks whose value is a share of 0..1 (people read a percentage); the others' values are counts
# or plain numbers. A check's kind of value lives with it.
SHARE_CHECKS = {"signal_share", "saturation", "infra_errors", "ungraded", "rejected_records", "truncation",
                "long_tail", "tool_budget"}


def check_value(check_name: str, value) -> str:
    """A readiness check's value as people read it: shares as percentages, counts with separators."""
    import numpy as np

    if missing(value):
        return ""
    value = value.item() if isinstance(value, np.generic) else value
    return fmt.share(value) if check_name in SHARE_CHECKS else fmt.number(value)

CHECKS: list[Callable[[Context], dict]] = [
    check_baseline_nonzero, check_attempts, check_signal_share, check_saturation, check_reward_granularity,
    check_infra_errors, check_ungraded, check_rejected_records, check_grader_consistency, check_graders,
    check_grader_vs_labels, check_suspicious_scores,
    check_tool_output_size, check_truncation, check_long_tail, check_tool_budget, check_dataset_size, check_power, check_split_leakage,
    check_split_shift,
]


def check(con: duckdb.DuckDBPyConnection, run: str, pass_threshold: float | None = None,
          **thresholds) -> pd.DataFrame:
    """Readiness checks of one run: one row per check with status pass / warn / fail / skip.

    Override any default of ``config.CHECK_THRESHOLDS`` by
    keyword, e.g. ``tool_budget=10``, ``power_delta=0.1``.
    """
    known = all_thresholds()
    unknown = set(thresholds) - set(known)
    if unknown:
        raise ValueError(f"unknown threshold(s) {', '.join(sorted(unknown))}; known: "
                         f"{', '.join(known)}")
    [label] = resolve_runs(con, run)
    t = {**known, **thresholds}
    thr = common_threshold(con, [label], pass_threshold)
    summary_row = scores.summary(con, label, pass_threshold=thr, ks=(1,)).iloc[0]
    ctx = Context(con, label, t, summary_row, params([label], False, threshold=thr))
    return pd.DataFrame([fn(ctx) for fn in CHECKS], columns=COLUMNS)


def failed(result: pd.DataFrame) -> bool:
    return bool((result["status"] == "fail").any())

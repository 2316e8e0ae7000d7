"""How many samples and attempts a comparison needs: power and sample size (docs/metrics.md, "Power").

A comparison of two checkpoints on the same samples tests the mean of the per-sample differences
d_i = mean_j y_c,ij − mean_j y_b,ij. With k attempts per sample, each run's rollouts decompose
as y_ij = mu_i + e_ij (one-way random effects, by the method of moments): sigma²_b = Var(mu_i)
between samples, sigma²_w = Var(e_ij) between attempts. Attempt noise is independent between
runs, so

    Var(d_i) = sigma²_b,base + sigma²_b,cand − 2 Cov(mu_base, mu_cand) + (sigma²_w,base + sigma²_w,cand) / k

and a two-sided z-test at alpha on n samples detects a true difference delta with probability
``power`` when n = (z_{1−alpha/2} + z_power)² Var(d_i) / delta² (Miller 2024, "Adding Error Bars
to Evals", sections 3-5). Its minimum detectable effect (MDE) on n samples is
(z_{1−alpha/2} + z_power) sqrt(Var(d_i) / n).

With a candidate run the covariance comes from the two runs' per-sample means on their shared
samples; without one the candidate is assumed to vary like the base, with an assumed correlation
of the samples' true means (``correlation``, default POWER_ASSUMED_CORRELATION) that is stated
in the result.

The plan is for the decision the report applies: ``compare``'s primary metric tested alone,
two-sided at alpha (``decision_text``). Power and sample size follow the one-sample t-test on d_i
(noncentral t): the clustered t-test compare runs on the primary metric. From no
observed variance (every value equal) or fewer than 2 samples there is no estimate: the result
says why (``attrs["no_estimate"]``) and every view shows that sentence.
"""
from __future__ import annotations

import math

import duckdb
import numpy as np
import pandas as pd

from .. import config
from ..text import fmt
from . import stats
from .metrics.common import common_threshold, included_sql, params, resolve_runs, run_sql

POWER_ALPHA = config.POWER_ALPHA  # (config.py says what each is)
POWER_TARGET = config.POWER_TARGET
POWER_ATTEMPTS = config.POWER_ATTEMPTS
POWER_ASSUMED_CORRELATION = config.POWER_ASSUMED_CORRELATION

METRICS = {"score": "s", "pass@1": "(s >= pass_at)::DOUBLE"}
COLUMNS = ["attempts", "samples", "rollouts", "design_effect", "se", "mde", "power", "samples_needed",
           "rollouts_needed", "current", "beyond_run_samples"]
# the usual scales of a score: a difference of means is planned within the first that holds the
# observed scores (else within their observed range)
SCORE_SCALES = ((0.0, 1.0), (-1.0, 1.0))


def power_values_sql(metric: str) -> str:
    """One row per counted rollout of the chosen runs that belongs to a sample: its value ``y``
    (the score, or 1/0 for pass@1)."""
    if metric not in METRICS:
        raise ValueError(f"metric {metric!r}: use one of {', '.join(METRICS)}")
    return f"""SELECT run_id, sample_id, {METRICS[metric]} AS y
               FROM ({included_sql()}) WHERE sample_id IS NOT NULL ORDER BY run_id, sample_id"""


def power(con: duckdb.DuckDBPyConnection, base: str, candidate: str | None = None, delta: float | None = None,
          alpha: float = POWER_ALPHA, power: float = POWER_TARGET, attempts: float | None = None,
          samples: int | None = None, metric: str = "score", correlation: float | None = None,
          pass_threshold: float | None = None, include_errors: bool = False) -> pd.DataFrame:
    """Power of a paired comparison from the observed data of ``base`` (and ``candidate``).

    One row per design at equal rollout cost — ``attempts`` per sample in POWER_ATTEMPTS plus
    the current design (``current``): ``samples`` = the current rollouts per run ÷ attempts,
    ``design_effect`` (variance of a sample's k-attempt mean relative to k independent samples:
    1 + (k − 1) × ICC), ``se`` of the mean difference, ``mde`` (the smallest true difference
    detected with probability ``power``), and for a target ``delta``: ``power`` at delta,
    ``samples_needed`` and ``rollouts_needed`` (per run). ``beyond_run_samples`` marks designs that
    need more samples than the run has.

    The current design is the run's (shared samples with a candidate; attempts per sample as
    their harmonic mean), or ``samples`` × ``attempts`` when given. ``attrs``: the headline
    numbers (``mde``, ``se``, ``samples_needed``, ``power_at_delta`` at the current design), the
    variance components, the correlation and whether it was ``observed``, ``given`` or
    ``assumed``, and the settings.
    """
    runs = resolve_runs(con, [base] if candidate is None else [base, candidate])
    thr = common_threshold(con, runs, pass_threshold)  # None: each run's own
    v = run_sql(con, power_values_sql(metric), params(runs, include_errors, threshold=thr)).df()
    check_delta(delta, metric, v.y.to_numpy(float), runs)
    b = v[v.run_id == base]
    vb = stats.variance_components(b.y.to_numpy(float), b.sample_id.to_numpy())
    if candidate is not None:
        c = v[v.run_id == candidate]
        vc = stats.variance_components(c.y.to_numpy(float), c.sample_id.to_numpy())
        mb, mc = (x.groupby("sample_id").y.mean() for x in (b, c))
        shared = mb.index.intersection(mc.index)
        n_now = len(shared)
        cov = float(np.cov(mb[shared], mc[shared], ddof=1)[0, 1]) if n_now > 1 else math.nan
        denominator = math.sqrt(vb["between"] * vc["between"]) if n_now > 1 else math.nan
        if correlation is not None:
            source, cov = "given", float(correlation) * denominator
        else:
            source = "observed"
            correlation = float(np.clip(cov / denominator, -1, 1)) if denominator and not math.isnan(denominator) \
                else math.nan
        observed_diff = float((mc[shared] - mb[shared]).mean()) if n_now else math.nan
    else:
        vc = dict(vb)
        n_now = vb["samples"]
        source = "given" if correlation is not None else "assumed"
        correlation = POWER_ASSUMED_CORRELATION if correlation is None else float(correlation)
        cov = correlation * vb["between"]
        observed_diff = math.nan
    k_b = float(attempts) if attempts is not None else vb["attempts"]
    k_c = float(attempts) if attempts is not None else vc["attempts"]
    n = int(samples) if samples is not None else int(n_now)
    cost = n * k_b if n else 0.0  # rollouts per run of the current design

    bd = vb["between"] + vc["between"] - 2 * (0.0 if math.isnan(cov) else cov)  # Var of the true differences
    wb, wc = vb["within"], vc["within"]
    single = math.isnan(wb) or math.isnan(wc)  # one attempt per sample: between and within cannot be told apart
    if single:  # the observed per-sample means hold both; only the current number of attempts can be evaluated
        bd = vb["var_means"] + vc["var_means"] - 2 * (0.0 if math.isnan(cov) else cov)
        wb = wc = 0.0

    def var_d(kb: float, kc: float) -> float:
        return max(bd, 0.0) + wb / kb + wc / kc

    why = no_estimate(v, runs, metric, int(n_now), var_d(k_b, k_c))
    rows = []
    designs = [(k, False) for k in POWER_ATTEMPTS if not (k == k_b == k_c)] + [(k_b, True)]
    for k, current in designs:
        kc = k_c if current else k
        m = n if current else int(cost // k)
        if why or (single and (not current or attempts not in (None, 1))):  # no estimate, or not identifiable
            vd = math.nan
        else:
            vd = var_d(k, kc)
        rows.append(_design(k, m, vd, bd, wb + wc, delta, alpha, power, current, n_now))
    df = pd.DataFrame(rows, columns=COLUMNS).sort_values(["attempts", "current"], kind="stable").reset_index(drop=True)
    now = df[df.current].iloc[0]
    df.attrs.update(
        base=base, candidate=candidate, metric=metric, delta=delta, alpha=alpha, target_power=power,
        samples=n, attempts=k_b, candidate_attempts=k_c, rollouts=cost, run_samples=int(n_now),
        mde=float(now.mde), se=float(now.se), samples_needed=float(now.samples_needed),
        power_at_delta=float(now.power), correlation=correlation, correlation_source=source,
        between_base=vb["between"], within_base=vb["within"], between_candidate=vc["between"],
        within_candidate=vc["within"], covariance=cov, var_d=float(var_d(k_b, k_c)),
        mean_base=vb["mean"], mean_candidate=vc["mean"] if candidate is not None else math.nan,
        observed_diff=observed_diff, single_attempt=single, pass_threshold=thr, include_errors=include_errors,
        no_estimate=why, decision=decision_text(metric, alpha))
    return df


def score_range(values, metric: str) -> tuple[float, float]:
    """The scale a difference of ``metric`` is planned on: [0, 1] for pass@1; for the score, the
    first of SCORE_SCALES that holds every observed value, else the observed range."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if metric == "pass@1" or not len(values):
        return 0.0, 1.0
    lo, hi = float(values.min()), float(values.max())
    for a, b in SCORE_SCALES:
        if a <= lo and hi <= b:
            return a, b
    return lo, hi


def check_delta(delta, metric: str, values, runs) -> None:
    """A ``delta`` no difference of ``metric`` can reach is refused with the valid range."""
    if delta is None:
        return
    lo, hi = score_range(values, metric)
    span = hi - lo
    if not math.isfinite(delta) or delta == 0 or abs(delta) > span:
        what = ("pass@1 is a share (0.05 = 5 points)" if metric == "pass@1" else
                f"the scores of {' and '.join(runs)} are on a scale of [{fmt.number(lo)}, {fmt.number(hi)}]")
        raise ValueError(f"delta={delta:g} cannot be a difference in {metric}: {what}, so give a delta between "
                         f"−{fmt.number(span)} and +{fmt.number(span)}, not 0")


def no_estimate(values: pd.DataFrame, runs, metric: str, samples: int, var_d: float) -> str | None:
    """Why no detectable difference or sample size can be estimated (None when one can): fewer
    than 2 samples, or no variance observed (every value equal, or per-sample differences that do
    not vary). One sentence for every view: the function's ``attrs``, the CLI, readiness, the report."""
    what = "pass rate" if metric == "pass@1" else metric
    y = values.y.to_numpy(float)
    if samples < 2:
        return (f"No estimate of the differences this comparison could detect: {fmt.count(samples)} sample"
                f"{'' if samples == 1 else 's'} with a counted rollout, and a variance needs 2 or more.")
    if len(y) and float(np.nanmax(y) - np.nanmin(y)) == 0:
        return (f"No estimate of the differences this comparison could detect: every counted rollout of "
                f"{' and '.join(runs)} has the same {what} ({fmt.number(float(y[0]))}), so no variance is observed "
                "and any sample size would be a guess.")
    if math.isnan(var_d) or var_d <= 0:
        return (f"No estimate of the differences this comparison could detect: the per-sample differences in "
                f"{what} do not vary, so no variance is observed and any sample size would be a guess.")
    return None


def decision_text(metric: str, alpha: float) -> str:
    """The decision a plan is for, completing "planned for ...": compare's primary metric tested
    alone, as the report's verdict and ``significant`` read it."""
    primary = config.COMPARE_PRIMARY
    text = (f"the verdict's test: {metric} tested alone, two-sided at α = {fmt.number(alpha)} (compare's "
            "paired t-test of the primary metric)")
    if metric != primary:
        text += f"; compare's primary is {primary} unless you pass primary={metric!r}"
    return text


def _design(k, samples, vd, bd, wd, delta, alpha, target, current, run_samples) -> dict:
    se = math.sqrt(vd / samples) if samples > 0 and not math.isnan(vd) else math.nan
    total = bd + wd
    icc = bd / total if total > 0 else math.nan
    need = stats.samples_needed(vd, delta, alpha, target) if delta is not None else math.nan
    return {"attempts": float(k), "samples": int(samples), "rollouts": float(samples * k),
            "design_effect": 1 + (k - 1) * icc if not math.isnan(icc) else math.nan,
            "se": se, "mde": stats.mde(vd, samples, alpha, target),
            "power": stats.power_at(delta, vd, samples, alpha) if delta is not None else math.nan,
            "samples_needed": need, "rollouts_needed": need * k if not math.isnan(need) else math.nan,
            "current": current, "beyond_run_samples": bool(samples > run_samples)}


def size(x: float, metric: str, signed: bool = False) -> str:
    """A difference in the metric's unit: pass rate in percentage points, scores as numbers."""
    if metric == "pass@1":
        text = fmt.number(100 * abs(x)) + " points"
        return ("+" if x >= 0 else "−") + text if signed else text
    return fmt.signed(x) if signed else fmt.number(x)


def _attempts(k: float) -> str:
    return f"{fmt.number(k)} attempt" + ("" if k == 1 else "s")


def detectable_sentence(df: pd.DataFrame) -> str:
    """The one detectable-difference statement (report, CLI, readiness): 'With 200 samples × 3
    attempts this comparison could detect differences of ±0.081 or larger in score (two-sided
    α = 0.05, 80% power; correlation 0.62, observed).' — or why there is no estimate."""
    a = df.attrs
    if a.get("no_estimate"):
        return a["no_estimate"]
    if a.get("mde") is None or math.isnan(a["mde"]):
        return "No estimate of the differences this comparison could detect from this design."
    unit = "pass rate" if a["metric"] == "pass@1" else a["metric"]
    how = "" if math.isnan(a["correlation"]) else f"; correlation {fmt.number(a['correlation'], 2)}, {a['correlation_source']}"
    return (f"With {fmt.count(a['samples'])} samples × {_attempts(a['attempts'])} this comparison could "
            f"detect differences of ±{size(a['mde'], a['metric'])} or larger in {unit} (two-sided α = "
            f"{fmt.number(a['alpha'])}, {fmt.share(a['target_power'], 0)} power{how}).")


def advice(df: pd.DataFrame) -> str:
    """What to run to detect ``delta``: samples at the current attempts, and the cheapest design
    of the table (rollouts per run)."""
    a = df.attrs
    if a.get("delta") is None or math.isnan(a["samples_needed"]):
        return ""
    text = (f"detecting {size(a['delta'], a['metric'], signed=True)} needs about {fmt.count(a['samples_needed'])} "
            f"samples × {_attempts(a['attempts'])} ({fmt.count(a['samples_needed'] * a['attempts'])} rollouts per run)")
    table = df[~df.current & df.rollouts_needed.notna()]
    if len(table):
        best = table.loc[table.rollouts_needed.idxmin()]
        if best.rollouts_needed < a["samples_needed"] * a["attempts"]:
            text += (f", or {fmt.count(best.samples_needed)} samples × {_attempts(best.attempts)} "
                     f"({fmt.count(best.rollouts_needed)} rollouts per run)")
    return text

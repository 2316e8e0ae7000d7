"""Is the grader right? Graders against people's labels, and the run's pass rate corrected by them.

For each grader of a run (and ``(score)``, the rollout's own score against the pass threshold):
how it agrees with the labels on the labelled rollouts — confusion matrix, accuracy (Wilson CI),
Cohen's kappa (CI of Fleiss, Cohen & Everitt 1969) — and the **prediction-powered** estimate of
the run's true pass rate (Angelopoulos et al. 2023; power-tuned as PPI++, Angelopoulos, Duchi &
Zrnic 2023): the grader's verdicts on every graded rollout, corrected by the grader's mistakes on
the labelled ones,

    theta = lam · mean_all(f) + mean_labelled(y − lam · f),

with a CI that counts attempts at one sample as one cluster (``stats.ppi_influence``) and, with
few labels, is kept from being too narrow by a small-sample variance floor (``stats.ppi_variance``).
lam = 1 (classic PPI) by default: tuned on the data it covers below its level. Beside it: the
grader's naive pass rate (what the dashboard shows) and the labels-only estimate. With a ``base``
run, the same for the difference base → run, paired by sample. ``ppi_level_holds`` says where the
interval was measured to keep its level (PPI_MIN_LABELS labels or more, lam fixed). docs/metrics.md,
"Grader calibration".
"""
from __future__ import annotations

import math

import duckdb
import numpy as np
import pandas as pd

from .. import config
from ..text import fmt
from . import stats
from .labelling import label_truth_sql
from .metrics.common import common_threshold, included_sql, params, resolve_runs, run_sql
from .metrics.graders import grade_rows_sql

ROLLOUT_SCORE = "(score)"  # the row for the rollout's own score (the reward), not one grader's
PPI_LAMBDA = config.PPI_LAMBDA  # (config.py says why)
PPI_MIN_LABELS = config.PPI_MIN_LABELS
COLUMNS = ["grader", "graded", "labelled", "tp", "fp", "fn", "tn", "accuracy", "accuracy_ci_low",
           "accuracy_ci_high", "kappa", "kappa_ci_low", "kappa_ci_high", "grader_rate", "grader_ci_low",
           "grader_ci_high", "label_rate", "label_ci_low", "label_ci_high", "ppi_rate", "ppi_ci_low", "ppi_ci_high",
           "lam", "ppi_level_holds"]
DIFF_COLUMNS = ["base_labelled", "base_grader_rate", "base_ppi_rate", "grader_diff", "grader_diff_ci_low",
                "grader_diff_ci_high", "ppi_diff", "ppi_diff_ci_low", "ppi_diff_ci_high"]


def calibration_sql() -> str:
    """One row per (grader, graded counted rollout) of $runs: the grader's verdict ``f`` (1 / 0),
    the rollout's label ``y`` (share of its labellers saying pass; NULL when unlabelled) and its
    cluster (the sample, or the rollout itself when it has none). ``(score)``: the rollout's own
    score against its run's pass threshold."""
    return f"""
    WITH truth AS ({label_truth_sql()}),
    verdicts AS (
        SELECT '{ROLLOUT_SCORE}' AS grader, rollout_id, run_id, sample_id, (s >= pass_at)::DOUBLE AS f
        FROM ({included_sql()})
        UNION ALL
        SELECT grader, rollout_id, run_id, sample_id, pass::DOUBLE AS f
        FROM ({grade_rows_sql()}) WHERE counted AND pass IS NOT NULL)
    SELECT v.grader, v.run_id, v.rollout_id, coalesce(v.sample_id, 'rollout:' || v.rollout_id) AS cluster, v.f, t.y
    FROM verdicts v LEFT JOIN truth t USING (rollout_id)
    ORDER BY v.grader = '{ROLLOUT_SCORE}' DESC, v.grader, v.run_id, v.rollout_id
    """


def grader_calibration(con: duckdb.DuckDBPyConnection, run: str, grader: str | None = None, base: str | None = None,
                       pass_threshold: float | None = None, ci: float = 0.95, lam: float | None = PPI_LAMBDA,
                       origin: str | None = None, include_errors: bool = False) -> pd.DataFrame:
    """One row per grader of ``run`` (``(score)`` first: the rollout's own score) with labelled
    rollouts or not:

    - ``graded``, ``labelled``: counted rollouts the grader scored, and how many of them are labelled;
    - ``tp, fp, fn, tn``: grader pass / fail against label pass / fail (a rollout's label passes when
      most of its labellers' latest judgements do);
    - ``accuracy`` (Wilson CI), ``kappa`` (Cohen's, with a normal CI);
    - ``grader_rate``: the grader's naive pass rate over every graded rollout (CI clustered by sample);
    - ``label_rate``: the labels alone; ``ppi_rate``: the prediction-powered estimate of the true pass
      rate, with ``lam`` (1 = PPI, the default; 0 = the labels alone; None picks the most precise in
      [0, 1] on the data, whose interval covers below its level);
    - ``ppi_level_holds``: the PPI and labels-only intervals were measured to keep their level here
      (``labelled`` >= PPI_MIN_LABELS and lam fixed); where False every view says the interval may be
      too narrow (``attrs["ppi_note"]``).

    With ``base``: the same grader on the base run, and the differences base → run, naive
    (``grader_diff``) and prediction-powered (``ppi_diff``), paired by sample. ``origin``: use only
    labels whose origin starts with it (e.g. the random subset's). CIs at ``ci``."""
    runs = resolve_runs(con, [run] if base is None else [base, run])
    thr = common_threshold(con, runs, pass_threshold)  # None: each run's own
    data = run_sql(con, calibration_sql(), params(runs, include_errors, threshold=thr, origin=origin)).df()
    if grader is not None:
        if grader not in set(data.grader):
            known = ", ".join(dict.fromkeys(data.grader)) or "none"
            raise ValueError(f"grader {grader!r} did not grade run {run!r}; graders: {known}")
        data = data[data.grader == grader]
    [codes] = stats.cluster_codes(data.cluster.to_numpy()) if len(data) else [np.empty(0, dtype=int)]
    data = data.assign(code=codes)
    n_codes = int(codes.max()) + 1 if len(codes) else 0
    rows = []
    for name, g in data.groupby("grader", sort=False):
        mine = g[g.run_id == run]
        if mine.empty:
            continue
        row, psi_f, psi_ppi = _calibrate(name, mine, n_codes, ci, lam)
        if base is not None:
            row.update(_difference(g[g.run_id == base], mine, psi_f, psi_ppi, row, n_codes, ci, lam))
        rows.append(row)
    df = pd.DataFrame(rows, columns=COLUMNS + (DIFF_COLUMNS if base is not None else []))
    df.attrs.update(run=run, base=base, pass_threshold=thr, ci=ci, lam=lam, origin=origin,
                    include_errors=include_errors, ppi_min_labels=PPI_MIN_LABELS, ppi_note=PPI_NOTE.format(
                        n=PPI_MIN_LABELS, tuned=" or with lam tuned on the data" if lam is None else ""),
                    ppi_interval="normal, cluster-robust, with a small-label variance floor (Bonett & Price 2012)")
    return df


# what every view says where ``ppi_level_holds`` is False
PPI_NOTE = ("fewer than {n} labelled rollouts{tuned}: the prediction-powered interval was not measured to keep "
            "its level there and may be too narrow")


def level_holds(labelled: int, lam) -> bool:
    """Whether the PPI interval was measured to keep its level (docs/benchmarks.md, "Simulations")."""
    return bool(labelled >= PPI_MIN_LABELS and lam is not None)


def _calibrate(name: str, g: pd.DataFrame, n_codes: int, ci: float, lam):
    f, y, codes = g.f.to_numpy(float), g.y.to_numpy(float), g.code.to_numpy()
    lab = ~np.isnan(y)
    yl, fl = y[lab] >= 0.5, f[lab] >= 0.5
    tp, fp = int((fl & yl).sum()), int((fl & ~yl).sum())
    fn, tn = int((~fl & yl).sum()), int((~fl & ~yl).sum())
    n_lab = int(lab.sum())
    acc = (tp + tn) / n_lab if n_lab else math.nan
    acc_lo, acc_hi = stats.wilson(tp + tn, n_lab, ci)
    kappa, _, k_lo, k_hi = stats.cohen_kappa([[tp, fp], [fn, tn]], ci)
    zz = stats.z(0.5 + ci / 2)
    # naive grader rate, clustered by sample
    psi_f = np.bincount(codes, f - f.mean(), minlength=n_codes) / len(f)
    g_rate, g_se = float(f.mean()), _se(psi_f, codes)
    if n_lab:
        # the labels alone: the prediction-powered estimate with lam = 0, so its interval has the same floor
        l_rate, psi_l, _ = stats.ppi_influence(f, y, codes, n_codes, 0.0)
        l_se = math.sqrt(stats.ppi_variance(f, y, codes, n_codes, psi_l, 0.0))
        theta, psi_ppi, used = stats.ppi_influence(f, y, codes, n_codes, lam)
        p_se = math.sqrt(stats.ppi_variance(f, y, codes, n_codes, psi_ppi, used))
    else:
        l_rate = l_se = theta = used = p_se = math.nan
        psi_ppi = np.zeros(n_codes)
    row = {"grader": name, "graded": len(f), "labelled": n_lab, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
           "accuracy": acc, "accuracy_ci_low": acc_lo, "accuracy_ci_high": acc_hi,
           "kappa": kappa, "kappa_ci_low": k_lo, "kappa_ci_high": k_hi,
           "grader_rate": g_rate, "grader_ci_low": g_rate - zz * g_se, "grader_ci_high": g_rate + zz * g_se,
           "label_rate": l_rate, "label_ci_low": l_rate - zz * l_se, "label_ci_high": l_rate + zz * l_se,
           "ppi_rate": theta, "ppi_ci_low": theta - zz * p_se, "ppi_ci_high": theta + zz * p_se, "lam": used,
           "ppi_level_holds": level_holds(n_lab, lam)}
    return row, psi_f, psi_ppi


def _se(psi: np.ndarray, codes: np.ndarray) -> float:
    """Cluster-robust SE over the clusters present (``codes``), from influence values."""
    present = np.unique(codes)
    return stats.influence_se(psi[present])


def _difference(b: pd.DataFrame, run_units: pd.DataFrame, psi_f_c, psi_ppi_c, row: dict, n_codes: int, ci: float,
                lam) -> dict:
    """The base (``b``) → run (``run_units``) differences, naive and prediction-powered: the
    influence of a difference is the difference of influences, cluster by cluster, so samples in
    both runs are paired. The PPI difference's variance has the small-label floor of both runs'
    labelled parts."""
    zz = stats.z(0.5 + ci / 2)
    out = dict.fromkeys(DIFF_COLUMNS, math.nan)
    if b.empty:
        return out
    f, y, codes = b.f.to_numpy(float), b.y.to_numpy(float), b.code.to_numpy()
    lab = ~np.isnan(y)
    psi_f_b = np.bincount(codes, f - f.mean(), minlength=n_codes) / len(f)
    present = ((np.bincount(codes, minlength=n_codes) > 0)
               | (np.bincount(run_units.code.to_numpy(), minlength=n_codes) > 0))
    d_f = float(row["grader_rate"] - f.mean())
    se_f = stats.influence_se((psi_f_c - psi_f_b)[present])
    out.update(base_labelled=int(lab.sum()), base_grader_rate=float(f.mean()), grader_diff=d_f,
               grader_diff_ci_low=d_f - zz * se_f, grader_diff_ci_high=d_f + zz * se_f)
    if lab.any() and not math.isnan(row["ppi_rate"]):
        theta_b, psi_ppi_b, lam_b = stats.ppi_influence(f, y, codes, n_codes, lam)
        d = float(row["ppi_rate"] - theta_b)
        var = stats.influence_se((psi_ppi_c - psi_ppi_b)[present]) ** 2
        fc, yc = run_units.f.to_numpy(float), run_units.y.to_numpy(float)
        lab_c = ~np.isnan(yc)
        floor = (stats.rectifier_floor(fc[lab_c], yc[lab_c], row["lam"])
                 + stats.rectifier_floor(f[lab], y[lab], lam_b)
                 + row["lam"] * lam_b * se_f ** 2)
        var = float(np.nanmax([var, floor]))
        se = math.sqrt(var)
        out.update(base_ppi_rate=theta_b, ppi_diff=d, ppi_diff_ci_low=d - zz * se, ppi_diff_ci_high=d + zz * se)
    return out


def report_table(cal: pd.DataFrame) -> pd.DataFrame:
    """The calibration as people read it (one row per grader with labels): agreement, the
    grader's pass rate, the prediction-powered one, each with its CI."""
    shown = cal[cal.labelled > 0]
    out = pd.DataFrame({
        "grader": shown.grader,
        "labelled": [fmt.count(n) for n in shown.labelled],
        "grader pass / label pass": [f"{tp} / {tp + fn}" for tp, fn in zip(shown.tp, shown.fn)],
        "false passes": [fmt.count(n) for n in shown.fp],
        "accuracy": [fmt.share(a) for a in shown.accuracy],
        "kappa": [f"{fmt.number(k, 2)} {fmt.interval(lo, hi, 2, signs=False)}"
                  for k, lo, hi in zip(shown.kappa, shown.kappa_ci_low, shown.kappa_ci_high)],
        "grader's pass rate": [f"{fmt.share(r)} [{fmt.share(lo)}, {fmt.share(hi)}]"
                               for r, lo, hi in zip(shown.grader_rate, shown.grader_ci_low, shown.grader_ci_high)],
        "corrected by labels (PPI)": [f"{fmt.share(r)} [{fmt.share(lo)}, {fmt.share(hi)}]"
                                      + ("" if holds else " (interval may be too narrow: few labels)")
                                      for r, lo, hi, holds in zip(shown.ppi_rate, shown.ppi_ci_low, shown.ppi_ci_high,
                                                                  shown.ppi_level_holds)],
    })
    if "ppi_diff" in cal.columns:
        out["change, grader → PPI"] = [f"{fmt.signed(a)} → {fmt.signed(b)} {fmt.interval(lo, hi)}"
                                       for a, b, lo, hi in zip(shown.grader_diff, shown.ppi_diff, shown.ppi_diff_ci_low,
                                                               shown.ppi_diff_ci_high)]
    return out.reset_index(drop=True)


def findings(cal: pd.DataFrame, kappa_low: float = 0.4) -> list[str]:
    """Sentences for the report: graders whose kappa is low, and whose prediction-powered CI
    excludes their own pass rate (the grader is biased on this run)."""
    out = []
    shown = cal[cal.labelled > 0]
    if len(shown) and not shown.ppi_level_holds.all():
        few = ", ".join(f"{g} ({n})" for g, n in zip(shown.grader[~shown.ppi_level_holds],
                                                     shown.labelled[~shown.ppi_level_holds]))
        out.append(f"{few}: {cal.attrs.get('ppi_note', PPI_NOTE.format(n=PPI_MIN_LABELS, tuned=''))}; label more "
                   "rollouts drawn at random before reading the corrected pass rate as settled.")
    for r in shown.itertuples():
        if not math.isnan(r.kappa) and r.kappa < kappa_low:
            out.append(f"{r.grader}: agrees with the labels little beyond chance (κ = {fmt.number(r.kappa, 2)} on "
                       f"{r.labelled} labelled rollouts).")
        if not math.isnan(r.ppi_rate) and not (r.ppi_ci_low <= r.grader_rate <= r.ppi_ci_high):
            side = "overstates" if r.grader_rate > r.ppi_ci_high else "understates"
            out.append(f"{r.grader} {side} the pass rate: it says {fmt.share(r.grader_rate)}, the labels correct it "
                       f"to {fmt.share(r.ppi_rate)} [{fmt.share(r.ppi_ci_low)}, {fmt.share(r.ppi_ci_high)}]"
                       + ("." if r.ppi_level_holds else " (few labels: the interval may be too narrow)."))
    return out

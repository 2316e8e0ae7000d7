"""The failure-modes section: how the runs fail and which modes the candidate fixed or introduced
(``rl.failure_modes_diff``).
"""
from __future__ import annotations

import duckdb
import pandas as pd

from ... import config
from ...text import fmt
from ...text.htmltext import esc as _e
from .page import _figure, _keep, _table

# The failure-mode section resamples at most this many times (the fit dominates its time; its
# CIs only sort modes into fixed / unchanged / grew), and shows this many modes.
FAILURE_N_BOOT = 200
FAILURE_TOP = 8


def failures_html(con: duckdb.DuckDBPyConnection, base: str, candidate: str, n_boot: int = FAILURE_N_BOOT,
                  top: int = FAILURE_TOP) -> str:
    """How it fails: ``failure_modes_diff`` in one sentence (``diff_sentence``), the dumbbell of
    every mode, and the ``top`` modes by the size of their change, each with one example rollout
    (its id, final answer and error, escaped)."""
    from ...analysis.failure_modes import diff_sentence, failure_modes_diff
    from ..plots.failure_modes import diff_interactive

    head = "<h2>How it fails</h2>"
    diff = failure_modes_diff(con, base, candidate, n_boot=n_boot)
    if diff.empty:
        return head + f"<p>Neither {_e(base)} nor {_e(candidate)} has failing rollouts.</p>"
    a = diff.attrs
    per_failures = a.get("per") == "failures"
    b_col, c_col, d_col = (("base_share", "candidate_share", "diff") if per_failures
                           else ("base_rate", "candidate_rate", "rate_diff"))
    measure = "share of the run's failures" if per_failures else "share of the run's rollouts that fail this way"
    thr = a.get("pass_threshold", config.PASS_THRESHOLD)
    fitted = ("on every sample, blind to which run each failure came from" if a["in_sample"] else
              f"on {fmt.count(a['samples_fitted'])} samples and counted on the other {fmt.count(a['samples_tested'])}")
    below = "its run's pass threshold" if thr is None else fmt.number(thr)
    note = (f"Failing rollouts of both runs (score below {below}; infra errors and never-graded rollouts "
            "in modes of their own, I1 …) grouped into modes by their final answer (is its value in a tool output, "
            "does it match the reference once units and formats are normalised, a refusal), how the run went "
            "(errors, loops, truncation) and what it called, fitted on both runs together so that a mode means the "
            f"same in each, {fitted}: {fmt.count(a['base_failures'])} of {fmt.count(a['base_rollouts'])} rollouts "
            f"of {base} fail, {fmt.count(a['candidate_failures'])} of {fmt.count(a['candidate_rollouts'])} of "
            f"{candidate}. Per mode, the {measure}, and the change with its 95% CI (bootstrap over samples, "
            f"{n_boot:,} resamples). A verdict other than unchanged needs the change's permutation p-value (a "
            f"sample's attempts in {base} and {candidate} swapped, {fmt.count(a['n_perm'])} times), adjusted across "
            f"the modes by {a['adjust_words']}, to be at most {fmt.number(a['alpha'])}: two runs of one checkpoint "
            "then rarely show a change. A mode is a pattern the failures share, not their cause: read its example.")
    assignments = a["assignments"].set_index("rollout_id")
    order = diff.assign(_size=diff[d_col].abs()).sort_values("_size", ascending=False, kind="stable").head(top)
    examples = []
    for r in order.itertuples():
        pick = ([(candidate, r.examples_candidate), (base, r.examples_base)]
                if r.verdict not in ("fixed", "reduced") else [(base, r.examples_base), (candidate, r.examples_candidate)])
        run, ids = next(((run, ids) for run, ids in pick if len(ids)), (None, []))
        rid = ids[0] if len(ids) else None
        row = assignments.loc[rid] if rid is not None and rid in assignments.index else None
        examples.append((rid, run, None if row is None else row.final_answer, None if row is None else row.error))
    shown = pd.DataFrame({
        "mode": order["mode"].to_numpy(), "what sets it apart": order.label.to_numpy(),
        base: [fmt.share(x) for x in order[b_col]], candidate: [fmt.share(x) for x in order[c_col]],
        "change": [fmt.points(x) for x in order[d_col]],
        "95% CI": [f"[{fmt.points(lo)}, {fmt.points(hi)}]" for lo, hi in
                   zip(order[f"{d_col}_ci_low"], order[f"{d_col}_ci_high"])],
        "p (adjusted)": [fmt.number(x) for x in order.p_adjusted],
        "verdict": order.verdict.to_numpy(),
        "example rollout": [f"{rid} ({run})" if rid else None for rid, run, _, _ in examples],
        "example's final answer": [ans for _, _, ans, _ in examples],
        "example's error": [err for _, _, _, err in examples]})
    more = len(diff) - len(order)
    return (_keep(head + f"<p class='verdict' id='failures-lead'>{_e(diff_sentence(diff))}</p>"
                  f"<p class='note'>{_e(note)}</p>" + _figure(diff_interactive(diff)))
            + f"<h3>The {len(order)} modes that changed most</h3>"
            + _table(shown, long=("example's final answer", "example's error"),
                     numeric=(base, candidate, "change"))
            + (f"<p class='note'>{more} more mode{'s' if more > 1 else ''} in "
               f"<code>rl.failure_modes_diff</code>.</p>" if more > 0 else ""))

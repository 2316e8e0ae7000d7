"""The curation section: what to train on next (``rl.curate``), the forecast of the kept set's signal
and the learning signal by training step.
"""
from __future__ import annotations

import shlex

import duckdb
import pandas as pd

from ...analysis.metrics.common import training_runs
from ...text import fmt
from ...text.htmltext import esc as _e
from .page import _figure, _keep, _table

# What each curation verdict means, for the "What to train on next" table.
CURATION_WORDS = {
    "keep": "learning signal: attempts disagree, the pass rate lies inside the band",
    "too_easy": "passed every attempt: nothing left to learn",
    "too_hard": "never passed: no signal",
    "outside_band": "passes and fails, but outside the band",
    "few_attempts": "too few counted attempts to tell",
    "infra": "every rollout an infra error or never graded: unknown, not hard",
    "suspect": "a rollout the audit flags (only with drop_suspects)",
    "duplicate": "the same prompt as a kept sample",
}
CURATE_FORMATS = "openai-rft|verl|trl|jsonl"


# --- what to train on next, how it fails, cost, graders against labels -----------------------------

def curation_html(con: duckdb.DuckDBPyConnection, base: str, candidate: str) -> str:
    """What to train on next: ``curate(con, base)`` counted per verdict (with an example sample and
    its reason each), the expected learning signal of the kept samples (``forecast``), the signal
    along training when the runs hold two checkpoints or more (``signal_by_step``), and the command
    that writes the training files."""
    from ...analysis.curation import VERDICTS, curate, forecast, signal_by_step
    from ..plots.curation import signal_by_step_interactive

    cur = curate(con, base)
    a = cur.attrs
    counts, n, keep = a["counts"], a["samples"], a["counts"]["keep"]
    lo, hi = a["band"]
    on_pass = a["on"] == "pass_rate"
    band = f"{fmt.share(lo)}–{fmt.share(hi)}" if on_pass else f"{fmt.number(lo)}–{fmt.number(hi)}"
    dropped = [f"{fmt.count(counts[v])} {v.replace('_', ' ')}" for v in VERDICTS if v != "keep" and counts[v]]
    lead = (f"{fmt.count(keep)} of {fmt.count(n)} samples of {base} are worth training on next: their "
            f"{'pass rate' if on_pass else 'mean score'} over at least {a['min_attempts']} attempts lies in {band}, "
            "so attempts disagree and a policy-gradient step has something to learn from."
            + (f" Left out: {', '.join(dropped)}." if dropped else " None is left out."))
    first = cur.drop_duplicates("verdict").set_index("verdict")
    shown = pd.DataFrame({
        "verdict": list(VERDICTS), "samples": [counts[v] for v in VERDICTS],
        "what it means": [CURATION_WORDS[v] for v in VERDICTS],
        "example": [str(first.sample_id[v]) if v in first.index else "" for v in VERDICTS],
        "why": [first.reason[v] if v in first.index else None for v in VERDICTS]})
    parts = [f"<h2>What to train on next</h2><p class='note'>Every sample of {_e(base)} judged by the learning "
             "signal its attempts give (docs/metrics.md, “Curation”); near-duplicate prompts are grouped and kept "
             "once. “Suspect” counts only when curating with drop_suspects.</p>",
             f"<p id='curation-lead'>{_e(lead)}</p>",
             _table(shown, long=("why",), headers={"example": "example sample", "why": "its reason"})]
    if keep:
        try:
            plan = forecast(con, cur)
        except Exception as exc:  # noqa: BLE001 (the counts stand without it)
            parts.append(f"<p class='note failed'>The forecast was not computed: {_e(type(exc).__name__)}: "
                         f"{_e(str(exc), 300)}.</p>")
        else:
            parts.append(f"<p class='note' id='curation-forecast'>{_e(_forecast_sentence(plan))}</p>")
    signal = signal_by_step(con, training_runs(con, also=[base, candidate]))
    checkpoints = signal[signal.data_source == "(all)"][["split", "step", "step_known"]].drop_duplicates()
    if len(checkpoints) >= 2:
        parts.append(_keep("<h3>Learning signal along training</h3><p class='note'>Per checkpoint, the samples "
                           "with at least 2 attempts whose attempts all fail, all pass, or pass and fail (the signal); the dashed line "
                           "is the share whose attempts all scored the same (zero advantage in GRPO).</p>"
                           + _figure(signal_by_step_interactive(signal))))
    command = f"rolloutlab curate --run {shlex.quote(base)} --out DIR --to {CURATE_FORMATS}"
    parts.append("<p class='note'>To write the kept samples as training files (train and validation split by "
                 f"prompt group): <code>{_e(command)}</code>, or <code>rl.curate</code> and "
                 "<code>rl.write_curated</code> in a notebook.</p>")
    return "".join(parts)


def _forecast_sentence(plan: pd.DataFrame) -> str:
    """The forecast in words: the smallest number of attempts per sample whose expected signal
    share reaches the target, against every sample before curation."""
    if plan.empty or plan.expected_signal_share.isna().all():
        return "No kept sample to forecast."
    target = float(plan.target.iloc[0])
    rec = plan[plan.recommended]
    if len(rec):
        r = rec.iloc[0]
        return (f"With {fmt.count(r.k)} attempts per sample (the fewest that reach the {fmt.share(target)} target), an "
                f"expected {fmt.share(r.expected_signal_share)} (95% interval {fmt.share(r.ci_low)}–"
                f"{fmt.share(r.ci_high)}) of the {fmt.count(r.samples)} kept samples give learning signal, against "
                f"{fmt.share(r.all_expected_signal_share)} of all {fmt.count(r.all_samples)} samples before curation.")
    r = plan.iloc[-1]
    return (f"No number of attempts up to {fmt.count(r.k)} reaches the {fmt.share(target)} target: at "
            f"{fmt.count(r.k)} attempts an expected {fmt.share(r.expected_signal_share)} of the kept samples give "
            "learning signal.")

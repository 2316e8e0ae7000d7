"""The graders section: per-grader statistics of both runs and how the graders agree.
"""
from __future__ import annotations

import pandas as pd

from ...analysis.compare import GRADER_PREFIX, significance
from ...analysis.metrics import grader_stats
from ...text import fmt
from ...text.fmt import unit_diff, unit_interval, unit_value
from ...text.htmltext import esc as _e
from .page import _figure, _keep, _table

def _graders(con, base, candidate, cmp, n_boot, pi) -> str:
    stats = {run: grader_stats(con, run) for run in (base, candidate)}
    if all(df.empty for df in stats.values()):
        return "<h2>Graders</h2><p class='note'>No per-grader scores in these logs.</p>"
    per_grader = cmp[cmp.metric.str.startswith(GRADER_PREFIX)]
    pairs = stats[candidate].attrs["pairs"]
    parts = [_keep("<h2>Graders</h2><p class='note'>Each grader's mean score, pass rate and signal share (samples "
                   "whose score from that grader varies across attempts). A model can gain on one grader and lose "
                   f"on another: the table pairs each grader's per-sample score between the runs (95% CI, {n_boot:,} "
                   "resamples).</p>" + _figure(pi.graders({r: df for r, df in stats.items() if not df.empty})))]
    if len(per_grader):
        units = per_grader.unit if "unit" in per_grader else [None] * len(per_grader)
        shown = pd.DataFrame({
            "grader": per_grader.metric.str.slice(len(GRADER_PREFIX)).to_numpy(),
            base: [unit_value(v, u) for v, u in zip(per_grader.base, units)],
            candidate: [unit_value(v, u) for v, u in zip(per_grader.candidate, units)],
            "change": [unit_diff(v, u) for v, u in zip(per_grader["diff"], units)],
            "95% CI": [unit_interval(lo, hi, u) for lo, hi, u in zip(per_grader.ci_low, per_grader.ci_high, units)],
            "samples": [fmt.count(n) for n in per_grader.n_samples],
            "significant": ["yes" if s else "" for s in per_grader.significant]})
        parts.append(_table(shown, numeric=(base, candidate, "change", "samples"))
                     + f"<p class='note'>{_e(significance(cmp))}</p>")
    if len(pairs):
        parts.append(_keep(_figure(pi.grader_disagreement(pairs, candidate))))
    return "".join(parts)

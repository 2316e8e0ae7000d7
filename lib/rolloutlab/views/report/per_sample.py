"""The per-sample section: how each sample's mean score changed from base to candidate, and the
distribution shift.
"""
from __future__ import annotations

import pandas as pd

from ...analysis.compare import sample_deltas
from ...text import fmt
from .page import _figure, _keep, _table

def _per_sample(con, base, candidate, pi) -> str:
    deltas = sample_deltas(con, base, candidate)
    worst = deltas[deltas.outcome == "loss"].sort_values("score_diff").head(10)
    answers = con.execute(
        "SELECT run_id, sample_id, any_value(final_answer ORDER BY attempt) FROM rollouts "
        "WHERE list_contains(?, run_id) AND list_contains(?, sample_id) GROUP BY ALL",
        [[base, candidate], worst.sample_id.tolist()]).fetchall()
    answer = {(r, s): a for r, s, a in answers}
    shown = pd.DataFrame({
        "sample": worst.sample_id.to_numpy(),
        f"{base} score": worst.base_score.to_numpy(), f"{candidate} score": worst.candidate_score.to_numpy(),
        "change": [fmt.signed(d) for d in worst.score_diff],
        f"{base} answer": [answer.get((base, s)) for s in worst.sample_id],
        f"{candidate} answer": [answer.get((candidate, s)) for s in worst.sample_id]})
    table = (_table(shown, long=(f"{base} answer", f"{candidate} answer"), numeric=("change",)) if len(worst)
             else "<p>No sample got worse.</p>")
    return (_keep("<h2>Per sample</h2><p class='note'>Each point is a sample both runs evaluated: up is a better "
                  "score, left is fewer tool calls.</p>" + _figure(pi.quadrants(deltas, base, candidate)))
            + "<h3>Samples that got worse</h3><p class='note'>The ten largest drops, with each run's first "
              "answer.</p>" + table)

"""The suspects section: the candidate's reward-hacking suspects (``rl.audit``), most suspect first,
with their reasons.
"""
from __future__ import annotations

import pandas as pd

from ...analysis.audit import audit_counts
from ...text import fmt
from ...text.htmltext import esc as _e
from .page import _table

def suspects_html(suspects: pd.DataFrame, candidate: str, top: int = 10) -> str:
    """The reward-hacking section: how many suspects, counts by check, the ``top`` ones with
    their reasons, the numbers behind them and the final answer in rows of their own."""
    head = ("<h2>Reward-hacking suspects</h2><p class='note'>Rollouts of the candidate to read first: the audit "
            "ranks, it does not accuse (definitions in docs/metrics.md). Open one in the explorer "
            "(notebook 01-explore, or rl.explore) to confirm.</p>")
    if suspects.empty:
        return head + f"<p>No suspects in {_e(candidate)}.</p>"
    counts = audit_counts(suspects)
    shown = suspects.head(top)
    table = pd.DataFrame({
        "rank": shown["rank"].to_numpy(), "rollout": shown.rollout_id.to_numpy(),
        "sample": shown.sample_id.to_numpy(), "score": shown.score.to_numpy(),
        "tool calls": shown.n_tool_calls.to_numpy(), "checks": [", ".join(c) for c in shown.checks],
        "why": shown.reason.to_numpy(), "numbers": shown.details.to_numpy(),
        "final answer": shown.final_answer.to_numpy()})
    return (head + f"<p>{fmt.count(len(suspects))} suspect rollouts in {_e(candidate)}.</p>"
            + _table(counts[counts.rollouts > 0], headers={"rollouts": "suspects"})
            + f"<h3>Top {min(top, len(suspects))} suspects</h3>"
            + _table(table, long=("why", "numbers", "final answer")))

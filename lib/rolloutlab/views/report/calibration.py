"""The calibration section: each grader against people's labels, with prediction-powered estimates
(``rl.grader_calibration``).
"""
from __future__ import annotations

import shlex

import duckdb

from ...text import fmt
from ...text.htmltext import esc as _e
from .page import _table

def _labelled(con, runs: list[str]) -> dict[str, int]:
    rows = con.execute("SELECT r.run_id, count(DISTINCT l.rollout_id) FROM labels l JOIN rollouts r USING (rollout_id) "
                       "WHERE list_contains(?, r.run_id) GROUP BY r.run_id", [runs]).fetchall()
    return {run: int(n) for run, n in rows}


def calibration_html(con: duckdb.DuckDBPyConnection, base: str, candidate: str) -> str:
    """Graders against people's labels: per run with labelled rollouts, ``grader_calibration``
    as ``report_table`` with its ``findings``; without labels, how to make them."""
    from ...analysis.calibration import findings, grader_calibration, report_table

    head = ("<h2>Graders against people's labels</h2><p class='note'>A grader's pass rate is what the run's score "
            "rests on. Where people labelled a random sample of rollouts, each grader is checked against them "
            "(agreement, Cohen's κ) and the pass rate corrected by its mistakes (prediction-powered inference, "
            "docs/metrics.md, “Grader calibration”).</p>")
    n = _labelled(con, [base, candidate])
    if not any(n.values()):
        return head + (
            f"<p id='calibration-none'>No rollout of {_e(base)} or {_e(candidate)} is labelled. To check the "
            f"graders, draw a random sample to label (<code>{_e(f'rolloutlab labels sample --run {shlex.quote(candidate)}')}"
            "</code>, or <code>rl.labelling_sample(con, run)</code>), label each rollout pass or fail "
            "(<code>rl.label(con, rollout_id, &quot;pass&quot;)</code>, or in the explorer) and build the report "
            "again. Pick them at random, not by hand: the correction needs a random subset.</p>")
    parts = [head]
    for run in (base, candidate):
        if not n.get(run):
            parts.append(f"<h3>{_e(run)}</h3><p class='note'>No labelled rollout.</p>")
            continue
        cal = grader_calibration(con, run)
        said = findings(cal)
        parts.append(f"<h3>{_e(run)}: {fmt.count(n[run])} labelled rollouts</h3>"
                     + _table(report_table(cal), numeric=("labelled", "false passes", "accuracy"))
                     + ("<ul class='caveats'>" + "".join(f"<li class='concern'>{_e(f)}</li>" for f in said) + "</ul>"
                        if said else "<p class='note'>Every labelled grader agrees with the labels beyond chance "
                                     "(κ ≥ 0.4), and each one's pass rate lies inside its corrected CI.</p>"))
    return "".join(parts)

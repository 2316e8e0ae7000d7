"""The methods section: how every number of the report was computed.
"""
from __future__ import annotations

import os

import duckdb

from ... import config
from ...analysis.metrics import summary
from ...store import catalog
from ...text import fmt
from ...text.htmltext import esc as _e
from .page import _table

def methods_html(con: duckdb.DuckDBPyConnection, base: str, candidate: str, n_boot: int = 2000) -> str:
    """Methods and provenance: how the numbers were made, the rollouts of both runs by status, and
    the files that loaded them."""
    both = summary(con, [base, candidate])
    counts = both[["run", "rollouts", "samples", "n_ok", "n_model_error", "n_infra_error", "n_truncated", "n_ungraded",
                   "n_excluded", "score_min", "score_max"]]
    scale = "; ".join(f"{_e(r.run)}: score ≥ {fmt.number(r.pass_threshold)}, a rollout without a score counts as "
                      f"{fmt.number(r.reward_floor)}" for r in both.itertuples())
    ids = sorted({sid for run in (base, candidate)
                  for (sid,) in con.execute(catalog.run_sources_sql(), {"run": run}).fetchall()})
    sources = con.execute("SELECT path, format, n_records AS records, n_records - n_rejected AS loaded, "
                          "n_rejected AS rejected, ingested_at FROM sources WHERE list_contains(?, source_id) "
                          "ORDER BY source_id", [ids]).df()
    sources["path"] = sources.path.map(os.path.basename)
    headers = {"n_ok": "ok", "n_model_error": "model error", "n_infra_error": "infra error",
               "n_truncated": "truncated", "n_ungraded": "ungraded", "n_excluded": "excluded from scores",
               "score_min": "lowest score", "score_max": "highest score",
               "ingested_at": "ingested (UTC)"}
    return ("<h2>Methods and provenance</h2><p class='note'>Scores exclude infra errors and ungraded rollouts "
            "(counted below): a failed tool endpoint says nothing about the model. Differences are paired per "
            "sample over the samples both runs evaluated; each 95% CI and p-value come from one test: a paired t-test "
            "over samples (clustered: the attempts at a sample count once) for the score and the other means and "
            f"ratios, a paired bootstrap over samples ({n_boot:,} resamples, seed 0) for latency percentiles. The score is the primary metric, tested alone; the other metrics are adjusted together "
            f"(Holm). A rollout passes at its run's pass threshold ({scale}). Readiness thresholds: "
            f"{_e(', '.join(f'{k} = {fmt.value(v)}' for k, v in config.CHECK_THRESHOLDS.items()))}.</p>"
            "<h3 id='methods-rollouts'>Rollouts</h3>" + _table(counts, headers=headers)
            + f"<h3>Sources</h3><p class='note'>The files that loaded {_e(base)} or {_e(candidate)}.</p>"
            + _table(sources, headers=headers))

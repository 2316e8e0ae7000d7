"""The endpoint-load section: the load each run put on each tool endpoint, and a planned step's
(``rl.capacity``).
"""
from __future__ import annotations

import pandas as pd

from ... import config
from ...analysis.metrics import capacity, capacity_change
from ...text.htmltext import esc as _e
from .page import _table

def capacity_html(con, base, candidate, batch_size=None, compute_multiplier=None) -> str:
    """The tool endpoint load of both runs, observed and projected for a training step of
    ``batch_size`` x ``compute_multiplier`` rollouts (default ``config.CAPACITY_PLANNED_STEP``)."""
    if batch_size is None:
        batch_size, compute_multiplier = (config.CAPACITY_PLANNED_STEP["batch_size"],
                                          config.CAPACITY_PLANNED_STEP["compute_multiplier"])
    plans = [capacity(con, run, batch_size=batch_size, compute_multiplier=compute_multiplier).assign(run=run)
             for run in (base, candidate)]
    columns = {"run": "run", "tool": "tool", "calls_per_rollout": "calls per rollout",
               "latency_p50": "latency p50 (s)", "latency_p95": "latency p95 (s)",
               "peak_calls_in_flight": "peak in flight", "peak_calls_per_s": "peak calls/s",
               "projected_peak_calls_in_flight": "projected peak in flight",
               "projected_peak_calls_per_s": "projected calls/s"}
    table = pd.concat(plans)[list(columns)]
    step = plans[0].attrs["rollouts_per_step"]
    change = capacity_change(con, base, candidate, batch_size, compute_multiplier)
    return (f"<h2>Tool endpoint load</h2><p class='note'>For whoever runs the tool servers. Observed: what each "
            f"run asked of each endpoint (latency in seconds; peaks from a sweep over call start and end times). "
            f"Projected: a training step of {batch_size:,} × {compute_multiplier or 1:,} = {step:,} rollouts started "
            f"at once, each behaving like that run's ({step:,} sandboxes alive at once). An upper bound when the "
            "platform spreads the starts; the model and its measured error are in docs/metrics.md.</p>"
            f"<p id='capacity-change'>{_e(change.attrs['sentence'])}</p>"
            + _table(table, headers=columns))

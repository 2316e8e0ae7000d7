"""The cost section: dollars per rollout and per solved sample, the cost-score frontier, and a
training job's rollout budget.
"""
from __future__ import annotations

import warnings

import duckdb
import pandas as pd

from ... import config
from ...text import fmt
from ...text.htmltext import esc as _e, missing
from .page import _figure, _keep, _table

def _cost_source(row, as_of: str) -> str:
    if row.cost_source == "logs":
        return "logs"
    if row.cost_source == "prices":
        return f"price table{as_of}"
    if row.cost_source == "logs+prices":
        return f"logs and price table{as_of}"
    return "no price"


def _no_price(row) -> str:
    """Why a run has no cost, in words."""
    if missing(row.input_tokens) and missing(row.output_tokens):
        return f"{row.run}: no price (no cost in the logs and no tokens to price)"
    if missing(row.model):
        return f"{row.run}: no price (no model name to look up, no cost in the logs)"
    return (f"{row.run}: no price (model {row.model} is not in the price table; give it with "
            f"rl.cost(..., prices={{'{row.model}': {{'input': ..., 'output': ...}}}}))")


def cost_html(con: duckdb.DuckDBPyConnection, base: str, candidate: str, n_boot: int = 2000,
              batch_size: int | None = None, compute_multiplier: int | None = None) -> str:
    """Cost: per run, dollars per rollout, per solved sample and in total, and where they came from
    (the logs or the price table); the cost–score frontier; and the rollout cost of the training
    step the capacity section plans (``job_cost`` of the base). A model without a price says "no
    price", never $0; platform training fees are never included."""
    from ...analysis.metrics.costs import PriceWarning, cost, frontier
    from ..plots.cost import interactive_frontier

    if batch_size is None:
        batch_size, compute_multiplier = (config.CAPACITY_PLANNED_STEP["batch_size"],
                                          config.CAPACITY_PLANNED_STEP["compute_multiplier"])
    with warnings.catch_warnings():  # a model without a price: said in the section, not on stderr
        warnings.simplefilter("ignore", PriceWarning)
        costs = cost(con, [base, candidate])
        front = frontier(con, [base, candidate], n_boot=n_boot)
    as_of = costs.attrs.get("prices_as_of") or []
    as_of_text = f" as of {', '.join(as_of)}" if as_of else ""

    def dollars(v, known):
        return fmt.dollars(v) if known and not missing(v) else "no price"

    rows = list(costs.itertuples())
    known = {r.run: not missing(r.cost_per_rollout) for r in rows}
    shown = pd.DataFrame({
        "run": [r.run for r in rows], "model": [r.model for r in rows],
        "cost from": [_cost_source(r, as_of_text) for r in rows],
        "per rollout": [dollars(r.cost_per_rollout, known[r.run]) for r in rows],
        "per solved sample": [dollars(r.cost_per_solved, known[r.run]) if r.passes_costed or not known[r.run]
                              else "none solved" for r in rows],
        "total": [dollars(r.cost_total, known[r.run]) for r in rows],
        "rollouts costed": [f"{fmt.count(r.rollouts_costed)} of {fmt.count(r.rollouts)}" for r in rows]})
    unpriced = [_no_price(r) for r in rows if not known[r.run]]
    parts = ["<h2>Cost</h2><p class='note'>Dollars of the counted rollouts (infra errors and never-graded left out): "
             "from the cost the logs give where they give one, else the run's tokens at the model's list price "
             f"(rolloutlab's price table{_e(as_of_text)}; priced costs bill every input token uncached unless the logs "
             "count cached tokens). Per solved sample: the total over the passing rollouts, what one pass costs. "
             "Platform training fees not included, nor model-grader tokens.</p>",
             _table(shown, numeric=("per rollout", "per solved sample", "total", "rollouts costed"))]
    if unpriced:
        parts.append("<p class='note' id='cost-no-price'>" + _e("; ".join(unpriced)) + ".</p>")
    if front.cost_per_rollout.notna().any() and front.score.notna().any():
        parts.append(_keep(_figure(interactive_frontier(front))))
    parts.append(_job_cost_html(con, base, batch_size, compute_multiplier, known.get(base, False), n_boot))
    return "".join(parts)


def _job_cost_html(con, base, batch_size, compute_multiplier, known, n_boot) -> str:
    """The rollout cost of the planned step (``job_cost`` of the base), fees excluded."""
    from ...analysis.metrics.costs import PriceWarning, job_cost

    step = batch_size * (compute_multiplier or 1)
    head = (f"<h3 id='cost-step'>A training step's rollouts</h3><p class='note'>The step the endpoint-load section "
            f"plans: {batch_size:,} × {compute_multiplier or 1:,} = {step:,} rollouts, each costing what {_e(base)}'s "
            "rollouts cost (failed ones included: they spent tokens too).</p>")
    if not known:
        return head + f"<p>No price for {_e(base)}'s rollouts: no cost for the step.</p>"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PriceWarning)
        jc = job_cost(con, base, samples=batch_size, compute_multiplier=compute_multiplier, n_boot=n_boot)
    one, per_step = jc.set_index("scope").loc["rollout"], jc.set_index("scope").loc["step"]
    return head + (
        f"<p id='cost-step-line'>{_e(fmt.dollars(per_step.cost_usd))} per step (95% CI "
        f"{_e(fmt.dollars(per_step.ci_low))}–{_e(fmt.dollars(per_step.ci_high))}): {_e(fmt.dollars(one.cost_usd))} per "
        f"rollout on average, p50 {_e(fmt.dollars(one.p50))}, p95 {_e(fmt.dollars(one.p95))}. Rollout tokens only: "
        "platform training fees not included (RFT bills training time per hour), nor model-grader tokens.</p>")

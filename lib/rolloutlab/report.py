"""The stakeholder report: one self-contained HTML file (plotly's JavaScript inlined once, no
external requests), built from the same functions as the notebooks. Notebook 06-report shows part
of it as static figures: the headline, readiness, tool calls, latency, per-sample changes and the
methods. Only the report has the score variance per sample, the samples that got worse, the
graders, the reward-hacking suspects, the tool endpoint load and the training curves (by step and
as the trainer reported them). Every string from the logs is HTML-escaped; figures get escaped
text from plots.interactive."""
from __future__ import annotations

import functools
import os
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pandas as pd
from tqdm.auto import tqdm

from . import config
from .compare import GRADER_PREFIX, by_step, compare, distribution_shift, sample_deltas
from .metrics.training import training_metrics
from .metrics import capacity, grader_stats, latency, latency_ecdf, sample_stats, summary
from .audit import audit, audit_counts
from .readiness import check
from .htmltext import esc as _e
from .version import __version__ as VERSION

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:24px auto;padding:0 16px;color:#222}
h1{margin-bottom:0}.sub{color:#666;margin-top:4px}.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:10px 14px;min-width:180px}.card .v{font-size:22px;font-weight:600}
.card .d{color:#555;font-size:13px}table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #e5e5e5;padding:3px 8px;text-align:left}
.note{color:#555;font-size:13px}section{margin-top:28px}
"""


def _table(df: pd.DataFrame, floats: str = "{:.4g}") -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in df.columns)
    rows = "".join("<tr>" + "".join(
        f"<td>{floats.format(v) if isinstance(v, float) and v == v else _e(v)}</td>" for v in row) + "</tr>"
        for row in df.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _figure(fig) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True})


def headline_html(cmp: pd.DataFrame) -> str:
    row, a = cmp.set_index("metric"), cmp.attrs
    score = row.loc["score"]
    p = "" if score.p_value != score.p_value else f", p = {score.p_value:.3g}"
    cards = [
        ("Score", f"{score.base:.3f} → {score.candidate:.3f}",
         f"{score['diff']:+.3f} (95% CI {score.ci_low:+.3f} to {score.ci_high:+.3f}{p})"),
        ("Per sample", f"{a['wins']} / {a['ties']} / {a['losses']}", "better / unchanged / worse"),
    ]
    for metric, label, fmt in (("tool_calls_per_rollout", "Tool calls per rollout", "{:.1f}"),
                               ("latency_p95", "P95 latency (s)", "{:.1f}"),
                               ("tokens_per_rollout", "Tokens per rollout", "{:,.0f}")):
        m = row.loc[metric]
        if m.base == m.base and m.candidate == m.candidate:
            ci = "" if m.ci_low != m.ci_low else f" (95% CI {fmt.format(m.ci_low)} to {fmt.format(m.ci_high)})"
            cards.append((label, f"{fmt.format(m.base)} → {fmt.format(m.candidate)}",
                          f"{'+' if m['diff'] > 0 else ''}{fmt.format(m['diff'])}{ci}"))
    body = "".join(f"<div class='card'><div>{_e(t)}</div><div class='v'>{_e(v)}</div><div class='d'>{_e(d)}</div></div>"
                   for t, v, d in cards)
    coverage = (f"{a['shared_samples']} samples evaluated by both runs"
                + (f"; {a['base_only']} only by {_e(a['base'])}" if a["base_only"] else "")
                + (f"; {a['candidate_only']} only by {_e(a['candidate'])}" if a["candidate_only"] else ""))
    return f"<div class='cards' id='headline'>{body}</div><p class='note'>{coverage}.</p>"


def build_report(con: duckdb.DuckDBPyConnection, base: str, candidate: str, n_boot: int = 2000,
                 progress: bool | None = None, batch_size: int | None = None,
                 compute_multiplier: int | None = None) -> str:
    """The report as one HTML string. ``batch_size``/``compute_multiplier``: the training step the
    capacity section projects (default ``config.CAPACITY_PLANNED_STEP``)."""
    from plotly.offline import get_plotlyjs

    from .plots import interactive as pi, readiness_table

    disable = config.progress_disabled() if progress is None else not progress
    sections: list[str] = []
    comparison = functools.cache(lambda: compare(con, base, candidate, n_boot=n_boot))  # headline and graders
    steps = [
        ("headline", lambda: _headline(comparison())),
        ("readiness", lambda: f"<h2>Readiness of {_e(base)}</h2>" + readiness_table(check(con, base)).to_html()),
        ("variance", lambda: "<h2>Score per sample across attempts</h2><p class='note'>Only samples whose score "
                             "varies across attempts (vermillion) give learning signal.</p>"
                             + _figure(pi.variance({base: sample_stats(con, base), candidate: sample_stats(con, candidate)}))),
        ("tool calls", lambda: "<h2>Tool calls per rollout</h2>"
                               + _figure(pi.tool_calls(distribution_shift(con, base, candidate), base, candidate))),
        ("latency", lambda: "<h2>Latency</h2>" + _figure(pi.latency_ecdf(
            latency_ecdf(con, [base, candidate]), {r: latency(con, r, tool_n_boot=0) for r in (base, candidate)}))),
        ("per sample", lambda: _per_sample(con, base, candidate, pi)),
        ("graders", lambda: _graders(con, base, candidate, comparison(), n_boot, pi)),
        ("suspects", lambda: _suspects(con, base, candidate)),
        ("capacity", lambda: _capacity(con, base, candidate, batch_size, compute_multiplier)),
        ("training", lambda: _training(con, pi)),
        ("trainer", lambda: _trainer(con, pi)),
        ("methods", lambda: _methods(con, base, candidate, n_boot)),
    ]
    for name, make in tqdm(steps, desc="report", unit="section", disable=disable):
        sections.append(f"<section id='{name.replace(' ', '-')}'>{make()}</section>")
    title = f"{_e(base)} → {_e(candidate)}"
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>rolloutlab report: {title}</title>"
            f"<style>{CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            f"<h1>Fine-tuning report: {title}</h1><p class='sub'>rolloutlab {VERSION} · generated "
            f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC</p>{''.join(sections)}</body></html>")


class NoSharedSamplesError(ValueError):
    """The two runs have no sample with a counted rollout under both: nothing to pair."""


def require_shared(cmp: pd.DataFrame) -> pd.DataFrame:
    """``compare``'s result, or an error that names both runs when they share no scored sample
    (every section pairs samples; without this, the first empty figure would blame one run)."""
    a = cmp.attrs
    if a["shared_samples"]:
        return cmp
    base, candidate = a["base"], a["candidate"]
    why = ("the report pairs each sample's scores under the two runs. Compare runs evaluated on the same "
           "samples (a base checkpoint and a fine-tuned one on one evaluation set)")
    if a["unscored"]:
        raise NoSharedSamplesError(
            f"{base} and {candidate} share {a['unscored']} samples, but none has a counted rollout in both runs "
            f"(infra errors and ungraded rollouts are not counted: see `rolloutlab summary`): {why}.")
    raise NoSharedSamplesError(
        f"{base} and {candidate} share no samples ({a['base_only']} samples only in {base}, "
        f"{a['candidate_only']} only in {candidate}): {why}.")


def _headline(cmp: pd.DataFrame) -> str:
    cmp = require_shared(cmp)
    shown = cmp[["metric", "base", "candidate", "diff", "ci_low", "ci_high", "p_value", "significant"]]
    return ("<h2>Headline</h2>" + headline_html(cmp) + "<details><summary>All metrics</summary>"
            + _table(shown) + "</details>")


def _per_sample(con, base, candidate, pi) -> str:
    deltas = sample_deltas(con, base, candidate)
    worst = deltas[deltas.outcome == "loss"].sort_values("score_diff").head(10)
    answers = con.execute(
        "SELECT run_id, sample_id, any_value(final_answer ORDER BY attempt) FROM rollouts "
        "WHERE list_contains(?, run_id) AND list_contains(?, sample_id) GROUP BY ALL",
        [[base, candidate], worst.sample_id.tolist()]).fetchall()
    answer = {(r, s): a for r, s, a in answers}
    worst = worst.assign(**{f"{base} answer": [answer.get((base, s)) for s in worst.sample_id],
                            f"{candidate} answer": [answer.get((candidate, s)) for s in worst.sample_id]})
    table = _table(worst[["sample_id", "base_score", "candidate_score", "score_diff", f"{base} answer",
                          f"{candidate} answer"]]) if len(worst) else "<p>No sample got worse.</p>"
    return ("<h2>Per sample</h2><p class='note'>Each point is a sample both runs evaluated: up is a better score, "
            "left is fewer tool calls.</p>" + _figure(pi.quadrants(deltas, base, candidate))
            + "<h3>Samples that got worse</h3>" + table)


def _graders(con, base, candidate, cmp, n_boot, pi) -> str:
    stats = {run: grader_stats(con, run) for run in (base, candidate)}
    if all(df.empty for df in stats.values()):
        return "<h2>Graders</h2><p class='note'>No per-grader scores in these logs.</p>"
    per_grader = cmp[cmp.metric.str.startswith(GRADER_PREFIX)][["metric", "base", "candidate", "diff", "ci_low",
                                                           "ci_high", "n_samples", "significant"]]
    pairs = stats[candidate].attrs["pairs"]
    parts = ["<h2>Graders</h2><p class='note'>Each grader's mean score, pass rate and signal share (samples whose "
             "score from that grader varies across attempts). A model can gain on one grader and lose on "
             f"another: the table pairs each grader's per-sample score between the runs (95% CI, {n_boot} resamples).</p>",
             _figure(pi.graders({r: df for r, df in stats.items() if not df.empty}))]
    if len(per_grader):
        parts.append(_table(per_grader))
    if len(pairs):
        parts.append(_figure(pi.grader_disagreement(pairs, candidate)))
    return "".join(parts)


def _suspects(con, base, candidate) -> str:
    suspects = audit(con, candidate, base=base)
    head = ("<h2>Reward-hacking suspects</h2><p class='note'>Rollouts of the candidate to read first: the audit "
            "ranks, it does not accuse (definitions in docs/metrics.md). Open one in the explorer "
            "(notebook 01-explore, or rl.explore) to confirm.</p>")
    if suspects.empty:
        return head + "<p>No suspects.</p>"
    counts = audit_counts(suspects)
    top = suspects.head(10).assign(final_answer=lambda d: d.final_answer.str.slice(0, 120))
    return (head + f"<p>{len(suspects)} suspect rollouts.</p>" + _table(counts[counts.rollouts > 0])
            + "<h3>Top suspects</h3>"
            + _table(top[["rank", "rollout_id", "sample_id", "reason", "score", "details", "final_answer"]]))


def _capacity(con, base, candidate, batch_size, compute_multiplier) -> str:
    if batch_size is None:
        batch_size, compute_multiplier = (config.CAPACITY_PLANNED_STEP["batch_size"],
                                          config.CAPACITY_PLANNED_STEP["compute_multiplier"])
    plans = [capacity(con, run, batch_size=batch_size, compute_multiplier=compute_multiplier).assign(run=run)
             for run in (base, candidate)]
    table = pd.concat(plans)[["run", "tool", "calls_per_rollout", "latency_p50", "latency_p95", "peak_calls_in_flight",
                              "peak_calls_per_s", "projected_peak_calls_in_flight", "projected_peak_calls_per_s"]]
    step = plans[0].attrs["rollouts_per_step"]
    return (f"<h2>Tool endpoint load</h2><p class='note'>For whoever runs the tool servers. Observed: what each "
            f"run asked of each endpoint (latency in seconds; peaks from a sweep over call start and end times). "
            f"Projected: a training step of {batch_size} × {compute_multiplier or 1} = {step} rollouts started at once, "
            f"each behaving like that run's ({step} sandboxes alive at once). An upper bound when the platform "
            "spreads the starts; the model and its measured error are in docs/metrics.md.</p>" + _table(table))


def _training(con, pi) -> str:
    stepped = [r for r, s in con.execute("SELECT label, step FROM runs").fetchall() if s is not None]
    if len(stepped) < 2:
        return "<h2>Training curves</h2><p class='note'>Fewer than two runs carry a training step.</p>"
    return ("<h2>Training curves</h2><p class='note'>One line per split; a run without a step (the base) "
            "is an open marker at step 0.</p>" + _figure(pi.training_curves(by_step(con))))


def _trainer(con, pi) -> str:
    metrics = training_metrics(con)
    if metrics.empty:
        return ("<h2>What the trainer reported</h2><p class='note'>No trainer metrics loaded (OpenAI fine-tuning "
                "job events, checkpoints).</p>")
    return ("<h2>What the trainer reported</h2><p class='note'>The training job's own step metrics: reward on "
            "training batches and on validation steps, per grader, grader error rates and step time. "
            "Validation points exist only on validation steps.</p>" + _figure(pi.trainer_curves(metrics)))


def _methods(con, base, candidate, n_boot) -> str:
    counts = summary(con, [base, candidate])[["run", "rollouts", "samples", "n_ok", "n_model_error", "n_infra_error",
                                              "n_truncated", "n_ungraded", "n_excluded"]]
    sources = con.execute("SELECT path, format, n_records AS records, n_records - n_rejected AS loaded, "
                          "n_rejected AS rejected, ingested_at FROM sources ORDER BY source_id").df()
    sources["path"] = sources.path.map(os.path.basename)
    return ("<h2>Methods and provenance</h2><p class='note'>Scores exclude infra errors and ungraded rollouts "
            "(counted below): a failed tool endpoint says nothing about the model. Differences are paired per "
            f"sample over the samples both runs evaluated; 95% CIs from a paired bootstrap over samples ({n_boot} "
            "resamples, seed 0); p-values from a paired permutation (sign-flip) test; latency CIs resample "
            f"samples. A sample passes at score ≥ {config.PASS_THRESHOLD:g}. Readiness thresholds: "
            f"{_e(', '.join(f'{k} = {v}' for k, v in config.CHECK_THRESHOLDS.items()))}.</p>"
            "<h3>Rollouts</h3>" + _table(counts) + "<h3>Sources</h3>" + _table(sources))


def write_report(con: duckdb.DuckDBPyConnection, base: str, candidate: str, path: str | os.PathLike,
                 n_boot: int = 2000, progress: bool | None = None, **step) -> Path:
    """Build the report and write it to ``path``; returns the path. ``step``: build_report's
    batch_size and compute_multiplier."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build_report(con, base, candidate, n_boot=n_boot, progress=progress, **step), encoding="utf-8")
    return out

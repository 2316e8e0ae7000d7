"""Interactive figures (plotly) for notebooks and the HTML report: same data and look as the
static ones, with hovers that name the sample, attempt, score and tool calls. Text from logs is
HTML-escaped before plotly renders it; numbers in hovers and titles go through ``fmt``.

Figures whose points are samples or rollouts say so in each trace's ``meta`` (``{"open":
"sample" | "rollout" | "calls", "runs": [...]}``, escaped) with the escaped id first in each
point's ``customdata``: ``plots.linked`` turns a click on such a point into the explorer opening
it."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ... import config
from ...text import fmt
from ...text.htmltext import esc
from .style import (GOOD_COLOR, INK, NEUTRAL, NO_SIGNAL, OUTCOME_COLORS, QUADRANTS, SIGNAL_COLOR, TOOL_MARKERS, as_runs,
                    in_flight_scopes, minutes_since_start, no_shared_samples, require, reward_floor,
                    run_colors, split_colors, styles, trainer_lines, trainer_panels)

LAYOUT = dict(template="plotly_white", font=dict(size=12), hoverlabel=dict(namelength=-1),
              margin=dict(l=70, r=20, t=80, b=60), separators=".,")


def _esc(values) -> list[str]:
    return [esc(v) for v in values]


def _link(kind: str, runs=()) -> dict:
    """What a click on a point of the trace opens (read by ``plots.linked``)."""
    return {"open": kind, "runs": _esc(runs)}


def _hover(texts) -> dict:
    """Hover text computed here (numbers through fmt), shown as it is."""
    return dict(hovertext=list(texts), hovertemplate="%{hovertext}<extra></extra>")


def _title(text: str, subtitle: str = "") -> dict:
    return dict(text=text + (f"<br><sup>{subtitle}</sup>" if subtitle else ""), x=0.01, xanchor="left")


def variance(stats: pd.DataFrame | dict[str, pd.DataFrame], run: str = "run") -> go.Figure:
    """Per-sample score across attempts (``sample_stats``): mean bar — in the run's color when
    the score varies across attempts, grey when it never does —, ±1 std, best attempt. A click on
    a bar opens the sample's attempts (``plots.linked``)."""
    frames = {name: require(df, f"the variance plot of {name}") for name, df in as_runs(stats, run).items()}
    colors = run_colors(list(frames))
    titles = []
    for name, df in frames.items():
        n_signal = int(df.has_signal.fillna(False).sum())
        titles.append(f"{esc(name)}: {fmt.count(len(df))} samples, {fmt.count(n_signal)} "
                      f"({fmt.share(n_signal / len(df), 0)}) vary")
    fig = make_subplots(rows=1, cols=len(frames), shared_yaxes=True, subplot_titles=titles, horizontal_spacing=0.05)
    shown: set[str] = set()

    def once(key: str) -> bool:
        first = key not in shown
        shown.add(key)
        return first

    for i, (name, df) in enumerate(frames.items(), start=1):
        df = df.sort_values(["mean", "sample_id"]).reset_index(drop=True)
        x = np.arange(len(df))
        signal = df.has_signal.fillna(False).to_numpy(bool)
        floor = reward_floor(df)
        std = df["std"].fillna(0)
        lo, hi = np.maximum(df["mean"] - std, df["min"]), np.minimum(df["mean"] + std, df["max"])
        hover = np.array([f"sample {s} ({esc(name)})<br>{fmt.count(a)} attempts<br>mean {fmt.number(m)} ± "
                          f"{fmt.number(sd)} (scores {fmt.number(mn)} to {fmt.number(mx)})<br>"
                          f"{'score varies: signal' if sig else 'same score every attempt: no signal'}"
                          "<br>click: open its attempts"
                          for s, a, m, sd, mn, mx, sig in zip(_esc(df.sample_id), df.attempts, df["mean"], std,
                                                              df["min"], df["max"], signal)], dtype=object)
        ids = np.array(_esc(df.sample_id), dtype=object)
        for mask, color, label, group in (
                (signal, colors[name], f"{esc(name)}: score varies across attempts (signal)", f"signal {name}"),
                (~signal, NO_SIGNAL, "same score every attempt (no signal)", "constant")):
            if mask.any():  # bars rise from the run's lowest reward: -1 where rewards span [-1, 1]
                fig.add_bar(x=x[mask], y=df["mean"][mask] - floor, base=floor, name=label, legendgroup=group,
                            showlegend=once(group),
                            marker=dict(color=color, line_width=0), customdata=ids[mask],
                            meta=_link("sample", [name]), **_hover(hover[mask]), row=1, col=i)
        # one segment per sample, separated by gaps (None: JSON has no NaN, and a FigureWidget sends JSON)
        xs = [v for i in x for v in (float(i), float(i), None)]
        segments = [v for a, b in zip(lo, hi) for v in (float(a), float(b), None)]
        fig.add_scatter(x=xs, y=segments, mode="lines", line=dict(color=INK, width=1), connectgaps=False,
                        name="±1 std across attempts (within the scores seen)", legendgroup="std",
                        showlegend=once("std"), hoverinfo="skip", row=1, col=i)
        fig.add_scatter(x=x, y=df["max"], mode="markers", name="best attempt", legendgroup="best",
                        showlegend=once("best"), marker=dict(symbol="line-ew-open", color=INK, size=7),
                        hoverinfo="skip", row=1, col=i)
        fig.update_xaxes(title_text="samples, sorted by mean score (one bar each)", showticklabels=False, row=1, col=i)
    fig.update_yaxes(title_text="score per sample: mean over attempts", row=1, col=1)
    fig.update_layout(title=_title("Score per sample across attempts: only samples whose score varies (colored) "
                                   "teach RL", "hover a bar for the sample; click it to open its attempts"),
                      barmode="overlay", bargap=0, legend=dict(orientation="h", y=-0.18), height=470, **LAYOUT)
    return fig


def signal_plan(plan: pd.DataFrame, run: str = "") -> go.Figure:
    """Expected signal share against attempts per sample (``signal_plan``), the target, the
    recommended k."""
    plan = require(plan, "the signal plan")
    color = run_colors([run or "run"])[run or "run"]
    fig = go.Figure()
    fig.add_scatter(x=plan.k, y=plan.expected_signal_share, mode="lines+markers", line_color=color,
                    name=f"{esc(run) + ': ' if run else ''}expected share of samples with signal",
                    **_hover(f"{k} attempts per sample: {fmt.share(v)} of samples expected to vary"
                             for k, v in zip(plan.k, plan.expected_signal_share)))
    target = float(plan.target.iloc[0])
    fig.add_scatter(x=[plan.k.min(), plan.k.max()], y=[target, target], mode="lines", name=f"target {fmt.share(target, 0)}",
                    line=dict(color=NEUTRAL, dash="dash"), hoverinfo="skip")
    rec = plan[plan.recommended]
    what = "the target is not reached within these attempts"
    if len(rec):
        k = int(rec.k.iloc[0])
        what = f"{k} attempts per sample reach the target"
        fig.add_scatter(x=rec.k, y=rec.expected_signal_share, mode="markers", name=f"recommended: {k} attempts per sample",
                        marker=dict(size=16, symbol="circle-open", color=GOOD_COLOR, line_width=2), hoverinfo="skip")
    fig.update_xaxes(type="log", title="attempts per sample (compute multiplier)", tickvals=plan.k)
    fig.update_yaxes(range=[0, 1], title="expected share of samples with signal", tickformat=".1~%")
    fig.update_layout(title=_title(f"How many attempts give learning signal{' — ' + esc(run) if run else ''}: {what}",
                                   f"{fmt.count(plan.samples.iloc[0])} samples"), showlegend=True, **LAYOUT)
    return fig


def tool_calls(dist: pd.DataFrame, base: str, candidate: str) -> go.Figure:
    """Both runs' shares of rollouts per tool-call count (``distribution_shift``), the long tail
    shaded. A click on a bar opens those rollouts in the explorer."""
    dist = require(dist, "the tool-call distribution")
    colors = run_colors([base, candidate])
    fig = go.Figure()
    for label, col, count in ((base, "base_share", "base_count"), (candidate, "candidate_share", "candidate_count")):
        bins = [f"{fmt.count(lo)}" if hi - lo <= 1 else f"{fmt.count(lo)}–{fmt.count(hi - 1)}"
                for lo, hi in zip(dist.value, dist.value_high)]
        fig.add_bar(x=dist.value, y=dist[col], name=f"{esc(label)} ({fmt.count(dist[count].sum())} rollouts)",
                    marker_color=colors[label], customdata=np.column_stack([dist.value, dist.value_high]),
                    meta=_link("calls", [label]),
                    **_hover(f"{esc(label)}: {b} tool calls in {fmt.share(s)} of rollouts ({fmt.count(n)})"
                             "<br>click: list them" for b, s, n in zip(bins, dist[col], dist[count])))
    fig.add_vrect(x0=config.LONG_TAIL_CALLS + 0.5, x1=max(dist.value.max() + 1, config.LONG_TAIL_CALLS + 1.5),
                  fillcolor=SIGNAL_COLOR, opacity=0.08, line_width=0,
                  annotation_text=f"long tail: > {config.LONG_TAIL_CALLS} calls", annotation_position="top left")
    fig.update_layout(title=_title(f"Tool calls per rollout, {esc(base)} against {esc(candidate)}: fewer calls and "
                                   "no long tail is the goal", "click a bar to list its rollouts"),
                      xaxis_title="tool calls per rollout", yaxis_title="share of the run's rollouts",
                      yaxis_tickformat=".1~%", barmode="group", showlegend=True, **LAYOUT)
    return fig


def latency_ecdf(ecdf: pd.DataFrame, percentiles: dict[str, pd.DataFrame] | None = None) -> go.Figure:
    """Rollout latency ECDF per run (``latency_ecdf``), P50/P95/P99 with CIs (``latency``)."""
    ecdf = require(ecdf, "the latency ECDF")
    runs = list(dict.fromkeys(ecdf.run))
    colors = run_colors(runs)
    fig = go.Figure()
    for run in runs:
        d = ecdf[ecdf.run == run]
        fig.add_scatter(x=d.latency_s, y=d.share, mode="lines", line_shape="hv", line_color=colors[run],
                        name=f"{esc(run)} ({fmt.count(len(d))} rollouts)", legendgroup=run,
                        **_hover(f"{esc(run)}: {fmt.share(s)} of rollouts finished within {fmt.seconds(x)}"
                                 for x, s in zip(d.latency_s, d.share)))
        p = (percentiles or {}).get(run)
        if p is not None and (p.scope == "rollout").any():
            p = p[p.scope == "rollout"]
            fig.add_scatter(x=p.value, y=p.percentile / 100, mode="markers+text", marker_color=colors[run],
                            text=[f"P{q:g}" for q in p.percentile], textposition="top left",
                            error_x=dict(type="data", symmetric=False, array=p.ci_high - p.value,
                                         arrayminus=p.value - p.ci_low, color=colors[run]),
                            name=f"{esc(run)}: P50 / P95 / P99 with 95% CI", legendgroup=run,
                            **_hover(f"{esc(run)} P{q:g}: {fmt.seconds(v)} (95% CI {fmt.seconds(lo)} to "
                                     f"{fmt.seconds(hi)})" for q, v, lo, hi in zip(p.percentile, p.value, p.ci_low,
                                                                                   p.ci_high)))
    fig.update_layout(title=_title("Rollout latency: the gap between the curves near the top is the P95 change "
                                   "users feel"), xaxis_title="rollout latency (s)",
                      yaxis_title="share of rollouts finished by then", yaxis_tickformat=".1~%", showlegend=True,
                      **LAYOUT)
    return fig


def latency_vs_score(rollouts: pd.DataFrame) -> go.Figure:
    """Latency against score, one point per rollout (``rollout_table``), one color per run;
    equal scores spread ±0.02 (the hover has the real one). A click opens the rollout."""
    rollouts = require(rollouts, "latency against score")
    runs = list(dict.fromkeys(rollouts.run))
    colors = run_colors(runs)
    jitter = np.random.default_rng(0).uniform(-0.02, 0.02, len(rollouts))
    fig = go.Figure()
    for run in runs:
        m = (rollouts.run == run).to_numpy()
        d = rollouts[m]
        ids = _esc(d.rollout_id) if "rollout_id" in d else [""] * len(d)
        fig.add_scatter(x=d.latency_s, y=d.score + jitter[m], mode="markers",
                        marker=dict(color=colors[run], size=6, opacity=0.5),
                        name=f"{esc(run)} ({fmt.count(len(d))} rollouts)", customdata=ids,
                        meta=_link("rollout", [run]) if "rollout_id" in d else None,
                        **_hover(f"{esc(run)}: sample {s}, attempt {a}<br>score {fmt.number(sc)}, "
                                 f"{fmt.count(n)} tool calls, {fmt.seconds(lat)}<br>click: open it"
                                 for s, a, sc, n, lat in zip(_esc(d.sample_id), d.attempt, d.score, d.n_tool_calls,
                                                             d.latency_s)))
    fig.update_layout(title=_title("Does taking longer pay off? Slow rollouts that score low are flailing",
                                   "one point per rollout; click one to open it"),
                      xaxis_title="rollout latency (s)", yaxis_title="score (equal scores spread ±0.02)",
                      showlegend=True, **LAYOUT)
    return fig


def quadrants(deltas: pd.DataFrame, base: str, candidate: str) -> go.Figure:
    """Per shared sample (``sample_deltas``): score change against tool-call change; color says
    better / no change / worse, the marker fewer / same / more tool calls. A click opens the
    sample's attempts under both runs."""
    deltas = require(deltas, "the quadrant plot", no_shared_samples(base, candidate))
    jitter = np.random.default_rng(0).normal(0, 0.01, (2, len(deltas)))
    fig = go.Figure()
    for name, (outcome, tools) in QUADRANTS.items():
        m = (deltas.quadrant == name).to_numpy()
        if not m.any():
            continue
        d = deltas[m]
        fig.add_scatter(x=d.tool_calls_diff + jitter[0][m], y=d.score_diff + jitter[1][m], mode="markers",
                        name=f"{name}: {fmt.count(len(d))}",
                        marker=dict(color=OUTCOME_COLORS[outcome], symbol=TOOL_MARKERS[tools][0], size=8, opacity=0.7),
                        customdata=_esc(d.sample_id), meta=_link("sample", [base, candidate]),
                        **_hover(f"sample {s}<br>score {fmt.number(b)} → {fmt.number(c)} ({fmt.signed(ds)})<br>"
                                 f"tool calls {fmt.number(bt)} → {fmt.number(ct)} ({fmt.signed(dt)})"
                                 "<br>click: open its attempts"
                                 for s, b, c, ds, bt, ct, dt in zip(_esc(d.sample_id), d.base_score, d.candidate_score,
                                                                    d.score_diff, d.base_tool_calls,
                                                                    d.candidate_tool_calls, d.tool_calls_diff)))
    fig.add_hline(y=0, line_color=NEUTRAL, line_width=1)
    fig.add_vline(x=0, line_color=NEUTRAL, line_width=1)
    fig.update_layout(title=_title(f"Per sample, {esc(base)} → {esc(candidate)} ({fmt.count(len(deltas))} shared "
                                   "samples): upper left is better with fewer tools",
                                   "color: better / no change / worse; marker: fewer / same / more tool calls; "
                                   "click a point to open the sample"),
                      xaxis_title=f"tool calls per rollout, {esc(candidate)} − {esc(base)}",
                      yaxis_title=f"mean score, {esc(candidate)} − {esc(base)}", showlegend=True,
                      legend_title_text="quadrant: samples", **LAYOUT)
    return fig


def forest(comparison: pd.DataFrame) -> go.Figure:
    """Each metric's change relative to the base with its 95% CI (``compare``); black where
    ``compare`` marks it significant (the primary alone, the others adjusted)."""
    c = require(comparison, "the forest plot")
    c = c[c.base.abs() > 0].reset_index(drop=True)
    scale = c.base.abs() / 100
    rel = c["diff"] / scale
    fig = go.Figure()
    for significant, color, label in ((True, INK, "significant"), (False, NEUTRAL, "not significant")):
        m = (c.significant == significant).to_numpy()
        if not m.any():
            continue
        d = c[m]
        fig.add_scatter(x=rel[m], y=_esc(d.metric), mode="markers", name=label, marker=dict(color=color, size=9),
                        error_x=dict(type="data", symmetric=False, array=d.ci_high / scale[m] - rel[m],
                                     arrayminus=rel[m] - d.ci_low / scale[m], color=color),
                        **_hover(f"{esc(mt)}: {fmt.number(b)} → {fmt.number(v)}<br>difference {fmt.signed(df)} "
                                 f"{fmt.interval(lo, hi)}<br>{fmt.pvalue(p) if p == p else 'no p-value'}"
                                 for mt, b, v, df, lo, hi, p in zip(d.metric, d.base, d.candidate, d["diff"], d.ci_low,
                                                                    d.ci_high, d.p_value)))
    fig.add_vline(x=0, line_color=NEUTRAL, line_width=1)
    fig.update_yaxes(title_text="metric", categoryorder="array", categoryarray=_esc(c.metric[::-1]))
    fig.update_xaxes(title_text="change relative to base (%), with 95% CI", ticksuffix="%")
    fig.update_layout(title=_title(f"What changed, base → candidate ({fmt.count(comparison.n_samples.iloc[0])} "
                                   "shared samples): black changes are beyond noise"),
                      height=160 + 32 * len(c), showlegend=True, **LAYOUT)
    return fig


def training_curves(by_step: pd.DataFrame, base: str | None = None, candidate: str | None = None) -> go.Figure:
    """Metrics against training step (``by_step``): one line per split (one legend for all
    panels: they share it); a step-less run an open marker at 0; ``base`` and ``candidate``
    ringed in their run colors when named."""
    from .static import CURVES

    by_step = require(by_step, "training curves")
    fig = make_subplots(rows=2, cols=3, subplot_titles=[label for _, label, _ in CURVES], vertical_spacing=0.16)
    colors = split_colors(list(by_step.split.unique()))
    marked = {r: c for r, c in run_colors([base or "", candidate or ""]).items() if r and (by_step.run == r).any()}
    for i, (col, label, unit) in enumerate(CURVES):
        row, column = i // 3 + 1, i % 3 + 1
        for split, df in by_step.groupby("split", sort=False):
            fig.add_scatter(x=df.step, y=df[col], mode="lines+markers", line_color=colors[split],
                            name=f"split {esc(split)}", legendgroup=f"split {split}", showlegend=i == 0,
                            marker_symbol=["circle" if k else "circle-open" for k in df.step_known],
                            **_hover(f"{esc(r)} (split {esc(split)}, step {s}{'' if k else ': no step, drawn at 0'})"
                                     f": {label} {fmt.share(v) if unit == 'share' else fmt.number(v)}"
                                     for r, s, k, v in zip(df.run, df.step, df.step_known, df[col])),
                            row=row, col=column)
        for run, color in marked.items():
            at = by_step[by_step.run == run]
            fig.add_scatter(x=at.step, y=at[col], mode="markers", name=esc(run), legendgroup=f"run {run}",
                            showlegend=i == 0, hoverinfo="skip",
                            marker=dict(symbol="circle-open", size=15, color=color, line_width=2.5),
                            row=row, col=column)
        fig.update_yaxes(title_text=unit, tickformat=".1~%" if unit == "share" else ",", row=row, col=column)
    fig.update_xaxes(title_text="training step")
    note = "open marker: no step, drawn at 0" if (~by_step.step_known).any() else ""
    fig.update_layout(title=_title(f"Along training ({fmt.count(len(by_step))} checkpoints, one line per split): "
                                   "accuracy should rise as tool calls fall", note),
                      height=600, showlegend=True, **LAYOUT)
    return fig


def trainer_curves(metrics: pd.DataFrame) -> go.Figure:
    """The trainer's own step metrics (``training_metrics``): reward per split, per grader, grader
    error rates, step timing, one panel each with its own legend beside it. Color is the split,
    line style the grader or phase; lines with the same points are drawn once, named together."""
    metrics = require(metrics, "trainer metrics")
    panels = trainer_panels()
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        subplot_titles=[t for t, *_ in panels])
    colors = split_colors(sorted(metrics.split.unique()))
    for i, (title, ylabel, panel, kind) in enumerate(panels, start=1):
        legend = "legend" if i == 1 else f"legend{i}"
        lines = trainer_lines(metrics, panel)
        look = styles(dict.fromkeys(line["style_key"] for line in lines))
        for line in lines:
            dash, _, symbol, _ = look[line["style_key"]]
            df = line["rows"]
            shown = [fmt.share(v) if kind == "share" else fmt.seconds(v) if kind == "seconds" else fmt.number(v)
                     for v in df.value]
            fig.add_scatter(x=df.step, y=df.value, mode="lines+markers", name=esc(line["label"]), legend=legend,
                            line=dict(color=colors[line["split"]], dash=dash), marker_symbol=symbol,
                            **_hover(f"{esc(line['label'])}, step {s}: {v}" for s, v in zip(df.step, shown)),
                            row=i, col=1)
        if not lines:
            fig.add_annotation(text="not reported", showarrow=False, xref=f"x{i} domain" if i > 1 else "x domain",
                               yref=f"y{i} domain" if i > 1 else "y domain", x=0.5, y=0.5, font_color=NEUTRAL)
        fig.update_yaxes(title_text=ylabel, tickformat=".1~%" if kind == "share" else ",", row=i, col=1)
        top = fig.layout[f"yaxis{'' if i == 1 else i}"].domain[1]
        fig.update_layout({legend: dict(x=1.02, y=top, xanchor="left", yanchor="top", font_size=11,
                                        title_text=title.split(":")[0].split(",")[0])})
    fig.update_xaxes(title_text="training step", row=len(panels), col=1)
    jobs = ", ".join(esc(j) for j in sorted(metrics.job.unique()))
    fig.update_layout(title=_title(f"What the trainer reported ({jobs}): a train reward that rises while "
                                   "validation stays flat is overfitting", "validation points exist only on "
                                   "validation steps; color: split, line style: grader or phase"),
                      height=230 * len(panels) + 140, showlegend=True, **{**LAYOUT, "margin": dict(l=70, r=240, t=90, b=60)})
    return fig


def graders(stats: pd.DataFrame | dict[str, pd.DataFrame], run: str = "run") -> go.Figure:
    """Per grader (``grader_stats``): mean score, pass rate and signal share, one panel each, the
    runs side by side in their colors."""
    from .static import GRADER_STATS

    frames = {name: require(df, f"the grader plot of {name}") for name, df in as_runs(stats, run).items()}
    colors = run_colors(list(frames))
    fig = make_subplots(rows=1, cols=len(GRADER_STATS), subplot_titles=[t for _, t, _ in GRADER_STATS])
    for i, (col, title, unit) in enumerate(GRADER_STATS, start=1):
        for name, df in frames.items():
            shown = [fmt.number(v) if unit == "score" else fmt.share(v) for v in df[col]]
            fig.add_bar(x=_esc(df.grader), y=df[col], name=esc(name), marker_color=colors[name], showlegend=i == 1,
                        legendgroup=name, **_hover(f"{esc(name)} · {g}: {title} {v}" for g, v in
                                                  zip(_esc(df.grader), shown)), row=1, col=i)
        fig.update_yaxes(range=[0, 1.05], title_text=unit, tickformat=",.1f" if unit == "score" else ".1~%", row=1, col=i)
        fig.update_xaxes(title_text="grader", row=1, col=i)
    fig.update_layout(title=_title("Graders: one that never varies adds nothing to the reward",
                                   "no bar: not measured"), barmode="group", showlegend=True,
                      legend_title_text="run", **LAYOUT)
    return fig


def grader_disagreement(pairs: pd.DataFrame, run: str = "") -> go.Figure:
    """Share of rollouts where two graders disagree on pass/fail (``grader_pairs``); hover adds
    the score correlation."""
    from .static import _disagreement_matrix

    pairs = require(pairs, "the grader disagreement matrix")
    names, share, corr = _disagreement_matrix(pairs)
    text = [[("" if np.isnan(share[i, j]) else fmt.share(share[i, j], 0)) for j in range(len(names))]
            for i in range(len(names))]
    hover = [[(f"{esc(a)} vs {esc(b)}: pass/fail differ on {fmt.share(share[i, j])} of rollouts"
               + ("" if np.isnan(corr[i, j]) else f", score correlation r = {fmt.number(corr[i, j], 2)}"))
              if i != j else esc(a) for j, b in enumerate(names)] for i, a in enumerate(names)]
    fig = go.Figure(go.Heatmap(z=share, x=_esc(names), y=_esc(names), zmin=0, zmax=1, colorscale="Reds",
                               name="share of rollouts whose pass/fail differ", text=text, texttemplate="%{text}",
                               hovertext=hover, hovertemplate="%{hovertext}<extra></extra>",
                               colorbar=dict(title=dict(text="pass/fail differ"), tickformat=".1~%")))
    fig.update_layout(title=_title(f"Where graders disagree{' — ' + esc(run) if run else ''}: a dark cell is two "
                                   "graders rewarding different things"),
                      xaxis_title="grader", yaxis_title="grader", **LAYOUT)
    fig.update_yaxes(autorange="reversed")
    return fig


def in_flight(df: pd.DataFrame | dict[str, pd.DataFrame], run: str = "") -> go.Figure:
    """Calls in flight over a run (``in_flight``: the peak within each window), one panel per
    scope — rollouts, all tools, each tool — sharing the time axis (zoom one, all follow), so no
    line hides another; time runs from each run's first call, the hover has the clock time. A
    dict {run: frame} draws the runs in their colors."""
    frames = {name: require(d, f"calls in flight of {name}")
              for name, d in as_runs(df, run or getattr(df, "attrs", {}).get("run", "run")).items()}
    colors = run_colors(list(frames))
    scopes = list(dict.fromkeys(s for d in frames.values() for s in in_flight_scopes(d)))
    fig = make_subplots(rows=len(scopes), cols=1, shared_xaxes=True, vertical_spacing=0.35 / len(scopes),
                        subplot_titles=[esc(title) for _, title in scopes])
    for i, (scope, title) in enumerate(scopes, start=1):
        for name, d in frames.items():
            sub = d.assign(minutes=minutes_since_start(d.t))[d.scope == scope]
            fig.add_scatter(x=sub.minutes, y=sub.in_flight, mode="lines", line_shape="hv", fill="tozeroy",
                            line=dict(color=colors[name], width=1), name=esc(name), legendgroup=name,
                            showlegend=i == 1,
                            **_hover(f"{esc(name)} · {esc(scope)}: at most {fmt.count(v)} in flight in the window "
                                     f"from {pd.Timestamp(t):%H:%M:%S}" for t, v in zip(sub.t, sub.in_flight)),
                            row=i, col=1)
        peak = max(int(d[d.scope == scope].in_flight.max()) if (d.scope == scope).any() else 0 for d in frames.values())
        fig.update_yaxes(title_text="in flight", rangemode="tozero", tickformat=",d", dtick=max(1, -(-peak // 4)),
                         row=i, col=1)
    fig.update_xaxes(title_text="minutes since the run's first call (each point: the peak of a window)",
                     row=len(scopes), col=1)
    names = ", ".join(esc(n) for n in frames)
    fig.update_layout(title=_title(f"Calls in flight — {names}: the tallest peaks are what the tool servers must "
                                   "hold", "one panel per tool; zoom to see the detail"),
                      height=150 * len(scopes) + 160, showlegend=True, legend_title_text="run", **LAYOUT)
    return fig


CHECK_ORDER = ["grader_injection", "graders_disagree", "generic_answer", "few_tool_calls", "score_up_grader_down",
               "length_collapse"]


def suspects(audit: pd.DataFrame, run: str = "") -> go.Figure:
    """The reward-hacking audit's suspects (``rl.audit``), most suspect on top: how suspect
    (weighted checks) per rollout, the marker the first check that flagged it; the hover has the
    reasons, details and answer. A click opens the rollout. Pass ``audit(...).head(n)`` to show
    the top n."""
    audit = require(audit, "the reward-hacking suspects", "the audit flagged no rollout")
    audit = audit.sort_values("rank").reset_index(drop=True)
    first = [(list(c) or ["?"])[0] if not isinstance(c, str) else c for c in audit.checks]
    order = [c for c in CHECK_ORDER if c in first] + sorted(set(first) - set(CHECK_ORDER))
    look = styles(order)
    labels = [f"#{r} {s} · {esc(rn)}" for r, s, rn in zip(audit["rank"], _esc(audit.sample_id), audit.run)]
    fig = go.Figure()
    for check in order:
        m = np.array([f == check for f in first])
        d = audit[m]
        checks = [", ".join(c) if not isinstance(c, str) else c for c in d.checks]
        fig.add_scatter(x=d.suspicion, y=np.array(labels, dtype=object)[m], mode="markers", name=esc(check),
                        marker=dict(symbol=look[check][2], size=11, color=SIGNAL_COLOR, line=dict(color=INK, width=1)),
                        customdata=np.column_stack([_esc(d.rollout_id), _esc(d.reason)]),
                        meta=_link("rollout", sorted(set(d.run))),
                        **_hover(f"#{r} {s} ({esc(rn)}), score {fmt.number(sc)}, {fmt.count(n)} tool calls<br>"
                                 f"<b>{esc(reason, 200)}</b><br>{esc(details, 200)}<br>checks: {esc(cs)}<br>"
                                 f"answer: {esc(ans, 160)}<br>click: open it"
                                 for r, s, rn, sc, n, reason, details, cs, ans in
                                 zip(d["rank"], _esc(d.sample_id), d.run, d.score, d.n_tool_calls, d.reason,
                                     d.details, checks, d.final_answer)))
    fig.update_yaxes(title_text="suspect (rank, sample, run)", categoryorder="array", categoryarray=labels[::-1],
                     tickfont_size=10)
    fig.update_xaxes(title_text="suspicion (checks that flagged it, weighted)", rangemode="tozero")
    fig.update_layout(title=_title(f"Reward-hacking suspects{' of ' + esc(run) if run else ''}: read the top ones "
                                   "before trusting the reward", "marker: the first check that flagged it; hover for "
                                   "the reasons, click to open the rollout"),
                      height=max(320, 22 * len(audit) + 170), showlegend=True, legend_title_text="first check",
                      **LAYOUT)
    return fig

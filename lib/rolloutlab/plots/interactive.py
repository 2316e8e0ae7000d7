"""Interactive figures (plotly) for notebooks and the HTML report: same data and look as the
static ones, with hovers that name the sample, attempt, score and tool calls. Text from logs is
HTML-escaped before plotly renders it."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .. import config
from ..htmltext import esc
from .style import (BASE_COLOR, CANDIDATE_COLOR, NEUTRAL, QUADRANT_COLORS, SIGNAL_COLOR, as_runs, in_flight_series,
                    no_shared_samples, require, run_colors, split_colors)

LAYOUT = dict(template="plotly_white", font=dict(size=12), hoverlabel=dict(namelength=-1),
              margin=dict(l=60, r=20, t=60, b=50))


def _esc(values) -> list[str]:
    return [esc(v) for v in values]


def variance(stats: pd.DataFrame | dict[str, pd.DataFrame], run: str = "run") -> go.Figure:
    """Per-sample score across attempts (``sample_stats``): mean bar, ±1 std, best attempt."""
    frames = as_runs(stats, run)
    colors = run_colors(list(frames))
    fig = make_subplots(rows=1, cols=len(frames), shared_yaxes=True, subplot_titles=[
        f"{esc(name)}: {len(require(df, f'the variance plot of {name}'))} samples, "
        f"{int(df.has_signal.sum())} with signal" for name, df in frames.items()])
    for i, (name, df) in enumerate(frames.items(), start=1):
        df = df.sort_values(["mean", "sample_id"]).reset_index(drop=True)
        hover = [f"sample {s}<br>attempts {a}<br>mean {m:.3f} ± {sd:.3f}<br>best {b:.3f}<br>"
                 f"{'score varies' if sig else 'same score every attempt'}"
                 for s, a, m, sd, b, sig in zip(_esc(df.sample_id), df.attempts, df["mean"], df["std"], df["max"],
                                                df.has_signal)]
        fig.add_bar(x=np.arange(len(df)), y=df["mean"], name=f"{name} mean",
                    marker_color=[SIGNAL_COLOR if s else colors[name] for s in df.has_signal], opacity=0.6,
                    # ±1 std, kept within the scores the sample actually got
                    error_y=dict(type="data", symmetric=False, thickness=0.8, width=0,
                                 array=np.minimum(df["mean"] + df["std"], df["max"]) - df["mean"],
                                 arrayminus=df["mean"] - np.maximum(df["mean"] - df["std"], df["min"])),
                    hovertext=hover, hoverinfo="text", row=1, col=i)
        fig.add_scatter(x=np.arange(len(df)), y=df["max"], mode="markers", name=f"{name} best attempt",
                        marker=dict(symbol="line-ew-open", color="black", size=8), hoverinfo="skip", row=1, col=i)
        fig.update_xaxes(title_text="samples, sorted by mean score", showticklabels=False, row=1, col=i)
    fig.update_yaxes(title_text="score", row=1, col=1)
    fig.update_layout(title="Score per sample across attempts (vermillion: the score varies)", bargap=0,
                      showlegend=False, **LAYOUT)
    return fig


def signal_plan(plan: pd.DataFrame, run: str = "") -> go.Figure:
    plan = require(plan, "the signal plan")
    fig = go.Figure()
    fig.add_scatter(x=plan.k, y=plan.expected_signal_share, mode="lines+markers", line_color=BASE_COLOR,
                    name="expected signal share", hovertemplate="%{x} attempts: %{y:.1%}<extra></extra>")
    fig.add_hline(y=float(plan.target.iloc[0]), line_dash="dash", line_color=NEUTRAL,
                  annotation_text=f"target {float(plan.target.iloc[0]):.0%}")
    rec = plan[plan.recommended]
    if len(rec):
        fig.add_scatter(x=rec.k, y=rec.expected_signal_share, mode="markers", name="recommended",
                        marker=dict(size=16, symbol="circle-open", color=SIGNAL_COLOR, line_width=2))
    fig.update_xaxes(type="log", title="attempts per sample (compute multiplier)", tickvals=plan.k)
    fig.update_yaxes(range=[0, 1], title="expected share of samples with signal", tickformat=".0%")
    fig.update_layout(title=f"How many attempts give learning signal {esc(run)}", **LAYOUT)
    return fig


def tool_calls(dist: pd.DataFrame, base: str, candidate: str) -> go.Figure:
    dist = require(dist, "the tool-call distribution")
    fig = go.Figure()
    for label, col, count, color in ((base, "base_share", "base_count", BASE_COLOR),
                                     (candidate, "candidate_share", "candidate_count", CANDIDATE_COLOR)):
        fig.add_bar(x=dist.value, y=dist[col], name=f"{esc(label)} ({int(dist[count].sum())} rollouts)",
                    marker_color=color, customdata=dist[count],
                    hovertemplate="%{x} calls: %{y:.1%} (%{customdata} rollouts)<extra></extra>")
    fig.add_vrect(x0=config.LONG_TAIL_CALLS + 0.5, x1=max(dist.value.max() + 1, config.LONG_TAIL_CALLS + 1.5),
                  fillcolor=SIGNAL_COLOR, opacity=0.08, line_width=0,
                  annotation_text=f"> {config.LONG_TAIL_CALLS} calls")
    fig.update_layout(title="Tool calls per rollout", xaxis_title="tool calls per rollout",
                      yaxis_title="share of rollouts", yaxis_tickformat=".0%", barmode="group", **LAYOUT)
    return fig


def latency_ecdf(ecdf: pd.DataFrame, percentiles: dict[str, pd.DataFrame] | None = None) -> go.Figure:
    ecdf = require(ecdf, "the latency ECDF")
    runs = list(dict.fromkeys(ecdf.run))
    colors = run_colors(runs)
    fig = go.Figure()
    for run in runs:
        d = ecdf[ecdf.run == run]
        fig.add_scatter(x=d.latency_s, y=d.share, mode="lines", line_shape="hv", line_color=colors[run],
                        name=f"{esc(run)} ({len(d)} rollouts)",
                        hovertemplate="%{x:.2f}s: %{y:.1%} of rollouts at or below<extra></extra>")
        p = (percentiles or {}).get(run)
        if p is not None:
            p = p[p.scope == "rollout"]
            fig.add_scatter(x=p.value, y=p.percentile / 100, mode="markers", marker_color=colors[run],
                            error_x=dict(type="data", symmetric=False, array=p.ci_high - p.value,
                                         arrayminus=p.value - p.ci_low), showlegend=False,
                            customdata=np.column_stack([p.percentile, p.ci_low, p.ci_high]),
                            hovertemplate="P%{customdata[0]}: %{x:.2f}s [%{customdata[1]:.2f}, %{customdata[2]:.2f}]"
                                          "<extra></extra>")
    fig.update_layout(title="Rollout latency (P50 / P95 / P99 with 95% CIs)", xaxis_title="rollout latency (s)",
                      yaxis_title="share of rollouts at or below", yaxis_tickformat=".0%", **LAYOUT)
    return fig


def latency_vs_score(rollouts: pd.DataFrame) -> go.Figure:
    rollouts = require(rollouts, "latency against score")
    runs = list(dict.fromkeys(rollouts.run))
    colors = run_colors(runs)
    fig = go.Figure()
    for run in runs:
        d = rollouts[rollouts.run == run]
        fig.add_scatter(x=d.latency_s, y=d.score, mode="markers", marker=dict(color=colors[run], size=6, opacity=0.5),
                        name=esc(run),
                        customdata=np.column_stack([_esc(d.sample_id), d.attempt, d.n_tool_calls]),
                        hovertemplate="sample %{customdata[0]}, attempt %{customdata[1]}<br>score %{y:.3f}<br>"
                                      "%{customdata[2]} tool calls<br>%{x:.2f}s<extra></extra>")
    fig.update_layout(title="Does taking longer pay off?", xaxis_title="rollout latency (s)", yaxis_title="score",
                      **LAYOUT)
    return fig


def quadrants(deltas: pd.DataFrame, base: str, candidate: str) -> go.Figure:
    deltas = require(deltas, "the quadrant plot", no_shared_samples(base, candidate))
    fig = go.Figure()
    for name, color in QUADRANT_COLORS.items():
        d = deltas[deltas.quadrant == name]
        if len(d):
            fig.add_scatter(x=d.tool_calls_diff, y=d.score_diff, mode="markers", name=f"{name}: {len(d)}",
                            marker=dict(color=color, size=7, opacity=0.7),
                            customdata=np.column_stack([_esc(d.sample_id), d.base_score, d.candidate_score,
                                                        d.base_tool_calls, d.candidate_tool_calls]),
                            hovertemplate="sample %{customdata[0]}<br>score %{customdata[1]:.2f} → %{customdata[2]:.2f}"
                                          "<br>tool calls %{customdata[3]:.1f} → %{customdata[4]:.1f}<extra></extra>")
    fig.add_hline(y=0, line_color=NEUTRAL, line_width=1)
    fig.add_vline(x=0, line_color=NEUTRAL, line_width=1)
    fig.update_layout(title=f"Per sample: {esc(base)} → {esc(candidate)} ({len(deltas)} shared samples)",
                      xaxis_title="tool calls per rollout, change", yaxis_title="mean score, change", **LAYOUT)
    return fig


def forest(comparison: pd.DataFrame) -> go.Figure:
    c = require(comparison, "the forest plot")
    c = c[c.base.abs() > 0].iloc[::-1]
    scale = c.base.abs() / 100
    rel = c["diff"] / scale
    fig = go.Figure(go.Scatter(
        x=rel, y=c.metric, mode="markers",
        marker=dict(color=[SIGNAL_COLOR if s else NEUTRAL for s in c.significant], size=9),
        error_x=dict(type="data", symmetric=False, array=c.ci_high / scale - rel, arrayminus=rel - c.ci_low / scale),
        customdata=np.column_stack([c.base, c.candidate, c["diff"], c.ci_low, c.ci_high, c.p_value.fillna(-1)]),
        hovertemplate="%{y}: %{customdata[0]:.4g} → %{customdata[1]:.4g}<br>difference %{customdata[2]:+.4g} "
                      "[%{customdata[3]:+.4g}, %{customdata[4]:+.4g}]<br>p %{customdata[5]:.3g}<extra></extra>"))
    fig.add_vline(x=0, line_color="black", line_width=1)
    fig.update_layout(title=f"What changed ({int(comparison.n_samples.iloc[0])} shared samples; vermillion: CI excludes 0)",
                      xaxis_title="change relative to base (%), 95% CI", height=120 + 32 * len(c), **LAYOUT)
    return fig


def training_curves(by_step: pd.DataFrame) -> go.Figure:
    from .static import CURVES

    by_step = require(by_step, "training curves")
    fig = make_subplots(rows=2, cols=3, subplot_titles=[label for _, label in CURVES])
    colors = split_colors(list(by_step.split.unique()))
    for i, (col, _) in enumerate(CURVES):
        for split, df in by_step.groupby("split", sort=False):
            fig.add_scatter(x=df.step, y=df[col], mode="lines+markers", line_color=colors[split],
                            name=esc(str(split)), legendgroup=str(split), showlegend=i == 0,
                            marker_symbol=["circle" if k else "circle-open" for k in df.step_known],
                            customdata=_esc(df.run),
                            hovertemplate="%{customdata} (step %{x}): %{y:.4g}<extra></extra>",
                            row=i // 3 + 1, col=i % 3 + 1)
    fig.update_xaxes(title_text="training step")
    note = " (open marker: no step, drawn at 0)" if (~by_step.step_known).any() else ""
    fig.update_layout(title=f"Along training ({len(by_step)} checkpoints, one line per split){note}",
                      legend_title_text="split", height=560, **LAYOUT)
    return fig


def trainer_curves(metrics: pd.DataFrame) -> go.Figure:
    """The trainer's own step metrics (``training_metrics``): reward per split, per grader, grader
    error rates, step timing."""
    from .static import TRAINER_PANELS, trainer_series

    metrics = require(metrics, "trainer metrics")
    fig = make_subplots(rows=2, cols=2, subplot_titles=[t for t, _ in TRAINER_PANELS])
    palette = [BASE_COLOR, CANDIDATE_COLOR] + list(QUADRANT_COLORS.values())
    for i, (_, panel) in enumerate(TRAINER_PANELS):
        for j, (label, df) in enumerate(trainer_series(metrics, panel).items()):
            fig.add_scatter(x=df.step, y=df.value, mode="lines+markers", name=esc(label),
                            line_color=palette[j % len(palette)],
                            hovertemplate=f"{esc(label)} (step %{{x}}): %{{y:.4g}}<extra></extra>",
                            row=i // 2 + 1, col=i % 2 + 1)
    fig.update_xaxes(title_text="training step")
    jobs = ", ".join(esc(j) for j in sorted(metrics.job.unique()))
    fig.update_layout(title=f"What the trainer reported ({jobs})", height=620, **LAYOUT)
    return fig


def graders(stats: pd.DataFrame | dict[str, pd.DataFrame], run: str = "run") -> go.Figure:
    """Per grader (``grader_stats``): mean score, pass rate and signal share; one panel per run."""
    frames = as_runs(stats, run)
    fig = make_subplots(rows=1, cols=len(frames), shared_yaxes=True,
                        subplot_titles=[esc(name) for name in frames])
    bars = (("mean", "mean score", BASE_COLOR), ("pass_rate", "pass rate", CANDIDATE_COLOR),
            ("signal_share", "signal share", SIGNAL_COLOR))
    for i, (name, df) in enumerate(frames.items(), start=1):
        df = require(df, f"the grader plot of {name}")
        for col, label, color in bars:
            fig.add_bar(x=_esc(df.grader), y=df[col], name=label, marker_color=color, showlegend=i == 1,
                        legendgroup=label, hovertemplate=f"%{{x}}: {label} %{{y:.3f}}<extra></extra>", row=1, col=i)
    fig.update_yaxes(range=[0, 1.05], title_text="share / score", row=1, col=1)
    fig.update_layout(title="Graders: mean score, pass rate, signal share", barmode="group", **LAYOUT)
    return fig


def grader_disagreement(pairs: pd.DataFrame, run: str = "") -> go.Figure:
    """Share of rollouts where two graders disagree on pass/fail (``grader_pairs``); hover adds
    the score correlation and rollouts compared."""
    from .static import _disagreement_matrix

    pairs = require(pairs, "the grader disagreement matrix")
    names, share, corr = _disagreement_matrix(pairs)
    text = [[("" if np.isnan(share[i, j]) else f"{share[i, j]:.0%}") for j in range(len(names))]
            for i in range(len(names))]
    hover = [[(f"{esc(a)} vs {esc(b)}: disagree on {share[i, j]:.1%} of rollouts"
               + ("" if np.isnan(corr[i, j]) else f", r = {corr[i, j]:.2f}")) if i != j else esc(a)
              for j, b in enumerate(names)] for i, a in enumerate(names)]
    fig = go.Figure(go.Heatmap(z=share, x=_esc(names), y=_esc(names), zmin=0, zmax=1, colorscale="Oranges",
                               text=text, texttemplate="%{text}", hovertext=hover, hoverinfo="text",
                               colorbar=dict(title="pass/fail differ")))
    fig.update_layout(title=f"Where graders disagree {esc(run)}".strip(), **LAYOUT)
    fig.update_yaxes(autorange="reversed")
    return fig


def in_flight(df: pd.DataFrame, run: str = "") -> go.Figure:
    """Calls in flight per tool and rollouts in flight over a run (from ``in_flight``), as steps."""
    df = require(df, "calls in flight")
    fig = go.Figure()
    for scope, kind, sub, color in in_flight_series(df):
        line = {"rollouts": dict(dash="dash"), "all": dict(width=2), "tool": dict(width=1)}[kind]
        name = "rollouts in flight" if kind == "rollouts" else esc(scope)
        fig.add_trace(go.Scatter(x=sub.t, y=sub.in_flight, mode="lines", line_shape="hv", line=dict(color=color, **line),
                                 name=name))
    fig.update_layout(**LAYOUT, title=f"Calls in flight{' — ' + esc(run) if run else ''}",
                      yaxis_title="in flight at once")
    return fig

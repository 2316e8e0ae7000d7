"""The cost–score frontier (from ``metrics.costs.frontier``): every run's score with its CI against
its cost per rollout (or per solved sample), the Pareto-optimal runs marked — no other run scores
more for less. Static (matplotlib) and interactive (plotly), the same data and look; neither
aggregates. Colors of ``style``: each run its run color (the first the base blue, the second the
candidate orange); the frontier line grey; CIs in the run's color."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, NullFormatter

from ...text import fmt
from ...text.htmltext import esc
from .style import INK, NEUTRAL, require, run_colors

AXES = {"cost_per_rollout": ("cost per rollout", "pareto"),
        "cost_per_solved": ("cost per solved sample (cost ÷ passing rollouts)", "pareto_per_solved")}
LOG_SPREAD = 10  # a log cost axis when the costs shown span more than this factor
STAR, DOT = ("*", "star"), ("o", "circle")


def _points(df: pd.DataFrame, x: str) -> tuple[pd.DataFrame, list[str], str]:
    """The runs with a cost and a score (in frame order), the runs left out, the Pareto column."""
    if x not in AXES:
        raise ValueError(f"x must be one of {', '.join(AXES)}; got {x!r}")
    df = require(df, "the cost–score frontier", "no runs (pass the frame of rl.frontier)")
    flag = AXES[x][1]
    shown = df[df[x].notna() & df.score.notna()]
    left_out = [str(r) for r in df.run[~df.index.isin(shown.index)]]
    require(shown, "the cost–score frontier", "no run has both a cost and a score: give the model's price "
            "(rl.cost(..., prices=...)) or log costs")
    return shown, left_out, flag


def _log_axis(values) -> bool:
    v = np.asarray([x for x in values if x and x > 0 and math.isfinite(x)], dtype=float)
    return v.size >= 2 and v.max() / v.min() > LOG_SPREAD


def _titles(df: pd.DataFrame, shown: pd.DataFrame, left_out: list[str], x: str, flag: str) -> tuple[str, str]:
    what = AXES[x][0].split(" (")[0]
    title = f"Score against {what}: ★ no other run scores more for less (Pareto frontier)"
    on = [str(r) for r, p in zip(shown.run, shown[flag]) if p is True or p == True]  # noqa: E712 (pandas NA)
    sources = sorted({s for s in shown.cost_source.dropna()})
    parts = [f"on the frontier: {', '.join(on) or 'none'}", f"cost from {' and '.join(sources) or 'nowhere'}"]
    if "prices" in " ".join(sources):
        parts.append("priced costs bill every input token uncached: an upper bound")
    if left_out:
        parts.append(f"no cost, not shown: {', '.join(left_out)}")
    ci = df.attrs.get("ci", 0.95)
    parts.append(f"bars: {fmt.share(ci, 0)} CIs (bootstrap over samples); training fees not included")
    return title, "; ".join(parts)


def static_frontier(df: pd.DataFrame, x: str = "cost_per_rollout") -> Figure:
    """Matplotlib figure of ``frontier``'s frame: score (with CI) against ``x`` (``cost_per_rollout``
    or ``cost_per_solved``, with CI) per run, ★ for the Pareto-optimal runs joined by a grey line."""
    shown, left_out, flag = _points(df, x)
    colors = run_colors([str(r) for r in df.run])
    fig = Figure(figsize=(8.5, 5.2), layout="constrained")
    ax = fig.subplots()
    for row in shown.itertuples(index=False):
        run = str(row.run)
        best = bool(getattr(row, flag) is True or getattr(row, flag) == True)  # noqa: E712
        xv, lo, hi = getattr(row, x), getattr(row, f"{x}_ci_low"), getattr(row, f"{x}_ci_high")
        xerr = [[max(xv - lo, 0)], [max(hi - xv, 0)]] if not (pd.isna(lo) or pd.isna(hi)) else None
        yerr = [[max(row.score - row.score_ci_low, 0)], [max(row.score_ci_high - row.score, 0)]] \
            if not (pd.isna(row.score_ci_low) or pd.isna(row.score_ci_high)) else None
        ax.errorbar([xv], [row.score], xerr=xerr, yerr=yerr, fmt=STAR[0] if best else DOT[0],
                    markersize=15 if best else 8, color=colors[run], ecolor=colors[run], elinewidth=1.2,
                    capsize=3, markeredgecolor=INK if best else colors[run], label=run, zorder=3)
        ax.annotate(run, (xv, row.score), textcoords="offset points", xytext=(8, 6), fontsize=8, color=INK)
    front = shown[[bool(v is True or v == True) for v in shown[flag]]].sort_values(x)  # noqa: E712
    if len(front) >= 2:
        ax.plot(front[x], front.score, linestyle="--", color=NEUTRAL, linewidth=1.2, zorder=1,
                label="Pareto frontier (the runs marked ★)")
    if _log_axis(shown[x]):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt.dollars(v)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt.number(v)))
    label = AXES[x][0]
    ax.set_xlabel(f"{label}, USD{' (log scale)' if ax.get_xscale() == 'log' else ''}")
    ax.set_ylabel("score: mean over samples (with CI)")
    title, subtitle = _titles(df, shown, left_out, x, flag)
    fig.suptitle(title)
    ax.set_title(subtitle, fontsize=8, wrap=True)
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], linestyle="", marker=STAR[0], markersize=11, color=INK),
                Line2D([], [], linestyle="", marker=DOT[0], markersize=7, color=INK)]
    labels += ["★ Pareto-optimal: no run scores more for less", "● another run scores as much for less"]
    ax.legend(handles, labels, loc="best", fontsize=8)
    return fig


def interactive_frontier(df: pd.DataFrame, x: str = "cost_per_rollout"):
    """Plotly figure of ``frontier``'s frame, the same as ``static_frontier``; hovers give the run,
    model, score and cost with their CIs, the cost's source."""
    import plotly.graph_objects as go

    shown, left_out, flag = _points(df, x)
    colors = run_colors([str(r) for r in df.run])
    fig = go.Figure()
    for row in shown.itertuples(index=False):
        run = str(row.run)
        best = bool(getattr(row, flag) is True or getattr(row, flag) == True)  # noqa: E712
        xv, lo, hi = getattr(row, x), getattr(row, f"{x}_ci_low"), getattr(row, f"{x}_ci_high")
        hover = (f"<b>{esc(run)}</b> ({esc(row.model or 'no model')})<br>score {fmt.number(row.score)} "
                 f"{fmt.interval(row.score_ci_low, row.score_ci_high, signs=False)}<br>{AXES[x][0]} "
                 f"{fmt.dollars(xv)} [{fmt.dollars(lo)}, {fmt.dollars(hi)}]<br>cost from {esc(row.cost_source)}; "
                 f"{fmt.count(row.samples)} samples, {fmt.count(row.rollouts)} rollouts<br>"
                 + ("on the Pareto frontier" if best else "another run scores as much for less"))
        fig.add_trace(go.Scatter(
            x=[xv], y=[row.score], mode="markers+text", name=esc(run), text=[esc(run)], textposition="top right",
            marker=dict(color=colors[run], size=18 if best else 10, symbol=STAR[1] if best else DOT[1],
                        line=dict(color=INK if best else colors[run], width=1)),
            error_x=dict(type="data", symmetric=False, array=[max(hi - xv, 0) if not pd.isna(hi) else 0],
                         arrayminus=[max(xv - lo, 0) if not pd.isna(lo) else 0], color=colors[run]),
            error_y=dict(type="data", symmetric=False,
                         array=[max(row.score_ci_high - row.score, 0) if not pd.isna(row.score_ci_high) else 0],
                         arrayminus=[max(row.score - row.score_ci_low, 0) if not pd.isna(row.score_ci_low) else 0],
                         color=colors[run]),
            hovertext=[hover], hovertemplate="%{hovertext}<extra></extra>"))
    front = shown[[bool(v is True or v == True) for v in shown[flag]]].sort_values(x)  # noqa: E712
    if len(front) >= 2:
        fig.add_trace(go.Scatter(x=list(front[x]), y=list(front.score), mode="lines",
                                 name="Pareto frontier (the runs marked ★)",
                                 line=dict(color=NEUTRAL, dash="dash"), hoverinfo="skip"))
    title, subtitle = _titles(df, shown, left_out, x, flag)
    log = _log_axis(shown[x])
    tick_values = sorted(set(float(v) for v in shown[x]))
    fig.update_layout(template="plotly_white", font=dict(size=12), hoverlabel=dict(namelength=-1),
                      margin=dict(l=70, r=20, t=100, b=60), separators=".,", showlegend=True,
                      title=dict(text=f"{title}<br><sup>{esc(subtitle)}</sup>", x=0.01, xanchor="left"),
                      legend=dict(title=dict(text="run (★ Pareto-optimal)")))
    fig.update_xaxes(title_text=f"{AXES[x][0]}, USD{' (log scale)' if log else ''}",
                     type="log" if log else "linear", tickvals=tick_values,
                     ticktext=[fmt.dollars(v) for v in tick_values])
    fig.update_yaxes(title_text="score: mean over samples (with CI)")
    return fig

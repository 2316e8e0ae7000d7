"""Curation figures, static (matplotlib) and interactive (plotly), from the frames of
``rolloutlab.analysis.curation``: the learning signal along training (``signal_by_step``) and what a
curation buys (``forecast``). Each draws its frame as given; none aggregates."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.lines import Line2D

from ...text.htmltext import esc
from .style import NEUTRAL, STATUS_COLORS, require

# Never a run's color (blue, orange): these figures are about samples. All-fail and all-pass
# samples teach nothing: greys, told apart by lightness and hatching; the mixed ones are the
# signal, in the "good" green.
SIGNAL_GREEN = STATUS_COLORS["pass"]
OUTCOMES = [("share_all_fail", "all_fail", "all attempts fail (no signal)", NEUTRAL, ""),
            ("share_mixed", "mixed", "pass and fail: learning signal", SIGNAL_GREEN, ""),
            ("share_all_pass", "all_pass", "all attempts pass (no signal)", "#DDDDDD", "//")]
INK = "#333333"  # statistics drawn over the data
ZERO_STD_COLOR = INK


def _panels(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(title, rows) per split and data source, in the frame's order."""
    keys = list(dict.fromkeys(zip(df.split, df.data_source)))
    return [(f"{split}" + ("" if source == "(all)" else f" · {source}"),
             df[(df.split == split) & (df.data_source == source)]) for split, source in keys]


def _tick(row) -> str:
    return str(int(row.step)) if row.step_known else f"{row.run}\n(no step)"


def _title(df: pd.DataFrame) -> str:
    return f"Learning signal along training: samples with ≥ 2 attempts ({df.run.nunique()} runs)"


def signal_by_step(df: pd.DataFrame) -> Figure:
    """Stacked shares of samples all-fail / mixed / all-pass per run, ordered by step (from
    ``signal_by_step``), one panel per split and data source; the dashed line is the share with
    no score variation at all (zero advantage in GRPO)."""
    df = require(df, "the learning signal by step", "no run with counted rollouts was given")
    panels = _panels(df)
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(4.2 * ncols + 1.0, 3.8 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    for ax, (title, part) in zip(axes.ravel(), panels):
        x = np.arange(len(part))
        bottom = np.zeros(len(part))
        for col, _, label, color, hatch in OUTCOMES:
            values = part[col].fillna(0.0).to_numpy(dtype=float)
            ax.bar(x, values, bottom=bottom, width=0.8, color=color, hatch=hatch, edgecolor="white",
                   linewidth=0.5, label=label)
            bottom += values
        ax.plot(x, part.share_zero_std.to_numpy(dtype=float), color=ZERO_STD_COLOR, linestyle="--", marker="o",
                markersize=3, linewidth=1)
        ax.set_xticks(x, [_tick(r) for r in part.itertuples(index=False)], fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("training step")
    for ax in axes.ravel()[len(panels):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("share of samples")
    handles = [Patch(facecolor=color, hatch=hatch, edgecolor="white", label=label)
               for _, _, label, color, hatch in reversed(OUTCOMES)]
    handles.append(Line2D([], [], color=ZERO_STD_COLOR, linestyle="--", marker="o", markersize=3,
                          label="same score every attempt (zero advantage)"))
    fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=8)
    fig.suptitle(_title(df))
    return fig


def _forecast_title(plan: pd.DataFrame, name: str) -> str:
    kept, every = int(plan.samples.iloc[0]), int(plan.all_samples.iloc[0])
    return f"What the curation buys{' — ' + name if name else ''}: {kept} kept of {every} samples"


def forecast(plan: pd.DataFrame, name: str = "") -> Figure:
    """Expected signal share against attempts per sample (from ``forecast``): the kept samples
    with their 95% interval, every sample before curation, the target and the recommended k."""
    plan = require(plan, "the curation forecast", "no sample has counted attempts")
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.subplots()
    ax.fill_between(plan.k, plan.ci_low, plan.ci_high, color=SIGNAL_GREEN, alpha=0.2, linewidth=0,
                    label="curated: 95% interval of a new round")
    ax.plot(plan.k, plan.expected_signal_share, marker="o", color=SIGNAL_GREEN, label="curated (kept samples)")
    ax.plot(plan.k, plan.all_expected_signal_share, marker="s", color=NEUTRAL, linestyle="--",
            label="every sample, before curation")
    target = float(plan.target.iloc[0])
    ax.axhline(target, color=NEUTRAL, linestyle=":", linewidth=1, label=f"target {target:.0%}")
    rec = plan[plan.recommended]
    if len(rec):
        ax.scatter(rec.k, rec.expected_signal_share, s=140, facecolors="none", edgecolors=INK,
                   linewidths=2, zorder=3, label=f"recommended: {int(rec.k.iloc[0])} attempts per sample")
    ax.set_xscale("log", base=2)
    ax.set_xticks(plan.k, [str(int(k)) for k in plan.k])
    ax.set_ylim(0, 1)
    ax.set_xlabel("attempts per sample (compute multiplier)")
    ax.set_ylabel("expected share of samples with signal")
    ax.set_title(_forecast_title(plan, name), fontsize=10)
    ax.legend(fontsize=8)
    return fig


def signal_by_step_interactive(df: pd.DataFrame):
    """``signal_by_step`` in plotly: stacked bars per panel, counts in the hover."""
    import plotly.graph_objects as go  # noqa: F401  (plotly loads only here)
    from plotly.subplots import make_subplots

    from .interactive import LAYOUT

    df = require(df, "the learning signal by step", "no run with counted rollouts was given")
    panels = _panels(df)
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = make_subplots(rows=nrows, cols=ncols, shared_yaxes=True, subplot_titles=[esc(t) for t, _ in panels])
    for i, (_, part) in enumerate(panels):
        r, c = i // ncols + 1, i % ncols + 1
        ticks = [esc(_tick(row)).replace("\n", " ") for row in part.itertuples(index=False)]
        for col, count, label, color, hatch in OUTCOMES:
            fig.add_bar(x=ticks, y=part[col], name=label, marker_color=color, marker_pattern_shape=hatch.replace("//", "/"),
                        legendgroup=label, showlegend=i == 0,
                        customdata=np.stack([part[count], part.samples_multi, [esc(x) for x in part.run]], axis=-1),
                        hovertemplate=f"{label}: %{{y:.1%}} (%{{customdata[0]}} of %{{customdata[1]}} samples)"
                                      "<br>%{customdata[2]}<extra></extra>", row=r, col=c)
        fig.add_scatter(x=ticks, y=part.share_zero_std, mode="lines+markers", line=dict(color=ZERO_STD_COLOR, dash="dash"),
                        name="same score every attempt (zero advantage)", legendgroup="zero", showlegend=i == 0,
                        hovertemplate="zero advantage: %{y:.1%}<extra></extra>", row=r, col=c)
        fig.update_xaxes(title_text="training step", type="category", row=r, col=c)
    fig.update_yaxes(range=[0, 1], tickformat=".0%", title_text="share of samples", col=1)
    fig.update_layout(title=esc(_title(df)), barmode="stack", height=380 * nrows, **LAYOUT)
    return fig


def forecast_interactive(plan: pd.DataFrame, name: str = ""):
    """``forecast`` in plotly."""
    import plotly.graph_objects as go

    from .interactive import LAYOUT

    plan = require(plan, "the curation forecast", "no sample has counted attempts")
    fig = go.Figure()
    fig.add_scatter(x=list(plan.k) + list(plan.k)[::-1], y=list(plan.ci_high) + list(plan.ci_low)[::-1],
                    fill="toself", fillcolor="rgba(0,158,115,0.2)", line=dict(width=0), hoverinfo="skip",
                    name="curated: 95% interval of a new round")
    fig.add_scatter(x=plan.k, y=plan.expected_signal_share, mode="lines+markers", line_color=SIGNAL_GREEN,
                    name="curated (kept samples)", hovertemplate="%{x} attempts: %{y:.1%}<extra></extra>")
    fig.add_scatter(x=plan.k, y=plan.all_expected_signal_share, mode="lines+markers",
                    line=dict(color=NEUTRAL, dash="dash"), marker_symbol="square", name="every sample, before curation",
                    hovertemplate="%{x} attempts: %{y:.1%}<extra></extra>")
    fig.add_hline(y=float(plan.target.iloc[0]), line_dash="dot", line_color=NEUTRAL,
                  annotation_text=f"target {float(plan.target.iloc[0]):.0%}")
    rec = plan[plan.recommended]
    if len(rec):
        fig.add_scatter(x=rec.k, y=rec.expected_signal_share, mode="markers", name="recommended",
                        marker=dict(size=16, symbol="circle-open", color=INK, line_width=2))
    fig.update_xaxes(type="log", title="attempts per sample (compute multiplier)", tickvals=list(plan.k))
    fig.update_yaxes(range=[0, 1], title="expected share of samples with signal", tickformat=".0%")
    fig.update_layout(title=esc(_forecast_title(plan, name)), **LAYOUT)
    return fig


__all__ = ["signal_by_step", "forecast", "signal_by_step_interactive", "forecast_interactive"]

"""Figures of failure modes: the modes of a run as bars with their shares of failures (from
``rl.failure_modes``), and base vs candidate by mode as a dumbbell chart with CIs (from
``rl.failure_modes_diff``); each static (matplotlib) and interactive (plotly). They draw the
frames as given: no aggregation here. Labels come from logs: escaped for plotly's HTML, and
``$`` escaped for matplotlib's mathtext."""
from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import PercentFormatter

from ...text import fmt
from ...text.htmltext import esc
from .style import BASE_COLOR, CANDIDATE_COLOR, NEUTRAL, require

VERDICT_COLORS = {"fixed": "#009E73", "reduced": "#56B4E9", "unchanged": NEUTRAL, "grew": "#CC79A7",
                  "new": "#D55E00"}
MODEL_COLOR = "#56B4E9"  # sky blue: the base and candidate colors mean runs, nothing else
INFRA_COLOR = NEUTRAL
LABEL_WIDTH = 48  # characters per line of a mode's label on the axis
LABEL_LINES = 2
LAYOUT = dict(template="plotly_white", font=dict(size=12), hoverlabel=dict(namelength=-1),
              margin=dict(l=60, r=20, t=70, b=50))


def _wrapped(mode: str, label: str) -> str:
    lines = textwrap.wrap(f"{mode}: {label}", LABEL_WIDTH) or [mode]
    if len(lines) > LABEL_LINES:
        lines = lines[:LABEL_LINES]
        lines[-1] = lines[-1][:LABEL_WIDTH - 1] + "…"
    return "\n".join(lines)


def _mpl(text: str) -> str:
    """Log text as matplotlib shows it literally (two ``$`` would start mathtext)."""
    return str(text).replace("$", r"\$")


def _errors(value: pd.Series, lo: pd.Series, hi: pd.Series) -> np.ndarray | None:
    """Error bar lengths from a CI (None when no CI was computed)."""
    if lo.isna().all():
        return None
    return np.vstack([(value - lo).clip(lower=0).fillna(0), (hi - value).clip(lower=0).fillna(0)])


def modes_static(modes: pd.DataFrame, run: str = "") -> Figure:
    """Each mode's share of the run's failures with its bootstrap CI, largest first (the frame's
    order); model failures in the run's color, infra errors in grey; counts at the bars."""
    modes = require(modes, f"the failure modes{' of ' + run if run else ''}",
                    "the run has no failing rollouts (or every rollout passed)")
    run = run or modes.attrs.get("run", "")
    n = len(modes)
    fig = Figure(figsize=(9.5, 1.2 + 0.55 * n), layout="constrained")
    ax = fig.subplots()
    y = np.arange(n)[::-1]
    colors = [INFRA_COLOR if k == "infra" else MODEL_COLOR for k in modes.kind]
    ax.barh(y, modes.share_of_failures, color=colors, height=0.7)
    err = _errors(modes.share_of_failures, modes.share_ci_low, modes.share_ci_high)
    if err is not None:
        ax.errorbar(modes.share_of_failures, y, xerr=err, fmt="none", color="black", capsize=2, linewidth=0.8)
    right = np.fmax(modes.share_of_failures.to_numpy(float), modes.share_ci_high.to_numpy(float))
    for yi, share, count, x in zip(y, modes.share_of_failures, modes.rollouts, right):
        ax.annotate(f"{fmt.count(count)} ({fmt.share(share)})", (x, yi), xytext=(4, -3),
                    textcoords="offset points", fontsize=8, va="center")
    ax.set_yticks(y, [_mpl(_wrapped(m, lab)) for m, lab in zip(modes["mode"], modes.label)], fontsize=8)
    ax.set_xlim(0, min(1.0, float(np.nanmax(np.r_[modes.share_of_failures, modes.share_ci_high.fillna(0)])) * 1.25 + 0.02))
    ax.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_xlabel("share of the run's failing rollouts (95% CI: bootstrap over samples)")
    ax.set_ylabel("failure mode")
    handles = [Patch(color=MODEL_COLOR, label="model failure"), Patch(color=INFRA_COLOR, label="infra error"),
               Line2D([], [], color="black", linewidth=0.8, label="95% CI")]
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    total = modes.attrs.get("failures", int(modes.rollouts.sum()))
    ax.set_title(_mpl(f"How {run or 'the run'} fails: {fmt.count(total)} failing rollouts in {n} modes"), fontsize=11)
    return fig


def modes_interactive(modes: pd.DataFrame, run: str = "") -> go.Figure:
    """``modes_static`` in plotly: hover shows the label (escaped), counts, CI, mean calls and
    turns."""
    modes = require(modes, f"the failure modes{' of ' + run if run else ''}",
                    "the run has no failing rollouts (or every rollout passed)")
    run = run or modes.attrs.get("run", "")
    fig = go.Figure()
    for kind, color, name in (("model", MODEL_COLOR, "model failure"), ("infra", INFRA_COLOR, "infra error")):
        d = modes[modes.kind == kind]
        if d.empty:
            continue
        err = _errors(d.share_of_failures, d.share_ci_low, d.share_ci_high)
        hover = [f"<b>{esc(m)}</b>: {esc(lab)}<br>{fmt.count(c)} rollouts, {fmt.share(s)} of failures "
                 f"[{fmt.share(lo)}, {fmt.share(hi)}], {fmt.share(r)} of rollouts<br>{fmt.number(calls)} tool calls, "
                 f"{fmt.number(turns)} turns on average"
                 for m, lab, c, s, lo, hi, r, calls, turns in zip(
                     d["mode"], d.label, d.rollouts, d.share_of_failures, d.share_ci_low, d.share_ci_high,
                     d.share_of_rollouts, d.mean_tool_calls, d.mean_turns)]
        fig.add_bar(y=[esc(_wrapped(m, lab)).replace("\n", "<br>") for m, lab in zip(d["mode"], d.label)],
                    x=d.share_of_failures, orientation="h", marker_color=color, name=name,
                    error_x=None if err is None else dict(type="data", symmetric=False, array=err[1],
                                                          arrayminus=err[0], thickness=0.8, color="black"),
                    hovertext=hover, hovertemplate="%{hovertext}<extra></extra>")
    total = modes.attrs.get("failures", int(modes.rollouts.sum()))
    fig.update_yaxes(autorange="reversed", title="failure mode",
                     categoryorder="array",
                     categoryarray=[esc(_wrapped(m, lab)).replace("\n", "<br>") for m, lab in zip(modes["mode"], modes.label)])
    fig.update_xaxes(title="share of the run's failing rollouts (95% CI: bootstrap over samples)", tickformat=".0%")
    fig.update_layout(title=f"How {esc(run or 'the run')} fails: {fmt.count(total)} failing rollouts in "
                            f"{len(modes)} modes", height=160 + 48 * len(modes), showlegend=True, **LAYOUT)
    return fig


def _diff_columns(diff: pd.DataFrame):
    """(base column, candidate column, their CI columns, the difference's CI columns, axis label)
    of the measure the verdicts read (``attrs['per']``)."""
    if diff.attrs.get("per", "rollouts") == "failures":
        return ("base_share", "candidate_share", ("base_ci_low", "base_ci_high"), ("candidate_ci_low", "candidate_ci_high"),
                "diff_ci_low", "diff_ci_high", "share of the run's failing rollouts")
    return ("base_rate", "candidate_rate", ("base_rate_ci_low", "base_rate_ci_high"),
            ("candidate_rate_ci_low", "candidate_rate_ci_high"), "rate_diff_ci_low", "rate_diff_ci_high",
            "share of the run's rollouts that fail this way")


def diff_static(diff: pd.DataFrame) -> Figure:
    """Base vs candidate by mode (``failure_modes_diff``): one row per mode, the base share and
    the candidate share as dots with their 95% CIs joined by a line in the color of the verdict
    (fixed, reduced, unchanged, grew, new)."""
    diff = require(diff, "the failure-mode comparison", "neither run has failing rollouts")
    base, cand = diff.attrs.get("base", "base"), diff.attrs.get("candidate", "candidate")
    b_col, c_col, b_ci, c_ci, _, _, xlabel = _diff_columns(diff)
    n = len(diff)
    fig = Figure(figsize=(10, 1.4 + 0.55 * n), layout="constrained")
    ax = fig.subplots()
    y = np.arange(n)[::-1]
    for yi, b, c, verdict in zip(y, diff[b_col], diff[c_col], diff.verdict):
        ax.plot([b, c], [yi, yi], color=VERDICT_COLORS.get(verdict, NEUTRAL), linewidth=3, alpha=0.8, zorder=1)
    for col, ci, color, dy, name in ((b_col, b_ci, BASE_COLOR, 0.12, base), (c_col, c_ci, CANDIDATE_COLOR, -0.12, cand)):
        err = _errors(diff[col], diff[ci[0]], diff[ci[1]]) if ci else None
        ax.errorbar(diff[col], y + dy, xerr=err, fmt="o", color=color, markersize=6, capsize=2, linewidth=0.8,
                    zorder=2, label=_mpl(name))
    ends = [diff[col] if not ci else diff[ci[1]].fillna(diff[col]) for col, ci in ((b_col, b_ci), (c_col, c_ci))]
    for yi, c, verdict in zip(y, np.fmax(ends[0].to_numpy(float), ends[1].to_numpy(float)), diff.verdict):
        ax.annotate(verdict, (c, yi), xytext=(8, -3), textcoords="offset points", fontsize=8,
                    color=VERDICT_COLORS.get(verdict, NEUTRAL))
    ax.set_yticks(y, [_mpl(_wrapped(m, lab)) for m, lab in zip(diff["mode"], diff.label)], fontsize=8)
    ax.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    widest = float(np.nanmax(np.fmax(ends[0].to_numpy(float), ends[1].to_numpy(float)))) if n else 0.0
    ax.set_xlim(0, min(1.2, widest * 1.18 + 0.04))  # room for the verdicts
    ax.set_xlabel(f"{xlabel} (95% CI: bootstrap over samples)")
    ax.set_ylabel("failure mode (fitted on both runs' failures)")
    verdicts = [v for v in VERDICT_COLORS if (diff.verdict == v).any()]
    handles, _ = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color=VERDICT_COLORS[v], linewidth=3, label=v) for v in verdicts]
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    ax.set_title(_mpl(f"How failures changed from {base} to {cand}: "
                      f"{fmt.count(diff.attrs.get('base_failures', diff.base_rollouts.sum()))} → "
                      f"{fmt.count(diff.attrs.get('candidate_failures', diff.candidate_rollouts.sum()))} failing rollouts"),
                 fontsize=11)
    return fig


def diff_interactive(diff: pd.DataFrame) -> go.Figure:
    """``diff_static`` in plotly: hover shows the label (escaped), both shares, the difference
    with its CI, the verdict with its adjusted p-value and each run's count."""
    diff = require(diff, "the failure-mode comparison", "neither run has failing rollouts")
    base, cand = diff.attrs.get("base", "base"), diff.attrs.get("candidate", "candidate")
    b_col, c_col, b_ci, c_ci, d_lo, d_hi, xlabel = _diff_columns(diff)
    ys = [esc(_wrapped(m, lab)).replace("\n", "<br>") for m, lab in zip(diff["mode"], diff.label)]
    fig = go.Figure()
    shown = set()
    for y, b, c, verdict in zip(ys, diff[b_col], diff[c_col], diff.verdict):
        fig.add_scatter(x=[b, c], y=[y, y], mode="lines", line=dict(color=VERDICT_COLORS.get(verdict, NEUTRAL), width=4),
                        name=verdict, legendgroup=verdict, showlegend=verdict not in shown, hoverinfo="skip")
        shown.add(verdict)
    diff_lo, diff_hi = diff[d_lo], diff[d_hi]
    for col, ci, color, name, n_col in ((b_col, b_ci, BASE_COLOR, base, "base_rollouts"),
                                        (c_col, c_ci, CANDIDATE_COLOR, cand, "candidate_rollouts")):
        err = _errors(diff[col], diff[ci[0]], diff[ci[1]]) if ci else None
        p_adj = diff["p_adjusted"] if "p_adjusted" in diff.columns else pd.Series(np.nan, index=diff.index)
        hover = [f"<b>{esc(m)}</b>: {esc(lab)}<br>{esc(base)} {fmt.share(b)} → {esc(cand)} {fmt.share(c)} "
                 f"({fmt.points(c - b)}, 95% CI {fmt.points(lo)} to {fmt.points(hi)}): <b>{esc(v)}</b> "
                 f"(adjusted p {fmt.number(p)})<br>{fmt.count(n)} failing rollouts of {esc(name)} in this mode"
                 for m, lab, b, c, lo, hi, v, p, n in zip(diff["mode"], diff.label, diff[b_col], diff[c_col], diff_lo,
                                                          diff_hi, diff.verdict, p_adj, diff[n_col])]
        fig.add_scatter(x=diff[col], y=ys, mode="markers", marker=dict(color=color, size=10), name=esc(name),
                        error_x=None if err is None else dict(type="data", symmetric=False, array=err[1],
                                                              arrayminus=err[0], thickness=0.8, color=color),
                        hovertext=hover, hovertemplate="%{hovertext}<extra></extra>")
    fig.update_yaxes(autorange="reversed", title="failure mode (fitted on both runs' failures)",
                     categoryorder="array", categoryarray=ys)
    fig.update_xaxes(title=f"{xlabel} (95% CI: bootstrap over samples)", tickformat=".0%", rangemode="tozero")
    fig.update_layout(title=f"How failures changed from {esc(base)} to {esc(cand)}",
                      height=180 + 48 * len(diff), **LAYOUT)
    return fig

"""Static figures (matplotlib) for reports and slides. Each takes the DataFrame of a metrics or
compare function and draws it; none aggregates. Figures are built without pyplot (no global
state, no double display in notebooks); save with ``fig.savefig(...)``.

Every figure has a title that says what to look at, axes labelled with their units, a legend (or
direct labels) for every color, line style and marker, and the colors of ``style``: the base
blue and the candidate orange wherever they appear. Numbers shown go through ``fmt``."""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ... import config
from ...text import fmt
from .style import (GOOD_COLOR, INK, NEUTRAL, NO_SIGNAL, OUTCOME_COLORS, QUADRANTS, SAMPLE_OUTCOMES, SIGNAL_COLOR,
                    SPLIT_DASH, STYLES, TOOL_MARKERS, as_runs, in_flight_scopes, minutes_since_start,
                    no_shared_samples, require, reward_floor, run_colors, split_colors, styles, trainer_lines, trainer_panels)


def _figure(width=9.0, height=4.5, ncols=1, nrows=1, **kw):
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def _numbers(axis) -> None:
    """Tick labels as people read them: separators, no offset, no scientific notation."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt.number(v)))


def _shares(axis) -> None:
    """Tick labels of a share as percentages."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt.share(v, 1)))


def variance(stats: pd.DataFrame | dict[str, pd.DataFrame], run: str = "run") -> Figure:
    """Per-sample score across attempts (from ``sample_stats``): samples sorted by mean; a bar
    for the mean, in the run's color when the score varies across attempts (signal), grey when
    every attempt scored the same; a line for ±1 std (kept within the scores seen) and a tick for
    the best attempt. A dict {run: frame} draws the runs side by side."""
    frames = as_runs(stats, run)
    colors = run_colors(list(frames))
    fig, axes = _figure(width=5.5 * len(frames), height=4.4, ncols=len(frames), sharey=True)
    for ax, (name, df) in zip(axes[0], frames.items()):
        df = require(df, f"the variance plot of {name}").sort_values(["mean", "sample_id"]).reset_index(drop=True)
        x = np.arange(len(df))
        signal = df.has_signal.fillna(False).to_numpy(bool)
        floor = reward_floor(df)  # bars rise from the run's lowest reward: -1 where rewards span [-1, 1]
        for mask, color, label in ((signal, colors[name], f"{name}: score varies across attempts (signal)"),
                                   (~signal, NO_SIGNAL, "same score every attempt (no signal)")):
            if mask.any():
                ax.bar(x[mask], df["mean"][mask] - floor, bottom=floor, width=1.0, color=color, linewidth=0,
                       label=label)
        if floor < 0:
            ax.axhline(0, color=NEUTRAL, linewidth=0.6)
        lo = np.maximum(df["mean"] - df["std"].fillna(0), df["min"])
        hi = np.minimum(df["mean"] + df["std"].fillna(0), df["max"])
        ax.vlines(x, lo, hi, color=INK, linewidth=0.6, label="±1 std across attempts (within the scores seen)")
        ax.scatter(x, df["max"], marker="_", s=30, color=INK, linewidths=1.2, zorder=3, label="best attempt")
        n_signal = int(signal.sum())
        ax.set_title(f"{name}: {fmt.count(len(df))} samples, {fmt.count(df.attempts.sum())} rollouts, "
                     f"{fmt.count(n_signal)} ({fmt.share(n_signal / len(df), 0)}) vary", fontsize=10)
        ax.set_xlabel("samples, sorted by mean score (one bar each)")
        ax.set_xlim(-0.5, len(df) - 0.5)
        ax.set_xticks([])
    entries: dict[str, object] = {}
    for ax in axes[0]:
        handles, labels = ax.get_legend_handles_labels()
        entries.update({label: h for h, label in zip(handles, labels) if label not in entries})
    last = ["same score every attempt (no signal)", "±1 std across attempts (within the scores seen)", "best attempt"]
    order = [k for k in entries if k not in last] + [k for k in last if k in entries]
    entries = {k: entries[k] for k in order}
    fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncols=min(len(entries), 3),
               fontsize=8)
    axes[0][0].set_ylabel("score per sample: mean over attempts")
    fig.suptitle("Score per sample across attempts: only samples whose score varies (colored) teach RL")
    return fig


def signal_plan(plan: pd.DataFrame, run: str = "") -> Figure:
    """Expected signal share against attempts per sample (from ``signal_plan``), with the target
    and the recommended k."""
    plan = require(plan, "the signal plan")
    fig, axes = _figure(7, 4)
    ax = axes[0][0]
    color = run_colors([run or "run"])[run or "run"]
    ax.plot(plan.k, plan.expected_signal_share, marker="o", color=color,
            label=f"{run + ': ' if run else ''}expected share of samples with signal")
    target = float(plan.target.iloc[0])
    ax.axhline(target, color=NEUTRAL, linestyle="--", linewidth=1, label=f"target {fmt.share(target, 0)}")
    rec = plan[plan.recommended]
    what = "the target is not reached within these attempts"
    if len(rec):
        k = int(rec.k.iloc[0])
        ax.scatter([k], rec.expected_signal_share, s=140, facecolors="none", edgecolors=GOOD_COLOR, linewidths=2,
                   zorder=3, label=f"recommended: {k} attempts per sample")
        what = f"{k} attempts per sample reach the target"
    ax.set_xscale("log", base=2)
    ax.set_xticks(plan.k, [str(k) for k in plan.k])
    ax.set_ylim(0, 1)
    _shares(ax.yaxis)
    ax.set_xlabel("attempts per sample (compute multiplier)")
    ax.set_ylabel("expected share of samples with signal")
    ax.set_title(f"How many attempts give learning signal{' — ' + run if run else ''}: {what} "
                 f"({fmt.count(plan.samples.iloc[0])} samples)", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def tool_calls(dist: pd.DataFrame, base: str, candidate: str) -> Figure:
    """Tool calls per rollout of two runs, as shares (from ``distribution_shift``), the long tail
    beyond LONG_TAIL_CALLS shaded."""
    dist = require(dist, "the tool-call distribution")
    colors = run_colors([base, candidate])
    fig, axes = _figure(8, 4)
    ax = axes[0][0]
    w = 0.42
    ax.bar(dist.value - w / 2, dist.base_share, width=w, color=colors[base],
           label=f"{base} ({fmt.count(dist.base_count.sum())} rollouts)")
    ax.bar(dist.value + w / 2, dist.candidate_share, width=w, color=colors[candidate],
           label=f"{candidate} ({fmt.count(dist.candidate_count.sum())} rollouts)")
    tail = config.LONG_TAIL_CALLS + 0.5
    ax.axvspan(tail, max(dist.value.max() + 1, tail + 1), color=SIGNAL_COLOR, alpha=0.08,
               label=f"long tail (> {config.LONG_TAIL_CALLS} calls)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _shares(ax.yaxis)
    ax.set_xlabel("tool calls per rollout")
    ax.set_ylabel("share of the run's rollouts")
    ax.set_title(f"Tool calls per rollout, {base} against {candidate}: fewer calls and no long tail is the goal",
                 fontsize=10)
    ax.legend(fontsize=8)
    return fig


def tool_usage(stats: dict[str, pd.DataFrame]) -> Figure:
    """Calls per rollout of each tool, runs side by side (from ``tool_stats`` per run)."""
    frames = {r: require(df, f"tool use of {r}") for r, df in stats.items()}
    tools = sorted(set().union(*[set(df.tool) for df in frames.values()]))
    colors = run_colors(list(frames))
    fig, axes = _figure(8, 4)
    ax = axes[0][0]
    w = 0.8 / len(frames)
    for i, (run, df) in enumerate(frames.items()):
        values = df.set_index("tool").calls_per_rollout.reindex(tools).fillna(0)
        ax.bar(np.arange(len(tools)) + (i - (len(frames) - 1) / 2) * w, values, width=w, color=colors[run], label=run)
    ax.set_xticks(np.arange(len(tools)), tools)
    ax.set_xlabel("tool")
    ax.set_ylabel("calls per rollout")
    _numbers(ax.yaxis)
    ax.set_title("Which tools the agent calls, per rollout: a tool whose use collapses was a crutch or a lost skill",
                 fontsize=10)
    ax.legend(fontsize=8)
    return fig


def turns_and_width(summary: pd.DataFrame) -> Figure:
    """Turns per rollout and calls per turn (parallel width) per run (from ``summary``); the runs
    are named under their bars, each value on its bar."""
    summary = require(summary, "turns and parallel width")
    colors = run_colors(list(summary.run))
    fig, axes = _figure(8, 3.8, ncols=2)
    for ax, col, title, unit in ((axes[0][0], "turns_mean", "turns with tool calls", "turns per rollout"),
                                 (axes[0][1], "parallel_width_mean", "parallel width", "tool calls per turn")):
        bars = ax.bar(summary.run, summary[col], color=[colors[r] for r in summary.run])
        ax.bar_label(bars, labels=[fmt.number(v) for v in summary[col]], fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("run")
        ax.set_ylabel(unit)
        _numbers(ax.yaxis)
    fig.suptitle("Back-and-forths with the environment: fewer turns with more calls each means parallel calls")
    return fig


def _percentile_marks(ax, p: pd.DataFrame, color: str) -> None:
    for row in p.itertuples():
        ax.errorbar([row.value], [row.percentile / 100], xerr=[[row.value - row.ci_low], [row.ci_high - row.value]],
                    fmt="o", color=color, markersize=4, capsize=3)
        ax.annotate(f"P{row.percentile:g} {fmt.seconds(row.value)}", (row.value, row.percentile / 100),
                    textcoords="offset points", xytext=(6, -10), fontsize=7, color=color)


def latency_ecdf(ecdf: pd.DataFrame, percentiles: dict[str, pd.DataFrame] | None = None) -> Figure:
    """Rollout latency ECDF per run (from ``latency_ecdf``), with P50/P95/P99 and their CIs
    (from ``latency`` per run) marked."""
    ecdf = require(ecdf, "the latency ECDF")
    runs = list(dict.fromkeys(ecdf.run))
    colors = run_colors(runs)
    fig, axes = _figure(8, 4.2)
    ax = axes[0][0]
    marked = False
    for run in runs:
        d = ecdf[ecdf.run == run]
        ax.step(d.latency_s, d.share, where="post", color=colors[run], label=f"{run} ({fmt.count(len(d))} rollouts)")
        p = (percentiles or {}).get(run)
        if p is not None and (p.scope == "rollout").any():
            _percentile_marks(ax, p[p.scope == "rollout"], colors[run])
            marked = True
    handles, labels = ax.get_legend_handles_labels()
    if marked:
        handles.append(Line2D([], [], color=INK, marker="o", linestyle="-", markersize=4))
        labels.append("P50 / P95 / P99 with 95% CI (run's color)")
    ax.set_xlabel("rollout latency (s)")
    ax.set_ylabel("share of rollouts finished by then")
    _shares(ax.yaxis)
    _numbers(ax.xaxis)
    ax.set_title("Rollout latency: the gap between the curves near the top is the P95 change users feel",
                 fontsize=10)
    ax.legend(handles, labels, fontsize=8, loc="lower right")
    return fig


def tool_latency(latency: pd.DataFrame | dict[str, pd.DataFrame], run: str = "") -> Figure:
    """Per-tool latency percentiles with 95% CIs (from ``latency``), one panel per percentile;
    a dict {run: frame} draws the runs side by side in their colors."""
    frames = {name: require(df[df.scope != "rollout"] if df is not None else None, f"per-tool latency of {name}")
              for name, df in as_runs(latency, run or "run").items()}
    colors = run_colors(list(frames))
    pcts = list(dict.fromkeys(p for df in frames.values() for p in df.percentile))
    tools = sorted(set().union(*[set(df.scope) for df in frames.values()]))
    fig, axes = _figure(max(8.0, 3.2 * len(pcts)), 4, ncols=len(pcts))
    w = 0.8 / len(frames)
    for ax, pct in zip(axes[0], pcts):
        for i, (name, df) in enumerate(frames.items()):
            sub = df[df.percentile == pct].set_index("scope").reindex(tools)
            x = np.arange(len(tools)) + (i - (len(frames) - 1) / 2) * w
            ax.bar(x, sub.value, width=w, color=colors[name], label=name)
            ax.errorbar(x, sub.value, yerr=[sub.value - sub.ci_low, sub.ci_high - sub.value], fmt="none", color=INK,
                        capsize=2, linewidth=0.8, label="95% CI")
        ax.set_xticks(np.arange(len(tools)), tools, rotation=30 if len(tools) > 4 else 0)
        ax.set_title(f"P{pct:g}", fontsize=10)
        ax.set_xlabel("tool")
        ax.set_ylabel("latency per call (s)")
        _numbers(ax.yaxis)
        handles, labels = ax.get_legend_handles_labels()
        keep = dict(zip(labels, handles))  # the CI once
        ax.legend(list(keep.values()), list(keep), fontsize=7)
    fig.suptitle(f"Tool latency per call{' — ' + run if run else ''}: a slow endpoint shows here before it shows "
                 "in the rollouts")
    return fig


def latency_vs_score(rollouts: pd.DataFrame) -> Figure:
    """Latency against score per rollout (from ``rollout_table``), one color per run."""
    rollouts = require(rollouts, "latency against score")
    runs = list(dict.fromkeys(rollouts.run))
    colors = run_colors(runs)
    fig, axes = _figure(7, 4)
    ax = axes[0][0]
    jitter = np.random.default_rng(0).uniform(-0.02, 0.02, len(rollouts))  # only separates equal scores
    for run in runs:
        m = (rollouts.run == run).to_numpy()
        ax.scatter(rollouts.latency_s[m], rollouts.score[m] + jitter[m], s=8, alpha=0.4, color=colors[run],
                   label=f"{run} ({fmt.count(m.sum())} rollouts)")
    ax.set_xlabel("rollout latency (s)")
    ax.set_ylabel("score (equal scores spread ±0.02)")
    _numbers(ax.xaxis)
    ax.set_title("Does taking longer pay off? Slow rollouts that score low are flailing", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def quadrants(deltas: pd.DataFrame, base: str, candidate: str) -> Figure:
    """Per shared sample: score change against tool-call change (from ``sample_deltas``); color
    says better / no change / worse, the marker fewer / same / more tool calls; the legend counts
    the samples in each quadrant."""
    deltas = require(deltas, "the quadrant plot", no_shared_samples(base, candidate))
    fig, axes = _figure(7.5, 5)
    ax = axes[0][0]
    jitter = np.random.default_rng(0).normal(0, 0.01, (2, len(deltas)))
    for name, (outcome, tools) in QUADRANTS.items():
        m = (deltas.quadrant == name).to_numpy()
        if m.any():
            ax.scatter(deltas.tool_calls_diff[m] + jitter[0][m], deltas.score_diff[m] + jitter[1][m], s=16,
                       alpha=0.6, color=OUTCOME_COLORS[outcome], marker=TOOL_MARKERS[tools][1],
                       label=f"{name}: {fmt.count(m.sum())}")
    ax.axhline(0, color=NEUTRAL, linewidth=0.8)
    ax.axvline(0, color=NEUTRAL, linewidth=0.8)
    ax.set_xlabel(f"tool calls per rollout, {candidate} − {base}")
    ax.set_ylabel(f"mean score, {candidate} − {base}")
    ax.set_title(f"Per sample, {base} → {candidate} ({fmt.count(len(deltas))} shared samples): "
                 "upper left is better with fewer tools", fontsize=10)
    ax.legend(fontsize=7, loc="best")
    return fig


def forest(comparison: pd.DataFrame) -> Figure:
    """Each metric's change relative to the base with its 95% CI (from ``compare``); changes
    ``compare`` marks significant (the primary alone, the others adjusted) in black, the others grey."""
    c = require(comparison, "the forest plot")
    c = c[c.base.abs() > 0].reset_index(drop=True)
    rel = c["diff"] / c.base.abs() * 100
    lo, hi = c.ci_low / c.base.abs() * 100, c.ci_high / c.base.abs() * 100
    fig, axes = _figure(8, 0.45 * len(c) + 1.6)
    ax = axes[0][0]
    y = np.arange(len(c))[::-1]
    for significant, color, label in ((True, INK, "significant"), (False, NEUTRAL, "not significant")):
        m = (c.significant == significant).to_numpy()
        if m.any():
            ax.errorbar(rel[m], y[m], xerr=[(rel - lo)[m], (hi - rel)[m]], fmt="o", color=color, capsize=3,
                        label=label)
    ax.axvline(0, color=NEUTRAL, linewidth=0.8)
    ax.set_yticks(y, [f"{m} ({fmt.number(b)} → {fmt.number(v)})" for m, b, v in zip(c.metric, c.base, c.candidate)],
                  fontsize=8)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt.signed(v) + "%"))
    ax.set_xlabel("change relative to base (%), with 95% CI")
    ax.set_ylabel("metric (base → candidate)")
    n = int(comparison.n_samples.iloc[0])
    ax.set_title(f"What changed, base → candidate ({fmt.count(n)} shared samples): black changes are beyond noise",
                 fontsize=10)
    ax.legend(fontsize=8, loc="best")
    return fig


def sample_scores(deltas: pd.DataFrame, base: str, candidate: str) -> Figure:
    """Per shared sample, base mean score against candidate mean score, colored better / no
    change / worse; above the diagonal the candidate did better."""
    deltas = require(deltas, "per-sample scores", no_shared_samples(base, candidate))
    fig, axes = _figure(5.6, 5)
    ax = axes[0][0]
    jitter = np.random.default_rng(1).normal(0, 0.008, (2, len(deltas)))
    for outcome, label in SAMPLE_OUTCOMES.items():
        m = (deltas.outcome == outcome).to_numpy()
        if m.any():
            ax.scatter(deltas.base_score[m] + jitter[0][m], deltas.candidate_score[m] + jitter[1][m], s=14, alpha=0.6,
                       color=OUTCOME_COLORS[label], label=f"{label}: {fmt.count(m.sum())} samples")
    ax.plot([0, 1], [0, 1], color=NEUTRAL, linestyle="--", linewidth=1, label="same score (diagonal)")
    ax.set_xlabel(f"{base}: mean score per sample")
    ax.set_ylabel(f"{candidate}: mean score per sample")
    wins = int((deltas.outcome == "win").sum())
    losses = int((deltas.outcome == "loss").sum())
    ax.set_title(f"{fmt.count(len(deltas))} samples: {fmt.count(wins)} better, {fmt.count(losses)} worse "
                 "(above the diagonal: better)", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    return fig


CURVES = [("mean_score", "mean score", "score"), ("pass_at_1", "pass@1", "share"),
          ("tool_calls_mean", "tool calls per rollout", "calls per rollout"),
          ("long_tail_share", f"share > {config.LONG_TAIL_CALLS} calls", "share"),
          ("latency_p95", "P95 latency (s)", "seconds"), ("input_tokens_mean", "input tokens per rollout", "tokens")]


def _split_curves(df: pd.DataFrame, curves, title: str, base: str | None = None,
                  candidate: str | None = None) -> Figure:
    """One panel per (column, title, unit); one line per split in the split's color; a step-less
    run as a hollow marker; base and candidate ringed in their run colors when named."""
    fig, axes = _figure(10.5, 6.2, ncols=3, nrows=2)
    colors = split_colors(list(df.split.unique()))
    marked = {r: c for r, c in run_colors([base or "", candidate or ""]).items() if r}
    for ax, (col, label, unit) in zip(axes.ravel(), curves):
        for split, part in df.groupby("split", sort=False):
            ax.plot(part.step, part[col], marker="o", color=colors[split], label=f"split {split}")
            unknown = part[~part.step_known]
            ax.plot(unknown.step, unknown[col], marker="o", linestyle="", markerfacecolor="white",
                    color=colors[split])
        for run, color in marked.items():
            at = df[df.run == run]
            ax.plot(at.step, at[col], marker="o", markersize=11, linestyle="", markerfacecolor="none",
                    markeredgewidth=2, color=color)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("training step")
        ax.set_ylabel(unit)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        (_shares if unit == "share" else _numbers)(ax.yaxis)
    handles = [Line2D([], [], color=colors[s], marker="o", label=f"split {s}") for s in colors]
    if (~df.step_known).any():
        handles.append(Line2D([], [], color=NEUTRAL, marker="o", linestyle="", markerfacecolor="white",
                              label="no step (drawn at 0)"))
    handles += [Line2D([], [], color=c, marker="o", markersize=9, linestyle="", markerfacecolor="none",
                       markeredgewidth=2, label=r) for r, c in marked.items() if (df.run == r).any()]
    fig.legend(handles=handles, loc="outside right upper", fontsize=8)
    fig.suptitle(title)
    return fig


def training_curves(by_step: pd.DataFrame, base: str | None = None, candidate: str | None = None) -> Figure:
    """Metrics against training step (from ``by_step``): one line per split; a run without a
    step (a base model) is a hollow marker at step 0; ``base`` and ``candidate``, when named, are
    ringed in their run colors."""
    by_step = require(by_step, "training curves")
    return _split_curves(by_step, CURVES, f"Along training ({fmt.count(len(by_step))} checkpoints, one line per "
                                          "split): accuracy should rise as tool calls fall", base, candidate)


LIVE_CURVES = [("mean_score", "mean score", "score"), ("signal_share", "signal share (samples that vary)", "share"),
               ("tool_calls_mean", "tool calls per rollout", "calls per rollout"),
               ("latency_p95", "P95 latency (s)", "seconds"), ("infra_share", "infra errors", "share of rollouts"),
               ("ungraded_share", "never graded", "share of rollouts")]


def live_panel(frame: pd.DataFrame) -> Figure:
    """The health of a run while it trains (from ``live_frame``): reward, signal, tool calls,
    latency, infra errors and ungraded rollouts along the steps, one line per split."""
    frame = require(frame, "the live view", "no training run with a step is loaded yet")
    curves = [(c, t, "share" if u.startswith("share") else u) for c, t, u in LIVE_CURVES]
    return _split_curves(frame, curves, f"The run so far ({fmt.count(len(frame))} checkpoints): the score should "
                                        "rise, errors stay near 0")


def trainer_curves(metrics: pd.DataFrame) -> Figure:
    """The trainer's own step metrics (from ``training_metrics``): reward per split, reward per
    grader, grader error rates, step timing; each panel with its own legend. Color is the split
    (as in ``training_curves``), line style and marker the grader or phase; lines with the same
    points are drawn once, labelled with both names. Validation points exist only on validation
    steps."""
    metrics = require(metrics, "trainer metrics")
    fig, axes = _figure(11, 6.8, ncols=2, nrows=2)
    colors = split_colors(sorted(metrics.split.unique()))
    for ax, (title, ylabel, panel, kind) in zip(axes.ravel(), trainer_panels()):
        lines = trainer_lines(metrics, panel)
        look = styles(dict.fromkeys(line["style_key"] for line in lines))
        for line in lines:
            _, dash, _, marker = look[line["style_key"]]
            df = line["rows"]
            ax.plot(df.step, df.value, marker=marker, markersize=4, linestyle=dash, color=colors[line["split"]],
                    label=line["label"])
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("training step")
        ax.set_ylabel(ylabel)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        (_shares if kind == "share" else _numbers)(ax.yaxis)
        if lines:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "not reported", ha="center", va="center", transform=ax.transAxes, color=NEUTRAL)
    fig.suptitle(f"What the trainer reported ({', '.join(sorted(metrics.job.unique()))}): a train reward that rises "
                 "while validation stays flat is overfitting")
    return fig


def _disagreement_matrix(pairs: pd.DataFrame) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Graders and the symmetric matrices of disagreement share and correlation (diagonal NaN)."""
    graders = sorted(set(pairs.grader_a) | set(pairs.grader_b))
    pos = {g: i for i, g in enumerate(graders)}
    share = np.full((len(graders), len(graders)), np.nan)
    corr = share.copy()
    for a, b, d, r in zip(pairs.grader_a, pairs.grader_b, pairs.disagree_share, pairs.correlation):
        share[pos[a], pos[b]] = share[pos[b], pos[a]] = d
        corr[pos[a], pos[b]] = corr[pos[b], pos[a]] = r
    return graders, share, corr


GRADER_STATS = (("mean", "mean score", "score"), ("pass_rate", "pass rate", "share of rollouts"),
                ("signal_share", "signal share", "share of samples"))


def graders(stats: pd.DataFrame | dict[str, pd.DataFrame], run: str = "run") -> Figure:
    """Per grader (from ``grader_stats``): mean score, pass rate and signal share, one panel each;
    a dict {run: frame} draws the runs side by side in their colors."""
    frames = {name: require(df, f"the grader plot of {name}") for name, df in as_runs(stats, run).items()}
    colors = run_colors(list(frames))
    names = sorted(set().union(*[set(df.grader) for df in frames.values()]))
    fig, axes = _figure(width=max(9.0, 1.2 * len(names) * len(frames) + 4), height=3.9, ncols=3, sharey=True)
    w = 0.8 / len(frames)
    for ax, (col, title, unit) in zip(axes[0], GRADER_STATS):
        for i, (name, df) in enumerate(frames.items()):
            values = df.set_index("grader")[col].reindex(names)
            x = np.arange(len(names)) + (i - (len(frames) - 1) / 2) * w
            ax.bar(x, values.fillna(0), width=w, color=colors[name], label=name)
        ax.set_xticks(np.arange(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("grader")
        ax.set_ylabel(unit)
        (_numbers if unit == "score" else _shares)(ax.yaxis)
        ax.legend(fontsize=7)
    fig.suptitle("Graders: one that never varies adds nothing to the reward (no bar: not measured)")
    return fig


def grader_disagreement(pairs: pd.DataFrame, run: str = "") -> Figure:
    """Share of rollouts on which two graders disagree on pass/fail (from ``grader_pairs``), with
    their score correlation in each cell."""
    graders_, share, corr = _disagreement_matrix(require(pairs, "the grader disagreement matrix"))
    n = len(graders_)
    fig, axes = _figure(width=1.1 * n + 3.5, height=1.0 * n + 2.0)
    ax = axes[0][0]
    image = ax.imshow(share, vmin=0, vmax=1, cmap="Reds")
    for i in range(n):
        for j in range(n):
            if not np.isnan(share[i, j]):
                r = "" if np.isnan(corr[i, j]) else f"\nr = {fmt.number(corr[i, j], 2)}"
                ax.text(j, i, f"{fmt.share(share[i, j], 0)}{r}", ha="center", va="center", fontsize=8,
                        color="white" if share[i, j] > 0.5 else "black")
    ax.set_xticks(range(n), graders_, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(n), graders_, fontsize=8)
    ax.set_xlabel("grader")
    ax.set_ylabel("grader")
    bar = fig.colorbar(image, ax=ax, label="share of rollouts: pass/fail differ")
    _shares(bar.ax.yaxis)
    ax.set_title(f"Where graders disagree{' — ' + run if run else ''}: a dark cell is two graders rewarding "
                 "different things", fontsize=10)
    return fig


def in_flight(df: pd.DataFrame | dict[str, pd.DataFrame], run: str = "") -> Figure:
    """Calls in flight over a run (from ``in_flight``: the peak within each window), one panel per
    scope — rollouts, all tools, then each tool — so no line hides another; time runs from each
    run's first call. A dict {run: frame} draws the runs in their colors."""
    frames = {name: require(d, f"calls in flight of {name}")
              for name, d in as_runs(df, run or getattr(df, "attrs", {}).get("run", "run")).items()}
    colors = run_colors(list(frames))
    scopes = list(dict.fromkeys(s for d in frames.values() for s in in_flight_scopes(d)))
    fig, axes = _figure(9, 1.35 * len(scopes) + 1.3, nrows=len(scopes), sharex=True)
    for ax, (scope, title) in zip(axes[:, 0], scopes):
        for name, d in frames.items():
            sub = d.assign(minutes=minutes_since_start(d.t))[d.scope == scope]
            ax.step(sub.minutes, sub.in_flight, where="post", color=colors[name], linewidth=1, label=name)
            ax.fill_between(sub.minutes, sub.in_flight, step="post", color=colors[name], alpha=0.2, linewidth=0)
            if len(sub):
                peak = sub.loc[sub.in_flight.idxmax()]
                ax.annotate(f"peak {fmt.count(peak.in_flight)}", (peak.minutes, peak.in_flight), fontsize=7,
                            color=colors[name], textcoords="offset points", xytext=(3, -8))
        ax.set_title(title, fontsize=9, loc="left")
        ax.set_ylabel("in flight")
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=3))
        _numbers(ax.yaxis)
    axes[-1][0].set_xlabel("minutes since the run's first call (each point: the peak of a window)")
    _numbers(axes[-1][0].xaxis)
    handles = [Patch(color=c, alpha=0.6, label=r) for r, c in colors.items()]
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, title="run")
    fig.suptitle(f"Calls in flight{' — ' + ', '.join(frames) if frames else ''}: the tallest peaks are what the tool "
                 "servers must hold")
    return fig

"""Static figures (matplotlib) for reports and slides. Each takes the DataFrame of a metrics or
compare function and draws it; none aggregates. Figures are built without pyplot (no global
state, no double display in notebooks); save with ``fig.savefig(...)``."""
from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from .. import config
from .style import (BASE_COLOR, CANDIDATE_COLOR, NEUTRAL, QUADRANT_COLORS, SIGNAL_COLOR, as_runs, in_flight_series,
                    no_shared_samples, require, run_colors, split_colors)


def _figure(width=9.0, height=4.5, ncols=1, nrows=1, **kw):
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def variance(stats: pd.DataFrame | dict[str, pd.DataFrame], run: str = "run") -> Figure:
    """Per-sample score across attempts (from ``sample_stats``): samples sorted by mean; a bar
    for the mean, a line for +-1 std, a marker for the best attempt; samples with signal in
    vermillion. A dict {run: frame} draws the runs side by side."""
    frames = as_runs(stats, run)
    colors = run_colors(list(frames))
    fig, axes = _figure(width=5.5 * len(frames), height=4.2, ncols=len(frames), sharey=True)
    for ax, (name, df) in zip(axes[0], frames.items()):
        df = require(df, f"the variance plot of {name}").sort_values(["mean", "sample_id"]).reset_index(drop=True)
        x = np.arange(len(df))
        bar_colors = [SIGNAL_COLOR if s else colors[name] for s in df.has_signal]
        ax.bar(x, df["mean"], width=1.0, color=bar_colors, alpha=0.55, linewidth=0)
        # ±1 std, kept within the scores the sample actually got
        ax.vlines(x, np.maximum(df["mean"] - df["std"], df["min"]), np.minimum(df["mean"] + df["std"], df["max"]),
                  color="black", linewidth=0.6)
        ax.scatter(x, df["max"], marker="_", s=30, color="black", linewidths=1.2, zorder=3)
        n_signal = int(df.has_signal.sum())
        ax.set_title(f"{name}: {len(df)} samples, {int(df.attempts.sum())} rollouts, "
                     f"{n_signal} ({n_signal / len(df):.0%}) with signal", fontsize=10)
        ax.set_xlabel("samples, sorted by mean score")
        ax.set_xlim(-0.5, len(df) - 0.5)
        ax.set_xticks([])
        ax.legend(handles=[Patch(color=SIGNAL_COLOR, alpha=0.55, label="score varies (signal)"),
                           Patch(color=colors[name], alpha=0.55, label="same score every attempt")],
                  loc="upper left", fontsize=8)
    axes[0][0].set_ylabel("score (mean, ±1 std, best attempt —)")
    fig.suptitle("Score per sample across attempts: only varying samples teach RL")
    return fig


def signal_plan(plan: pd.DataFrame, run: str = "") -> Figure:
    """Expected signal share against attempts per sample (from ``signal_plan``), with the target
    and the recommended k."""
    plan = require(plan, "the signal plan")
    fig, axes = _figure(7, 4)
    ax = axes[0][0]
    ax.plot(plan.k, plan.expected_signal_share, marker="o", color=BASE_COLOR)
    target = float(plan.target.iloc[0])
    ax.axhline(target, color=NEUTRAL, linestyle="--", linewidth=1, label=f"target {target:.0%}")
    rec = plan[plan.recommended]
    if len(rec):
        k = int(rec.k.iloc[0])
        ax.scatter([k], rec.expected_signal_share, s=140, facecolors="none", edgecolors=SIGNAL_COLOR, linewidths=2,
                   zorder=3, label=f"recommended: {k} attempts per sample")
    ax.set_xscale("log", base=2)
    ax.set_xticks(plan.k, [str(k) for k in plan.k])
    ax.set_ylim(0, 1)
    ax.set_xlabel("attempts per sample (compute multiplier)")
    ax.set_ylabel("expected share of samples with signal")
    ax.set_title(f"How many attempts give learning signal{' — ' + run if run else ''} "
                 f"({int(plan.samples.iloc[0])} samples)")
    ax.legend(fontsize=8)
    return fig


def tool_calls(dist: pd.DataFrame, base: str, candidate: str) -> Figure:
    """Tool calls per rollout of two runs, as shares (from ``distribution_shift``), the long tail
    beyond LONG_TAIL_CALLS shaded."""
    dist = require(dist, "the tool-call distribution")
    fig, axes = _figure(8, 4)
    ax = axes[0][0]
    w = 0.42
    ax.bar(dist.value - w / 2, dist.base_share, width=w, color=BASE_COLOR, label=f"{base} ({int(dist.base_count.sum())} rollouts)")
    ax.bar(dist.value + w / 2, dist.candidate_share, width=w, color=CANDIDATE_COLOR,
           label=f"{candidate} ({int(dist.candidate_count.sum())} rollouts)")
    tail = config.LONG_TAIL_CALLS + 0.5
    ax.axvspan(tail, max(dist.value.max() + 1, tail + 1), color=SIGNAL_COLOR, alpha=0.08,
               label=f"long tail (> {config.LONG_TAIL_CALLS} calls)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("tool calls per rollout")
    ax.set_ylabel("share of rollouts")
    ax.set_title("Tool calls per rollout")
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
    ax.set_ylabel("calls per rollout")
    ax.set_title("Which tools the agent calls")
    ax.legend(fontsize=8)
    return fig


def turns_and_width(summary: pd.DataFrame) -> Figure:
    """Turns per rollout and calls per turn (parallel width) per run (from ``summary``)."""
    summary = require(summary, "turns and parallel width")
    colors = run_colors(list(summary.run))
    fig, axes = _figure(8, 3.6, ncols=2)
    for ax, col, label in ((axes[0][0], "turns_mean", "turns with tool calls, per rollout"),
                           (axes[0][1], "parallel_width_mean", "tool calls per turn (parallel width)")):
        ax.bar(summary.run, summary[col], color=[colors[r] for r in summary.run])
        ax.set_title(label, fontsize=10)
    fig.suptitle("Back-and-forths with the environment")
    return fig


def latency_ecdf(ecdf: pd.DataFrame, percentiles: dict[str, pd.DataFrame] | None = None) -> Figure:
    """Rollout latency ECDF per run (from ``latency_ecdf``), with P50/P95/P99 and their CIs
    (from ``latency`` per run) marked."""
    ecdf = require(ecdf, "the latency ECDF")
    runs = list(dict.fromkeys(ecdf.run))
    colors = run_colors(runs)
    fig, axes = _figure(8, 4.2)
    ax = axes[0][0]
    for run in runs:
        d = ecdf[ecdf.run == run]
        ax.step(d.latency_s, d.share, where="post", color=colors[run], label=f"{run} ({len(d)} rollouts)")
        p = (percentiles or {}).get(run)
        if p is not None:
            p = p[p.scope == "rollout"]
            for row in p.itertuples():
                ax.errorbar([row.value], [row.percentile / 100], xerr=[[row.value - row.ci_low], [row.ci_high - row.value]],
                            fmt="o", color=colors[run], markersize=4, capsize=3)
                ax.annotate(f"P{row.percentile:g} {row.value:.1f}s", (row.value, row.percentile / 100),
                            textcoords="offset points", xytext=(6, -10), fontsize=7, color=colors[run])
    ax.set_xlabel("rollout latency (s)")
    ax.set_ylabel("share of rollouts at or below")
    ax.set_title("Rollout latency (P50 / P95 / P99 with 95% CIs)")
    ax.legend(fontsize=8, loc="lower right")
    return fig


def tool_latency(latency: pd.DataFrame, run: str = "") -> Figure:
    """Per-tool latency percentiles with CIs (from ``latency``)."""
    d = require(latency[latency.scope != "rollout"] if latency is not None else None, "per-tool latency")
    fig, axes = _figure(8, 4)
    ax = axes[0][0]
    tools = list(dict.fromkeys(d.scope))
    pcts = list(dict.fromkeys(d.percentile))
    w = 0.8 / len(pcts)
    palette = [BASE_COLOR, CANDIDATE_COLOR, SIGNAL_COLOR, NEUTRAL]
    for i, pct in enumerate(pcts):
        sub = d[d.percentile == pct].set_index("scope").reindex(tools)
        x = np.arange(len(tools)) + (i - (len(pcts) - 1) / 2) * w
        ax.bar(x, sub.value, width=w, color=palette[i % len(palette)], label=f"P{pct:g}")
        ax.errorbar(x, sub.value, yerr=[sub.value - sub.ci_low, sub.ci_high - sub.value], fmt="none", color="black",
                    capsize=2, linewidth=0.8)
    ax.set_xticks(np.arange(len(tools)), tools)
    ax.set_ylabel("latency per call (s)")
    ax.set_title(f"Tool latency{' — ' + run if run else ''} (95% CIs)")
    ax.legend(fontsize=8)
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
                   label=f"{run} ({int(m.sum())} rollouts)")
    ax.set_xlabel("rollout latency (s)")
    ax.set_ylabel("score")
    ax.set_title("Does taking longer pay off?")
    ax.legend(fontsize=8)
    return fig


def quadrants(deltas: pd.DataFrame, base: str, candidate: str) -> Figure:
    """Per shared sample: score change against tool-call change (from ``sample_deltas``); the
    legend counts the samples in each quadrant."""
    deltas = require(deltas, "the quadrant plot", no_shared_samples(base, candidate))
    fig, axes = _figure(7, 5)
    ax = axes[0][0]
    jitter = np.random.default_rng(0).normal(0, 0.01, (2, len(deltas)))
    for name, color in QUADRANT_COLORS.items():
        m = (deltas.quadrant == name).to_numpy()
        if m.any():
            ax.scatter(deltas.tool_calls_diff[m] + jitter[0][m], deltas.score_diff[m] + jitter[1][m], s=14,
                       alpha=0.6, color=color, label=f"{name}: {int(m.sum())}")
    ax.axhline(0, color=NEUTRAL, linewidth=0.8)
    ax.axvline(0, color=NEUTRAL, linewidth=0.8)
    ax.set_xlabel(f"tool calls per rollout, {candidate} − {base}")
    ax.set_ylabel(f"mean score, {candidate} − {base}")
    ax.set_title(f"Per sample: {base} → {candidate} ({len(deltas)} shared samples)")
    ax.legend(fontsize=7, loc="best")
    return fig


def forest(comparison: pd.DataFrame) -> Figure:
    """Each metric's change relative to the base with its 95% CI (from ``compare``); significant
    ones in vermillion."""
    c = require(comparison, "the forest plot")
    c = c[c.base.abs() > 0].reset_index(drop=True)
    rel = c["diff"] / c.base.abs() * 100
    lo, hi = c.ci_low / c.base.abs() * 100, c.ci_high / c.base.abs() * 100
    fig, axes = _figure(8, 0.45 * len(c) + 1.4)
    ax = axes[0][0]
    y = np.arange(len(c))[::-1]
    for significant, color in ((True, SIGNAL_COLOR), (False, NEUTRAL)):
        m = (c.significant == significant).to_numpy()
        ax.errorbar(rel[m], y[m], xerr=[(rel - lo)[m], (hi - rel)[m]], fmt="o", color=color, capsize=3)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(y, [f"{m} ({b:.3g} → {v:.3g})" for m, b, v in zip(c.metric, c.base, c.candidate)], fontsize=8)
    ax.set_xlabel("change relative to base (%), 95% CI")
    n = int(comparison.n_samples.iloc[0])
    ax.set_title(f"What changed ({n} shared samples; vermillion: CI excludes 0)")
    return fig


def sample_scores(deltas: pd.DataFrame, base: str, candidate: str) -> Figure:
    """Per shared sample, base mean score against candidate mean score; above the diagonal
    the candidate did better."""
    deltas = require(deltas, "per-sample scores", no_shared_samples(base, candidate))
    fig, axes = _figure(5.2, 5)
    ax = axes[0][0]
    jitter = np.random.default_rng(1).normal(0, 0.008, (2, len(deltas)))
    ax.scatter(deltas.base_score + jitter[0], deltas.candidate_score + jitter[1], s=14, alpha=0.5, color=BASE_COLOR)
    ax.plot([0, 1], [0, 1], color=NEUTRAL, linestyle="--", linewidth=1)
    ax.set_xlabel(f"{base}: mean score per sample")
    ax.set_ylabel(f"{candidate}: mean score per sample")
    wins = int((deltas.outcome == "win").sum())
    losses = int((deltas.outcome == "loss").sum())
    ax.set_title(f"{len(deltas)} samples: {wins} better, {losses} worse", fontsize=10)
    return fig


CURVES = [("mean_score", "mean score"), ("pass_at_1", "pass@1"), ("tool_calls_mean", "tool calls per rollout"),
          ("long_tail_share", "share > 15 calls"), ("latency_p95", "P95 latency (s)"),
          ("input_tokens_mean", "input tokens per rollout")]


def _split_curves(df: pd.DataFrame, curves, title: str) -> Figure:
    """One panel per (column, label); one line per split; a step-less run as a hollow marker."""
    fig, axes = _figure(10, 5.8, ncols=3, nrows=2)
    colors = split_colors(list(df.split.unique()))
    for ax, (col, label) in zip(axes.ravel(), curves):
        for split, part in df.groupby("split", sort=False):
            ax.plot(part.step, part[col], marker="o", color=colors[split], label=split)
            unknown = part[~part.step_known]
            ax.plot(unknown.step, unknown[col], marker="o", linestyle="", markerfacecolor="white",
                    color=colors[split])
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("training step")
    axes[0][0].legend(title="split", fontsize=8)
    note = " (hollow: no step, drawn at 0)" if (~df.step_known).any() else ""
    fig.suptitle(title + note)
    return fig


def training_curves(by_step: pd.DataFrame) -> Figure:
    """Metrics against training step (from ``by_step``): one line per split; a run without a
    step (a base model) is a hollow marker at step 0."""
    by_step = require(by_step, "training curves")
    return _split_curves(by_step, CURVES, f"Along training ({len(by_step)} checkpoints, one line per split)")


LIVE_CURVES = [("mean_score", "mean score"), ("signal_share", "signal share (samples that vary)"),
               ("tool_calls_mean", "tool calls per rollout"), ("latency_p95", "P95 latency (s)"),
               ("infra_share", "infra errors (share)"), ("ungraded_share", "never graded (share)")]


def live_panel(frame: pd.DataFrame) -> Figure:
    """The health of a run while it trains (from ``live_frame``): reward, signal, tool calls,
    latency, infra errors and ungraded rollouts along the steps, one line per split."""
    frame = require(frame, "the live view")
    return _split_curves(frame, LIVE_CURVES, f"The run so far ({len(frame)} checkpoints)")


# What a trainer reports (``training_metrics``), one panel each: (title, row filter).
TRAINER_PANELS = [
    ("reward (all graders)", lambda d: d[(d.metric == "reward_mean") & (d.grader == "")]),
    ("reward per grader", lambda d: d[(d.metric == "reward_mean") & (d.grader != "")]),
    ("errors (share of samples)", lambda d: d[(d.metric.str.endswith("error_mean") & (d.grader != ""))
                                              | (d.metric == "exception_rate")]),
    ("step time (s)", lambda d: d[d.metric.str.startswith("step_") & d.metric.str.endswith("_seconds")]),
]


def trainer_series(metrics: pd.DataFrame, panel) -> dict[str, pd.DataFrame]:
    """The lines of one panel: {label: rows by step}; the label names what differs (job, grader,
    metric, split)."""
    rows = panel(metrics)
    keys = [k for k in ("job", "grader", "metric", "split") if rows[k].nunique() > 1 or k == "split"]
    return {" · ".join(str(v) for v in (key if isinstance(key, tuple) else (key,)) if v != ""): df.sort_values("step")
            for key, df in rows.groupby(keys, sort=True)}


def trainer_curves(metrics: pd.DataFrame) -> Figure:
    """The trainer's own step metrics (from ``training_metrics``): reward per split, reward per
    grader, grader error rates, step timing. Validation points exist only on validation steps."""
    metrics = require(metrics, "trainer metrics")
    fig, axes = _figure(10, 6.2, ncols=2, nrows=2)
    for ax, (title, panel) in zip(axes.ravel(), TRAINER_PANELS):
        lines = trainer_series(metrics, panel)
        for i, (label, df) in enumerate(lines.items()):
            color = ([BASE_COLOR, CANDIDATE_COLOR] + list(QUADRANT_COLORS.values()))[i % 9]
            ax.plot(df.step, df.value, marker="o", markersize=3, color=color, label=label)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("training step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if lines:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "not reported", ha="center", va="center", transform=ax.transAxes, color=NEUTRAL)
    fig.suptitle(f"What the trainer reported ({', '.join(sorted(metrics.job.unique()))})")
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


def graders(stats: pd.DataFrame | dict[str, pd.DataFrame], run: str = "run") -> Figure:
    """Per grader (from ``grader_stats``): mean score, pass rate and signal share as grouped bars;
    a dict {run: frame} draws one panel per run."""
    frames = as_runs(stats, run)
    fig, axes = _figure(width=max(5.0, 4.5 * len(frames)), height=3.8, ncols=len(frames), sharey=True)
    bars = (("mean", "mean score", BASE_COLOR), ("pass_rate", "pass rate", CANDIDATE_COLOR),
            ("signal_share", "signal share", SIGNAL_COLOR))
    for ax, (name, df) in zip(axes[0], frames.items()):
        df = require(df, f"the grader plot of {name}")
        x = np.arange(len(df))
        for i, (col, label, color) in enumerate(bars):
            ax.bar(x + (i - 1) * 0.27, df[col].fillna(0), width=0.27, color=color, label=label)
        ax.set_xticks(x, df.grader, rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{name}: {len(df)} graders", fontsize=10)
    axes[0][0].set_ylabel("share / score")
    axes[0][-1].legend(fontsize=8, loc="upper right")
    return fig


def grader_disagreement(pairs: pd.DataFrame, run: str = "") -> Figure:
    """Share of rollouts on which two graders disagree on pass/fail (from ``grader_pairs``), with
    their score correlation in each cell."""
    graders_, share, corr = _disagreement_matrix(require(pairs, "the grader disagreement matrix"))
    n = len(graders_)
    fig, axes = _figure(width=1.1 * n + 2.5, height=1.0 * n + 1.5)
    ax = axes[0][0]
    image = ax.imshow(share, vmin=0, vmax=1, cmap="Oranges")
    for i in range(n):
        for j in range(n):
            if not np.isnan(share[i, j]):
                r = "" if np.isnan(corr[i, j]) else f"\nr = {corr[i, j]:.2f}"
                ax.text(j, i, f"{share[i, j]:.0%}{r}", ha="center", va="center", fontsize=8,
                        color="white" if share[i, j] > 0.5 else "black")
    ax.set_xticks(range(n), graders_, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(n), graders_, fontsize=8)
    fig.colorbar(image, ax=ax, label="share of rollouts: pass/fail differ")
    ax.set_title(f"Where graders disagree {run}".strip(), fontsize=10)
    return fig


def in_flight(df: pd.DataFrame, run: str = "") -> Figure:
    """Calls in flight per tool and rollouts in flight over a run (from ``in_flight``), as steps."""
    df = require(df, "calls in flight")
    fig, axes = _figure(9, 4)
    ax = axes[0][0]
    for scope, kind, sub, color in in_flight_series(df):
        style = {"rollouts": dict(linestyle="--"), "all": dict(linewidth=1.6), "tool": dict(linewidth=1.0)}[kind]
        ax.step(sub.t, sub.in_flight, where="post", color=color,
                label="rollouts in flight" if kind == "rollouts" else scope, **style)
    ax.set_ylabel("in flight at once")
    ax.set_title(f"Calls in flight{' — ' + run if run else ''}")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8, loc="upper right")
    return fig

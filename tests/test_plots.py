"""Figures: the expected artists, labels and colors for known frames; clear failures on empty data."""
from __future__ import annotations

import html

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

import rolloutlab as rl  # noqa: E402
from rolloutlab import plots  # noqa: E402
from rolloutlab.plots import interactive as pi, static as ps  # noqa: E402
from rolloutlab.plots.style import BASE_COLOR, CANDIDATE_COLOR, SIGNAL_COLOR  # noqa: E402

STATS = pd.DataFrame({"sample_id": ["a", "b", "c"], "attempts": [3, 3, 2], "mean": [1.0, 0.5, 0.0],
                      "std": [0.0, 0.5, 0.0], "min": [1.0, 0.0, 0.0], "max": [1.0, 1.0, 0.0],
                      "has_signal": [False, True, False], "success_rate": [1.0, 0.5, 0.0], "successes": [3, 1, 0]})
DELTAS = pd.DataFrame({"sample_id": ["x<script>", "y", "z"], "base_score": [0.0, 1.0, 0.5],
                       "candidate_score": [1.0, 0.0, 0.5], "score_diff": [1.0, -1.0, 0.0],
                       "base_tool_calls": [8.0, 3.0, 4.0], "candidate_tool_calls": [3.0, 5.0, 4.0],
                       "tool_calls_diff": [-5.0, 2.0, 0.0], "outcome": ["win", "loss", "tie"],
                       "quadrant": ["better and fewer tools", "worse and more tools", "no change"]})
DIST = pd.DataFrame({"value": [2.0, 8.0, 17.0], "value_high": [3.0, 9.0, 18.0], "base_count": [0, 9, 1],
                     "candidate_count": [10, 0, 0], "base_share": [0.0, 0.9, 0.1], "candidate_share": [1.0, 0.0, 0.0]})


def test_variance_static_sorts_and_highlights_signal():
    fig = ps.variance(STATS, "base")
    ax = fig.axes[0]
    bars = ax.patches
    assert [b.get_height() for b in bars] == [0.0, 0.5, 1.0]  # sorted by mean
    assert matplotlib.colors.to_hex(bars[1].get_facecolor()) == SIGNAL_COLOR.lower()
    assert matplotlib.colors.to_hex(bars[0].get_facecolor()) == BASE_COLOR.lower()
    assert ax.get_title() == "base: 3 samples, 8 rollouts, 1 (33%) with signal"
    assert ax.get_ylabel().startswith("score")


def test_variance_side_by_side_keeps_run_colors():
    fig = ps.variance({"base": STATS, "cand": STATS.assign(has_signal=False)})
    assert len(fig.axes) == 2
    assert matplotlib.colors.to_hex(fig.axes[1].patches[0].get_facecolor()) == CANDIDATE_COLOR.lower()


def test_empty_frames_fail_clearly():
    with pytest.raises(plots.EmptyDataError, match="no data to plot for the variance plot of base"):
        ps.variance(STATS.iloc[0:0], "base")
    with pytest.raises(plots.EmptyDataError):
        pi.quadrants(DELTAS.iloc[0:0], "b", "c")
    with pytest.raises(plots.EmptyDataError):
        ps.forest(pd.DataFrame())


def test_quadrants_count_in_legend_and_escape_hover():
    fig = ps.quadrants(DELTAS, "base", "cand")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["better and fewer tools: 1", "no change: 1", "worse and more tools: 1"]
    ifig = pi.quadrants(DELTAS, "base", "cand")
    assert [t.name for t in ifig.data] == labels
    assert ifig.data[0].customdata[0][0] == html.escape("x<script>")


def test_tool_calls_and_signal_plan():
    fig = ps.tool_calls(DIST, "base", "cand")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["long tail (> 15 calls)", "base (10 rollouts)",
                                                                  "cand (10 rollouts)"]
    assert ax.get_xlabel() == "tool calls per rollout"
    plan = pd.DataFrame({"k": [1, 2, 4], "expected_signal_share": [0.0, 0.2, 0.35], "samples": [10] * 3,
                         "target": [0.3] * 3, "reaches_target": [False, False, True],
                         "recommended": [False, False, True]})
    fig = ps.signal_plan(plan, "base")
    assert "recommended: 4 attempts per sample" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(pi.signal_plan(plan).data) == 2


def test_forest_and_latency():
    comparison = pd.DataFrame({"metric": ["score", "tool_calls_per_rollout"], "base": [0.5, 8.0],
                               "candidate": [0.6, 4.0], "diff": [0.1, -4.0], "rel_change": [0.2, -0.5],
                               "ci_low": [-0.05, -5.0], "ci_high": [0.2, -3.0], "p_value": [0.2, 0.001],
                               "se": [0.05, None], "n_samples": [40, 40], "significant": [False, True],
                               "unit": ["score", "calls"]})
    fig = ps.forest(comparison)
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert ticks == ["score (0.5 → 0.6)", "tool_calls_per_rollout (8 → 4)"]  # top to bottom
    assert "40 shared samples" in fig.axes[0].get_title()
    ifig = pi.forest(comparison)
    assert list(ifig.data[0].y) == ["tool_calls_per_rollout", "score"]
    ecdf = pd.DataFrame({"run": ["b", "b", "c"], "latency_s": [1.0, 2.0, 0.5], "share": [0.5, 1.0, 1.0]})
    lat = pd.DataFrame({"scope": ["rollout", "search"], "percentile": [50.0, 50.0], "value": [1.5, 0.2],
                        "ci_low": [1.0, 0.1], "ci_high": [2.0, 0.3], "n": [2, 2]})
    fig = ps.latency_ecdf(ecdf, {"b": lat})
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["b (2 rollouts)", "c (1 rollouts)"]
    assert len(ps.tool_latency(lat).axes[0].patches) == 1
    assert len(pi.latency_ecdf(ecdf, {"b": lat}).data) == 3


def test_training_curves_and_scatter():
    by_step = pd.DataFrame({"run": ["base", "s10", "t0", "t10"], "split": ["valid", "valid", "train", "train"],
                            "step": [0, 10, 0, 10], "step_known": [False, True, True, True],
                            "mean_score": [0.5, 0.7, 0.4, 0.9], "pass_at_1": [0.4, 0.6, 0.3, 0.8],
                            "tool_calls_mean": [8, 3, 9, 4], "long_tail_share": [0.05, 0.0, 0.1, 0.0],
                            "latency_p95": [40, 11, 45, 12], "input_tokens_mean": [4e4, 6e3, 5e4, 7e3]})
    fig = ps.training_curves(by_step)
    assert [ax.get_title() for ax in fig.axes] == ["mean score", "pass@1", "tool calls per rollout",
                                                    "share > 15 calls", "P95 latency (s)", "input tokens per rollout"]
    # one line per split (plus the hollow marker of the step-less base), never one zig-zag through both
    lines = [(ln.get_label(), list(ln.get_xdata()), list(ln.get_ydata())) for ln in fig.axes[0].lines
             if ln.get_linestyle() != "None"]
    assert lines == [("valid", [0, 10], [0.5, 0.7]), ("train", [0, 10], [0.4, 0.9])]
    hollow = [ln for ln in fig.axes[0].lines if ln.get_linestyle() == "None"]
    assert [list(ln.get_xdata()) for ln in hollow] == [[0], []]
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["valid", "train"]
    traces = pi.training_curves(by_step).data
    assert len(traces) == 12 and [t.name for t in traces if t.showlegend] == ["valid", "train"]
    assert list(traces[0].x) == [0, 10] and list(traces[0].marker.symbol) == ["circle-open", "circle"]
    rollouts = pd.DataFrame({"run": ["b", "c"], "sample_id": ["s1", "s1"], "attempt": [0, 0], "score": [1.0, 0.0],
                             "n_tool_calls": [3, 1], "latency_s": [2.0, 1.0]})
    assert len(ps.latency_vs_score(rollouts).axes[0].collections) == 2
    hover = pi.latency_vs_score(rollouts).data[0].hovertemplate
    assert "sample %{customdata[0]}, attempt %{customdata[1]}" in hover and "tool calls" in hover
    assert len(ps.sample_scores(DELTAS, "b", "c").axes[0].collections) == 1


def test_readiness_table_escapes_and_colors():
    checks = pd.DataFrame({"check": ["baseline_nonzero"], "status": ["fail"], "value": [0.0],
                           "threshold": ["fail when 0"], "advice": ["<img src=x onerror=alert(1)>"], "details": [""]})
    out = plots.readiness_table(checks).to_html()
    assert "<img src=x" not in out and "&lt;img src=x onerror=alert(1)&gt;" in out
    assert "#D55E00" in out


def test_turns_and_usage():
    summary = pd.DataFrame({"run": ["b", "c"], "turns_mean": [8.0, 2.0], "parallel_width_mean": [1.0, 1.5]})
    fig = ps.turns_and_width(summary)
    assert [p.get_height() for p in fig.axes[0].patches] == [8.0, 2.0]
    stats = pd.DataFrame({"tool": ["search", "cat"], "calls_per_rollout": [4.0, 3.0]})
    fig = ps.tool_usage({"b": stats, "c": stats.iloc[:1]})
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["cat", "search"]


def test_trainer_curves():
    metrics = pd.DataFrame({
        "job": ["j"] * 7, "step": [1, 2, 2, 1, 2, 2, 2],
        "split": ["train", "train", "valid", "train", "train", "train", "train"],
        "grader": ["", "", "", "tests", "tests", "tests", ""],
        "metric": ["reward_mean", "reward_mean", "reward_mean", "reward_mean", "reward_mean",
                   "python_grader_server_error_mean", "step_sampling_seconds"],
        "value": [0.1, 0.2, 0.3, 0.15, 0.25, 0.05, 120.0]})
    fig = ps.trainer_curves(metrics)
    reward, per_grader, errors, timing = fig.axes[:4]
    assert [(ln.get_label(), list(ln.get_xdata()), list(ln.get_ydata())) for ln in reward.lines] == [
        ("train", [1, 2], [0.1, 0.2]), ("valid", [2], [0.3])]
    assert [ln.get_label() for ln in per_grader.lines] == ["train"]
    assert [list(ln.get_ydata()) for ln in errors.lines] == [[0.05]]
    assert [list(ln.get_ydata()) for ln in timing.lines] == [[120.0]]
    traces = pi.trainer_curves(metrics).data
    assert [t.name for t in traces] == ["train", "valid", "train", "train", "train"]
    with pytest.raises(plots.EmptyDataError):
        ps.trainer_curves(metrics.iloc[0:0])


def test_graders_and_disagreement():
    stats = pd.DataFrame({"grader": ["answer", "judge<b>"], "mean": [0.5, 0.75], "pass_rate": [0.5, 0.5],
                          "signal_share": [0.2, float("nan")]})
    fig = ps.graders({"base": stats, "cand": stats})
    assert len(fig.axes) == 2 and len(fig.axes[0].patches) == 6
    assert [p.get_height() for p in fig.axes[0].patches][-1] == 0  # no signal share: an empty bar
    pairs = pd.DataFrame({"grader_a": ["answer", "answer"], "grader_b": ["format", "judge<b>"],
                          "disagree_share": [0.28, 0.12], "correlation": [0.0, 0.75]})
    fig = ps.grader_disagreement(pairs, "step10")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "12%\nr = 0.75" in texts and texts.count("28%\nr = 0.00") == 2  # symmetric
    ifig = pi.grader_disagreement(pairs)
    assert "judge&lt;b&gt;" in ifig.data[0].x and "<b>" not in "".join(ifig.data[0].x)
    assert ifig.data[0].z[0][2] == 0.12 and ifig.data[0].z[2][0] == 0.12
    assert "judge&lt;b&gt;" in pi.graders(stats).data[0].x
    with pytest.raises(plots.EmptyDataError):
        ps.grader_disagreement(pairs.iloc[0:0])


IN_FLIGHT = pd.DataFrame({"scope": ["(all)", "(all)", "rollouts", "rollouts", "<i>x</i>", "<i>x</i>"],
                          "t": pd.to_datetime(["2026-01-01 00:00:00", "2026-01-01 00:00:01"] * 3),
                          "in_flight": [3, 1, 2, 0, 3, 1]})


def test_in_flight_steps():
    fig = ps.in_flight(IN_FLIGHT, "run")
    lines = {line.get_label(): list(line.get_ydata()) for line in fig.axes[0].lines}
    assert lines["(all)"][:2] == [3, 1] and lines["rollouts in flight"][:2] == [2, 0] and "<i>x</i>" in lines
    figi = pi.in_flight(IN_FLIGHT, "run")
    assert [t.name for t in figi.data] == ["rollouts in flight", "(all)", "&lt;i&gt;x&lt;/i&gt;"]
    assert all(t.line.shape == "hv" for t in figi.data)
    with pytest.raises(ValueError):
        ps.in_flight(IN_FLIGHT.iloc[0:0])


@pytest.mark.parametrize("draw", [ps.quadrants, pi.quadrants, ps.sample_scores])
def test_paired_plots_say_the_runs_share_no_samples(load, draw):
    """sample_deltas of two runs on different samples is empty: the figure names both runs
    instead of saying a run has no counted rollouts."""
    from conftest import rollout

    con = load([rollout("a", f"s{i}", 1.0) for i in range(3)] + [rollout("b", f"t{i}", 0.0) for i in range(2)])
    deltas = rl.sample_deltas(con, "a", "b")
    assert deltas.empty and set(rl.sample_stats(con, "b").sample_id) == {"t0", "t1"}
    with pytest.raises(plots.EmptyDataError) as err:
        draw(deltas, "a", "b")
    assert "a and b share no scored samples" in str(err.value) and "no counted rollouts" not in str(err.value)
    assert "evaluated on the same samples" in str(err.value)

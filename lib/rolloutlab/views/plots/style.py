"""One look for every figure, and one meaning per color across all of them (a report shows them
together). Okabe & Ito (2008): distinguishable with the common color-vision deficiencies.

| color | means | where |
|---|---|---|
| blue ``#0072B2`` | the first run (base) | every figure that shows runs |
| orange ``#E69F00`` | the second run (candidate) | every figure that shows runs |
| vermillion ``#D55E00`` | worse, bad, look here | worse samples, the long tail, failed checks, errors |
| bluish green ``#009E73`` | better, good | better samples, passed checks, the recommended k |
| grey ``#999999`` / ``#BBBBBB`` | no change, no signal, reference | constant samples, unchanged samples, CIs that include 0 |
| reddish purple ``#CC79A7`` | the training split | training curves, the trainer's metrics |
| sky blue ``#56B4E9`` | the validation split | training curves, the trainer's metrics |
| yellow ``#F0E442`` | warn | readiness |
| near-black ``#333333`` | statistics drawn over data | ±1 std, best attempt, confidence intervals |

A third and later run take colors outside these meanings (Paul Tol's "muted" set, also
colorblind-safe). Other distinctions inside one figure (graders, tools, audit checks) are line
styles and marker shapes, named in the figure's legend.
"""
from __future__ import annotations

import pandas as pd

BASE_COLOR = "#0072B2"       # blue: the first run
CANDIDATE_COLOR = "#E69F00"  # orange: the second run
OTHER_COLORS = ["#882255", "#44AA99", "#332288", "#999933", "#AA4499", "#117733"]  # third run on (Tol muted)
SIGNAL_COLOR = "#D55E00"     # vermillion: worse, bad, look here (the long tail, errors)
BAD_COLOR = SIGNAL_COLOR
GOOD_COLOR = "#009E73"       # bluish green: better, good
NEUTRAL = "#999999"          # grey: no change, reference lines
NO_SIGNAL = "#BBBBBB"        # light grey: samples whose score never varies
INK = "#333333"              # statistics drawn over the data: ±1 std, best attempt, CIs
TRAIN_COLOR = "#CC79A7"      # reddish purple: the training split
VALID_COLOR = "#56B4E9"      # sky blue: the validation split
WARN_COLOR = "#F0E442"       # yellow: warn
STATUS_COLORS = {"pass": GOOD_COLOR, "warn": WARN_COLOR, "fail": BAD_COLOR, "skip": NEUTRAL}
STATUS_TEXT = {"pass": "white", "warn": "black", "fail": "white", "skip": "white"}

# A sample's change from base to candidate: color says better / no change / worse, the marker
# says whether it used fewer, the same or more tool calls.
OUTCOME_COLORS = {"better": GOOD_COLOR, "no change": NEUTRAL, "worse": BAD_COLOR}
TOOL_MARKERS = {"fewer": ("triangle-down", "v"), "same": ("circle", "o"), "more": ("triangle-up", "^")}
QUADRANTS = {  # quadrant (from sample_deltas) -> (outcome, tool change)
    "better and fewer tools": ("better", "fewer"), "better, same tools": ("better", "same"),
    "better and more tools": ("better", "more"), "no change": ("no change", "same"),
    "worse and fewer tools": ("worse", "fewer"), "worse, same tools": ("worse", "same"),
    "worse and more tools": ("worse", "more"),
}
QUADRANT_COLORS = {name: OUTCOME_COLORS[outcome] for name, (outcome, _) in QUADRANTS.items()}
SAMPLE_OUTCOMES = {"win": "better", "tie": "no change", "loss": "worse"}  # sample_deltas.outcome

# Line styles and markers for what differs within one panel (graders, step phases, audit checks),
# as (plotly dash, matplotlib linestyle, plotly symbol, matplotlib marker).
STYLES = [("solid", "-", "circle", "o"), ("dash", "--", "square", "s"), ("dot", ":", "diamond", "D"),
          ("dashdot", "-.", "triangle-up", "^"), ("longdash", (0, (8, 3)), "x", "x"),
          ("longdashdot", (0, (8, 3, 2, 3)), "star", "*")]
SPLIT_DASH = {"train": 0, "valid": 1}  # index into STYLES when splits share a color


def run_colors(runs: list[str]) -> dict[str, str]:
    """The first run is drawn in the base color, the second in the candidate color, then others."""
    palette = [BASE_COLOR, CANDIDATE_COLOR] + OTHER_COLORS
    return {run: palette[i % len(palette)] for i, run in enumerate(runs)}


SPLIT_COLORS = {"train": TRAIN_COLOR, "training": TRAIN_COLOR, "valid": VALID_COLOR, "validation": VALID_COLOR,
                "eval": VALID_COLOR, "test": VALID_COLOR, "full_valid": VALID_COLOR, "(no split)": NEUTRAL}


def split_colors(splits: list[str]) -> dict[str, str]:
    """Training in reddish purple, validation in sky blue (never a run's color), others after."""
    others = iter(OTHER_COLORS * (len(splits) // len(OTHER_COLORS) + 1))
    return {s: SPLIT_COLORS.get(str(s).lower()) or next(others) for s in splits}


def styles(keys) -> dict[str, tuple]:
    """One entry of STYLES per key, in order."""
    return {k: STYLES[i % len(STYLES)] for i, k in enumerate(keys)}


class EmptyDataError(ValueError):
    pass


NO_ROLLOUTS = ("the run has no counted rollouts (check the run label, or whether every rollout was an "
               "infra error)")


def require(df: pd.DataFrame | None, what: str, why: str = NO_ROLLOUTS) -> pd.DataFrame:
    """Fail clearly on an empty frame instead of drawing an empty, misleading figure; ``why``:
    what an empty frame means for this figure."""
    if df is None or len(df) == 0:
        raise EmptyDataError(f"no data to plot for {what}: {why}")
    return df


def no_shared_samples(base: str, candidate: str) -> str:
    """Why a paired frame (``sample_deltas``) is empty."""
    return (f"{base} and {candidate} share no scored samples (a sample counts when each run has a scored "
            "rollout of it); compare runs evaluated on the same samples")


def as_runs(data: pd.DataFrame | dict[str, pd.DataFrame], default: str = "run") -> dict[str, pd.DataFrame]:
    """A frame or {run: frame} -> {run: frame}."""
    return dict(data) if isinstance(data, dict) else {default: data}


def in_flight_scopes(df: pd.DataFrame) -> list[tuple[str, str]]:
    """(scope, panel title) to draw from ``in_flight``, one panel each: rollouts, all tools, then
    each tool."""
    tools = sorted(s for s in dict.fromkeys(df.scope) if s not in ("rollouts", "(all)"))
    scopes = [("rollouts", "rollouts in flight"), ("(all)", "tool calls in flight, all tools")]
    scopes += [(t, f"calls in flight: {t}") for t in tools]
    return [(scope, title) for scope, title in scopes if (df.scope == scope).any()]


def minutes_since_start(t: pd.Series) -> pd.Series:
    """Times as minutes since the first one (runs started at different times share an axis)."""
    t = pd.to_datetime(t)
    return (t - t.min()).dt.total_seconds() / 60


def trainer_panels():
    """What a trainer reports (``training_metrics``), one panel each: (title, y axis, row filter,
    kind of y: 'score' | 'share' | 'seconds')."""
    return [
        ("reward, all graders: train against validation", "mean reward",
         lambda d: d[(d.metric == "reward_mean") & (d.grader == "")], "score"),
        ("reward per grader", "mean reward", lambda d: d[(d.metric == "reward_mean") & (d.grader != "")], "score"),
        ("grader errors: share of samples the grader failed on", "share of samples",
         lambda d: d[(d.metric.str.endswith("error_mean") & (d.grader != "")) | (d.metric == "exception_rate")],
         "share"),
        ("time per step, by phase", "seconds per step",
         lambda d: d[d.metric.str.startswith("step_") & d.metric.str.endswith("_seconds")], "seconds"),
    ]


PHASES = {"step_sampling_seconds": "sampling", "step_training_seconds": "training", "step_eval_seconds": "validation"}


def _short_metric(metric: str) -> str:
    return PHASES.get(metric, metric.removesuffix("_mean").replace("python_grader_server_", "").replace("_", " "))


def trainer_lines(metrics: pd.DataFrame, panel) -> list[dict]:
    """The lines of one trainer panel, each {label, split, key (what differs besides the split),
    rows by step}. Lines with the very same points are drawn once, their labels joined ("answer =
    format · train"), so that no line hides under another."""
    rows = panel(metrics)
    if rows.empty:
        return []
    keys = [k for k in ("job", "grader", "metric") if rows[k].nunique() > 1]
    lines = []
    for key, df in rows.groupby(keys + ["split"], sort=True):
        key = key if isinstance(key, tuple) else (key,)
        parts = [_short_metric(v) if k == "metric" else str(v) for k, v in zip(keys, key[:-1]) if v != ""]
        lines.append({"key": " · ".join(parts), "split": str(key[-1]), "rows": df.sort_values("step")})
    merged: list[dict] = []
    for line in lines:
        points = list(zip(line["rows"].step, line["rows"].value))
        same = next((m for m in merged if m["points"] == points), None)
        if same is not None:
            same["same"].append(line)
        else:
            merged.append({**line, "same": [line], "points": points})
    for m in merged:
        keys = list(dict.fromkeys(x["key"] for x in m["same"]))
        splits = list(dict.fromkeys(x["split"] for x in m["same"]))
        if len(splits) == 1:
            what = " = ".join(k for k in keys if k)
            m["label"] = f"{what} · {splits[0]}" if what else splits[0]
        elif len(keys) == 1:
            m["label"] = (f"{keys[0]} · " if keys[0] else "") + " = ".join(splits)
        else:
            m["label"] = " = ".join(f"{x['key']} · {x['split']}" if x["key"] else x["split"] for x in m["same"])
        m["style_key"] = m["key"]
    return merged


def reward_floor(stats: pd.DataFrame) -> float:
    """Where a run's score bars start: its lowest reward (``sample_stats``' ``reward_floor``), 0
    for a frame without it."""
    if "reward_floor" not in stats or stats.reward_floor.isna().all():
        return 0.0
    return float(stats.reward_floor.dropna().iloc[0])

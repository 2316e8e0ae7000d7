"""One look for every figure: colorblind-safe colors (Okabe-Ito), base and candidate fixed."""
from __future__ import annotations

import pandas as pd

# Okabe & Ito (2008): distinguishable with the common color-vision deficiencies.
BASE_COLOR = "#0072B2"       # blue
CANDIDATE_COLOR = "#E69F00"  # orange
OTHER_COLORS = ["#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
SIGNAL_COLOR = "#D55E00"     # vermillion: samples with signal, the long tail
NEUTRAL = "#999999"
STATUS_COLORS = {"pass": "#009E73", "warn": "#E69F00", "fail": "#D55E00", "skip": "#999999"}
QUADRANT_COLORS = {
    "better and fewer tools": "#009E73", "better, same tools": "#56B4E9", "better and more tools": "#0072B2",
    "no change": "#999999", "worse and fewer tools": "#F0E442", "worse, same tools": "#CC79A7",
    "worse and more tools": "#D55E00",
}


def run_colors(runs: list[str]) -> dict[str, str]:
    """The first run is drawn in the base color, the second in the candidate color, then others."""
    palette = [BASE_COLOR, CANDIDATE_COLOR] + OTHER_COLORS
    return {run: palette[i % len(palette)] for i, run in enumerate(runs)}


def split_colors(splits: list[str]) -> dict[str, str]:
    """Validation in the base color, training in the candidate color, anything else after."""
    known = {"valid": BASE_COLOR, "validation": BASE_COLOR, "eval": BASE_COLOR, "test": BASE_COLOR,
             "train": CANDIDATE_COLOR}
    others = iter(OTHER_COLORS * (len(splits) // len(OTHER_COLORS) + 1))
    return {s: known.get(str(s).lower()) or next(others) for s in splits}


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


IN_FLIGHT_TOOL_COLORS = [BASE_COLOR, CANDIDATE_COLOR, SIGNAL_COLOR, "#009E73", "#CC79A7", "#56B4E9"]


def in_flight_series(df: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame, str]]:
    """(scope, kind, rows, color) to draw from ``in_flight``: rollouts, then all tools, then each
    tool; kind is 'rollouts', 'all' or 'tool'."""
    tools = [s for s in dict.fromkeys(df.scope) if s not in ("rollouts", "(all)")]
    series = [("rollouts", "rollouts", NEUTRAL), ("(all)", "all", "black")]
    series += [(t, "tool", IN_FLIGHT_TOOL_COLORS[i % len(IN_FLIGHT_TOOL_COLORS)]) for i, t in enumerate(tools)]
    return [(scope, kind, df[df.scope == scope], color) for scope, kind, color in series if (df.scope == scope).any()]

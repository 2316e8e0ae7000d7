"""Capacity plan for the team's tool endpoints: the load one run put on them, and the load a
planned training step will put on them (docs/metrics.md, "Capacity plan")."""
from __future__ import annotations

import duckdb
import pandas as pd

from ... import config
from .common import resolve_runs, run_sql

ALL = "(all)"
GRADER = "(grader)"  # the grader endpoint's calls: a reward Lambda, a Cloud Run reward service, a grader server


FLOOR = "least(1.0, $rollouts_per_step / rp.peak_rollouts_in_flight)"


def sweep_sql(source: str, key: str, start: str, end: str) -> str:
    """(k, t, in_flight) per ``key`` of ``source``: +1 at each span's start, -1 at its end, a
    running sum; at the same instant the end comes first (a span ending as another starts does
    not overlap it)."""
    return f"""
    SELECT k, t, sum(d) OVER (PARTITION BY k ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS in_flight
    FROM (SELECT {key} AS k, {start} AS t, 1 AS d FROM {source} UNION ALL SELECT {key}, {end}, -1 FROM {source})"""


def window_counts_sql(source: str, key: str, at: str) -> str:
    """(k, n) per row of ``source``: the rows of its ``key`` starting in [its ``at``, + $window)."""
    return f"""
    SELECT {key} AS k, count(*) OVER (PARTITION BY {key} ORDER BY {at}
                                      RANGE BETWEEN CURRENT ROW AND ($window - 1e-9) FOLLOWING) AS n
    FROM {source}"""


def calls_sql() -> str:
    """The calls of the run's rollouts (``r``), with their offsets from their rollout's start: the
    tool calls, and the grader's (``GRADER``): one per graded rollout, ending when it was graded
    and lasting its grades' latency — a call that graded several rollouts at once (a batched
    reward Lambda: same end, same latency) counts once."""
    return f"""
    SELECT t.tool, t.latency_s, t.started_at, t.ended_at,
           epoch(t.started_at) - epoch(r.started_at) AS start_offset,
           epoch(t.ended_at) - epoch(r.started_at) AS end_offset
    FROM tool_calls t JOIN r USING (rollout_id)
    UNION ALL
    SELECT '{GRADER}', lat, any_value(ended_at) - to_microseconds((lat * 1e6)::BIGINT), any_value(ended_at),
           min(epoch(ended_at) - lat - epoch(r_start)), min(epoch(ended_at) - epoch(r_start))
    FROM (SELECT r.ended_at, r.started_at AS r_start, max(g.latency_s) AS lat
          FROM grades g JOIN r USING (rollout_id) WHERE g.latency_s IS NOT NULL AND r.ended_at IS NOT NULL
          GROUP BY r.rollout_id, r.ended_at, r.started_at)
    GROUP BY ended_at, lat"""


def capacity_sql() -> str:
    """One row per tool and ``(all)``: observed load ($run), and the per-rollout peak shares the
    projection multiplies by $rollouts_per_step (NULL: no projection). $window: seconds per rate
    window."""
    return f"""
    WITH r AS (SELECT rollout_id, started_at, ended_at FROM rollouts WHERE run_id = $run),
    n AS (SELECT count(*) AS rollouts FROM r),
    per_tool AS ({calls_sql()}),
    calls AS (SELECT * FROM per_tool UNION ALL SELECT * REPLACE ('{ALL}' AS tool) FROM per_tool
              WHERE tool <> '{GRADER}'),  -- (all): the tool endpoints
    timed AS (SELECT * FROM calls WHERE started_at IS NOT NULL AND ended_at IS NOT NULL),
    aligned_calls AS (SELECT * FROM timed WHERE start_offset IS NOT NULL),
    timed_rollouts AS (SELECT * FROM r WHERE started_at IS NOT NULL AND ended_at IS NOT NULL),
    peaks AS (SELECT k AS tool, max(in_flight)::BIGINT AS peak_calls_in_flight, arg_max(t, in_flight) AS peak_at
              FROM ({sweep_sql('timed', 'tool', 'started_at', 'ended_at')}) GROUP BY k),
    -- the same sweep over offsets from each rollout's start: all rollouts of a step start together
    aligned AS (SELECT k AS tool, max(in_flight) / any_value(n.rollouts) AS peak_share
                FROM ({sweep_sql('aligned_calls', 'tool', 'start_offset', 'end_offset')}), n GROUP BY k),
    rates AS (SELECT k AS tool, max(n) / $window AS peak_calls_per_s
              FROM ({window_counts_sql('timed', 'tool', 'epoch(started_at)')}) GROUP BY k),
    aligned_rates AS (SELECT w.k AS tool, max(w.n) / $window / any_value(n.rollouts) AS rate_share
                      FROM ({window_counts_sql('aligned_calls', 'tool', 'start_offset')}) w, n GROUP BY w.k),
    rollout_peak AS (SELECT max(in_flight)::BIGINT AS peak_rollouts_in_flight
                     FROM ({sweep_sql('timed_rollouts', "'rollouts'", 'started_at', 'ended_at')})),
    stats AS (SELECT tool, count(*) AS calls, quantile_cont(latency_s, 0.5) AS latency_p50,
                     quantile_cont(latency_s, 0.95) AS latency_p95
              FROM calls GROUP BY tool)
    SELECT s.tool, s.calls, s.calls / n.rollouts AS calls_per_rollout, s.latency_p50, s.latency_p95,
           p.peak_calls_in_flight, p.peak_at, rp.peak_rollouts_in_flight, rt.peak_calls_per_s,
           a.peak_share, ar.rate_share,
           $rollouts_per_step::BIGINT AS rollouts_per_step,
           -- never below what the run itself showed (scaled down for a step smaller than its peak)
           greatest(ceil($rollouts_per_step * a.peak_share),
                    coalesce(ceil(p.peak_calls_in_flight * {FLOOR}), 0))::BIGINT AS projected_peak_calls_in_flight,
           greatest($rollouts_per_step * ar.rate_share,
                    coalesce(rt.peak_calls_per_s * {FLOOR}, 0)) AS projected_peak_calls_per_s,
           $rollouts_per_step::BIGINT AS projected_sandboxes
    FROM stats s CROSS JOIN n CROSS JOIN rollout_peak rp
    LEFT JOIN peaks p USING (tool) LEFT JOIN rates rt USING (tool)
    LEFT JOIN aligned a USING (tool) LEFT JOIN aligned_rates ar USING (tool)
    ORDER BY s.tool = '{ALL}' DESC, s.calls DESC, s.tool
    """


def capacity(con: duckdb.DuckDBPyConnection, run: str, batch_size: int | None = None,
             compute_multiplier: int | None = None) -> pd.DataFrame:
    """What one run asked of each tool endpoint (and of all of them, ``(all)``) and of its grader
    (``(grader)``: a batched call counted once, ``calls_sql``), and, given a
    planned training step's ``batch_size`` and ``compute_multiplier``, what that step will ask.

    Observed: calls, calls_per_rollout, latency_p50/p95 (seconds), peak_calls_in_flight (a sweep
    over the calls' start and end times; peak_at: when), peak_rollouts_in_flight,
    peak_calls_per_s (the most calls starting within ``config.CAPACITY_RATE_WINDOW_S`` of one
    another, a sliding window). The projection
    assumes a step starts batch_size × compute_multiplier rollouts at once, each behaving like
    this run's: peak_share (the largest share of rollouts in a call at the same time since their
    start) and rate_share (calls per second per rollout in the busiest window since their start)
    times rollouts_per_step, and never below the run's own observed peaks (scaled down when the
    step has fewer rollouts than the run had in flight); projected_sandboxes is one sandbox per
    rollout alive at once.
    """
    label = resolve_runs(con, run)[0]
    if compute_multiplier is not None and batch_size is None:
        raise ValueError("compute_multiplier needs batch_size: the rollouts of a step are batch_size × compute_multiplier")
    per_step = None if batch_size is None else int(batch_size) * int(compute_multiplier or 1)
    df = run_sql(con, capacity_sql(), {"run": label, "window": config.CAPACITY_RATE_WINDOW_S,
                                       "rollouts_per_step": per_step}).df()
    df.attrs.update(run=label, batch_size=batch_size, compute_multiplier=compute_multiplier,
                    rollouts_per_step=per_step, rate_window_s=config.CAPACITY_RATE_WINDOW_S)
    if per_step is None:
        df = df.drop(columns=["rollouts_per_step", "projected_peak_calls_in_flight", "projected_peak_calls_per_s",
                              "projected_sandboxes"])
    return df


def in_flight_sql() -> str:
    """Calls in flight per tool, ``(all)`` and ``rollouts``, over time: the sweep's largest value
    in each of $points windows spanning the run ($run)."""
    return f"""
    WITH r AS (SELECT rollout_id, started_at, ended_at FROM rollouts WHERE run_id = $run),
    per_tool AS ({calls_sql()}),
    spans AS (SELECT tool AS scope, started_at, ended_at FROM per_tool
              UNION ALL SELECT '{ALL}', started_at, ended_at FROM per_tool WHERE tool <> '{GRADER}'
              UNION ALL SELECT 'rollouts', started_at, ended_at FROM r),
    timed AS (SELECT * FROM spans WHERE started_at IS NOT NULL AND ended_at IS NOT NULL),
    sweep AS ({sweep_sql('timed', 'scope', 'started_at', 'ended_at')}),
    bounds AS (SELECT min(t) AS t0, greatest(epoch(max(t)) - epoch(min(t)), 1e-6) / $points AS width FROM sweep)
    SELECT k AS scope, t0 + to_microseconds(floor((epoch(t) - epoch(t0)) / width)::BIGINT * (width * 1e6)::BIGINT) AS t,
           max(in_flight)::BIGINT AS in_flight
    FROM sweep, bounds GROUP BY ALL ORDER BY scope, t
    """


def in_flight(con: duckdb.DuckDBPyConnection, run: str, points: int = config.IN_FLIGHT_POINTS) -> pd.DataFrame:
    """(scope, t, in_flight): how many calls of each tool, of all tools (``(all)``), and how many
    rollouts (``rollouts``) were in flight over the run, the peak within each of ``points`` windows."""
    label = resolve_runs(con, run)[0]
    df = run_sql(con, in_flight_sql(), {"run": label, "points": int(points)}).df()
    df.attrs["run"] = label
    return df


def projection_error(con: duckdb.DuckDBPyConnection, profile_run: str, observed_run: str) -> pd.DataFrame:
    """How well one run's profile predicts another run's observed peaks, given the other run's
    number of rollouts (all started together): per tool, observed and projected peak calls in
    flight and calls per second, and the relative errors."""
    observed = capacity(con, observed_run)
    n = int(con.execute("SELECT count(*) FROM rollouts WHERE run_id = ?", [observed_run]).fetchone()[0])
    projected = capacity(con, profile_run, batch_size=n)
    out = observed[["tool", "peak_calls_in_flight", "peak_calls_per_s"]].merge(
        projected[["tool", "projected_peak_calls_in_flight", "projected_peak_calls_per_s"]], on="tool", how="outer")
    out["in_flight_error"] = out.projected_peak_calls_in_flight / out.peak_calls_in_flight - 1
    out["rate_error"] = out.projected_peak_calls_per_s / out.peak_calls_per_s - 1
    out.attrs.update(profile_run=profile_run, observed_run=observed_run, rollouts=n)
    return out



CHANGE_COLUMNS = ["run", "calls_per_rollout", "calls_per_step", "peak_share", "projected_peak_calls_in_flight",
                  "projected_peak_calls_per_s"]


def capacity_change(con: duckdb.DuckDBPyConnection, base: str, candidate: str, batch_size: int | None = None,
                    compute_multiplier: int | None = None) -> pd.DataFrame:
    """The tool endpoints' load of a planned step under ``base`` and under ``candidate``, side by
    side (``capacity``'s ``(all)`` row of each; a step of ``config.CAPACITY_PLANNED_STEP`` unless
    given), and ``attrs["sentence"]``: what changes for whoever runs the servers. Fewer calls per
    step need not mean a lower peak: a checkpoint whose calls come close together after the start
    (a larger ``peak_share``, the share of rollouts in a call at the same moment) loads the servers
    harder when a step starts all its rollouts at once, however few calls it makes in all."""
    if batch_size is None:
        batch_size = config.CAPACITY_PLANNED_STEP["batch_size"]
        compute_multiplier = config.CAPACITY_PLANNED_STEP["compute_multiplier"]
    rows = []
    for run in (base, candidate):
        plan = capacity(con, run, batch_size=batch_size, compute_multiplier=compute_multiplier)
        whole = plan[plan.tool == ALL]
        row = whole.iloc[0].to_dict() if len(whole) else {}
        per_step = plan.attrs["rollouts_per_step"]
        rows.append({"run": plan.attrs["run"], "calls_per_rollout": row.get("calls_per_rollout", 0.0),
                     "calls_per_step": row.get("calls_per_rollout", 0.0) * per_step,
                     "peak_share": row.get("peak_share"),
                     "projected_peak_calls_in_flight": row.get("projected_peak_calls_in_flight"),
                     "projected_peak_calls_per_s": row.get("projected_peak_calls_per_s")})
    df = pd.DataFrame(rows, columns=CHANGE_COLUMNS)
    df.attrs.update(batch_size=batch_size, compute_multiplier=compute_multiplier,
                    rollouts_per_step=int(batch_size) * int(compute_multiplier or 1),
                    sentence=_change_sentence(df))
    return df


def _change_sentence(df: pd.DataFrame) -> str:
    """What the candidate's step asks of the tool servers against the base's, and why a peak can
    rise while the calls fall."""
    from ...text import fmt

    b, c = df.iloc[0], df.iloc[1]
    if pd.isna(b.projected_peak_calls_in_flight) or pd.isna(c.projected_peak_calls_in_flight):
        return "One of the runs logged no timed tool calls: no projection to compare."
    fewer = c.calls_per_step < b.calls_per_step
    calls = (f"{c.run} makes {'fewer' if fewer else 'more'} tool calls per step than {b.run} "
             f"({fmt.number(c.calls_per_step)} against {fmt.number(b.calls_per_step)})")
    peak = (f"{fmt.count(c.projected_peak_calls_in_flight)} against {fmt.count(b.projected_peak_calls_in_flight)} "
            f"calls in flight, {fmt.number(c.projected_peak_calls_per_s)} against "
            f"{fmt.number(b.projected_peak_calls_per_s)} calls per second")
    higher = c.projected_peak_calls_in_flight > b.projected_peak_calls_in_flight
    if fewer == higher:  # the peak moves against the total
        bunch = "closer together" if fewer else "further apart"
        return (f"{calls}, yet its peak is {'higher' if higher else 'lower'}: {peak}. Its calls come {bunch} "
                f"after a rollout starts (at the busiest moment {fmt.share(c.peak_share)} of its rollouts are in a "
                f"call, against {fmt.share(b.peak_share)}), and a step starts all its rollouts at once. "
                "Size the servers for the peak, the bill for the calls.")
    return f"{calls}, and its peak is {'higher' if higher else 'lower'} too: {peak}."

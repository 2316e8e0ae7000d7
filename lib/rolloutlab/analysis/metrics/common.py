"""What every metric shares: run selection, which rollouts count for score statistics, and
each run's reward scale.

Infra errors and ungraded rollouts say nothing about the model, so by default they are left out
of every statistic (and counted: each result reports how many). ``include_errors=True`` puts them
back in at the run's lowest reward. A rollout without a score otherwise (model_error, truncated)
counts as the run's lowest reward too: 0 for rewards in [0, 1], -1 for a run whose rewards span
[-1, 1] (a broken rollout never scores above a wrong answer).

A run's scale (``scale_sql``): its **floor** — the low end of the reward range its producer
declared (``runs.meta.reward_range``), or 0, or its lowest observed score when that is lower — and
its **pass threshold**: the call's ``pass_threshold`` when given, else the run's own
(``runs.meta.pass_threshold``: what the producer declared, or ``set_reward_scale``), else
``config.PASS_THRESHOLD``. Every rollout selected carries both (``floor``, ``pass_at``).
"""
from __future__ import annotations

from typing import Iterable

import duckdb

from ... import config
from ...store.catalog import UnknownRunError, resolve_runs  # noqa: F401  (as run_sql)
from ...store.database import run_sql  # noqa: F401  (the metrics modules import it from here)

EXCLUDED_STATUSES = ("infra_error", "ungraded")


def training_runs_sql() -> str:
    return "SELECT run_id FROM runs WHERE step IS NOT NULL OR list_contains($also, run_id) ORDER BY step NULLS FIRST, run_id"


def training_runs(con: duckdb.DuckDBPyConnection, also: str | Iterable[str] = ()) -> list[str]:
    """The runs training curves are about: every run that carries a training step, and ``also``
    (the compared runs: a base without a step is drawn at step 0). Side runs — no step and not
    named: a capture against a demo server, another experiment's evaluation — are left out."""
    also = [also] if isinstance(also, str) else list(also)
    return [r for (r,) in run_sql(con, training_runs_sql(), {"also": resolve_runs(con, also) if also else []}).fetchall()]


def declared_sql(what: str, meta: str = "meta") -> str:
    """A number a run's ``meta`` declares (``reward_range[0]``, ``pass_threshold``), NULL when it
    is absent or not a finite number (meta comes from logs: never trusted)."""
    value = f"TRY_CAST(json_extract_string({meta}, '$.{what}') AS DOUBLE)"
    return f"CASE WHEN abs({value}) < 1e300 THEN {value} END"  # not NaN or infinite (Spark has no isfinite)


def scale_sql() -> str:
    """Per run of $runs: ``floor`` (what a rollout without a score counts as) and ``pass_at`` (the
    pass threshold: $threshold when not NULL, else the run's own, else config.PASS_THRESHOLD)."""
    return f"""
    SELECT r.run_id,
           least(coalesce({declared_sql('reward_range[0]', 'r.meta')}, 0.0), coalesce(o.lowest, 0.0)) AS floor,
           coalesce($threshold, {declared_sql('pass_threshold', 'r.meta')}, {float(config.PASS_THRESHOLD)!r}) AS pass_at
    FROM runs r LEFT JOIN (SELECT run_id, min(score) AS lowest FROM rollouts WHERE list_contains($runs, run_id)
                           GROUP BY run_id) o ON o.run_id = r.run_id
    WHERE list_contains($runs, r.run_id)
    """


def selected_sql() -> str:
    """Rollouts of the chosen runs with the score used for statistics (``s``), whether they are
    left out by default (``excluded``), and their run's scale (``floor``, ``pass_at``: a rollout
    passes when ``s >= pass_at``). Parameters: $runs (list), $include_errors, $threshold (NULL:
    each run's own)."""
    excluded = ", ".join(f"'{s}'" for s in EXCLUDED_STATUSES)
    return f"""
    SELECT o.*, o.status IN ({excluded}) AS excluded,
           CASE WHEN o.status IN ({excluded}) THEN k.floor ELSE coalesce(o.score, k.floor) END AS s,
           k.floor, k.pass_at
    FROM rollouts o JOIN ({scale_sql()}) k ON k.run_id = o.run_id
    WHERE list_contains($runs, o.run_id)
    """


def included_sql() -> str:
    """The rollouts that count: selected, less the excluded unless $include_errors."""
    return f"SELECT * FROM ({selected_sql()}) WHERE $include_errors OR NOT excluded"


def params(runs: list[str], include_errors: bool = False, **extra) -> dict:
    return {"runs": runs, "include_errors": include_errors, "threshold": None, **extra}


def threshold(value: float | None) -> float | None:
    """The pass threshold a call asks for: None lets each run use its own (``scale_sql``)."""
    return None if value is None else float(value)


def pass_at_sql(rollouts: str = "rollouts") -> str:
    """The pass threshold of the run of a row of ``rollouts`` (an alias), for queries that read the
    rollouts table itself rather than ``selected_sql``."""
    return (f"coalesce($threshold, (SELECT {declared_sql('pass_threshold')} FROM runs "
            f"WHERE runs.run_id = {rollouts}.run_id), {float(config.PASS_THRESHOLD)!r})")


SCALE_COLUMNS = ["run", "reward_floor", "pass_threshold", "reward_range_declared", "score_min", "score_max"]


def scale_table_sql() -> str:
    """Per run of $runs: its floor and pass threshold (``scale_sql``), the reward range its
    producer declared, and the lowest and highest score of its rollouts."""
    return f"""
    SELECT k.run_id AS run, k.floor AS reward_floor, k.pass_at AS pass_threshold,
           CASE WHEN {declared_sql('reward_range[0]', 'r.meta')} IS NOT NULL
                 AND {declared_sql('reward_range[1]', 'r.meta')} IS NOT NULL
                THEN [{declared_sql('reward_range[0]', 'r.meta')}, {declared_sql('reward_range[1]', 'r.meta')}]
           END AS reward_range_declared,
           o.score_min, o.score_max
    FROM ({scale_sql()}) k JOIN runs r USING (run_id)
    LEFT JOIN (SELECT run_id, min(score) AS score_min, max(score) AS score_max FROM rollouts
               WHERE list_contains($runs, run_id) GROUP BY run_id) o USING (run_id)
    ORDER BY list_position($runs, k.run_id)
    """


def reward_scale(con: duckdb.DuckDBPyConnection, runs: str | Iterable[str] | None = None,
                 pass_threshold: float | None = None):
    """One row per run: ``reward_floor`` (what a rollout without a score counts as),
    ``pass_threshold`` (the run's own unless ``pass_threshold`` is given), the reward range its
    producer declared (``[low, high]``, or None) and the lowest and highest score seen."""
    labels = resolve_runs(con, runs, expand=True)
    return run_sql(con, scale_table_sql(), params(labels, threshold=threshold(pass_threshold))).df()[SCALE_COLUMNS]


def common_threshold(con: duckdb.DuckDBPyConnection, runs: list[str], value: float | None = None) -> float | None:
    """The pass threshold ``runs`` are judged at: ``value`` when given, else theirs when they share
    one; None when their own thresholds differ (each is then judged at its own)."""
    if value is not None:
        return float(value)
    found = {float(r[0]) for r in run_sql(con, f"SELECT DISTINCT pass_at FROM ({scale_sql()})",
                                          params(list(runs))).fetchall()}
    return found.pop() if len(found) == 1 else (config.PASS_THRESHOLD if not found else None)


def set_reward_scale(con: duckdb.DuckDBPyConnection, run: str, reward_range: tuple[float, float] | None = None,
                     pass_threshold: float | None = None) -> dict:
    """Record a run's reward range (``(low, high)``: a rollout without a score counts as ``low``)
    and its pass threshold, in ``runs.meta``; every metric of the run uses them from then on (a
    call's ``pass_threshold=`` still wins). Returns the run's meta."""
    import json
    import math

    from ...store import database as store

    store.require_writer(con, "setting a run's reward scale")
    changes: dict = {}
    if reward_range is not None:
        low, high = (float(x) for x in reward_range)
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"reward_range={reward_range!r}: give (low, high), finite numbers with low < high")
        changes["reward_range"] = [low, high]
    if pass_threshold is not None:
        value = float(pass_threshold)
        if not math.isfinite(value):
            raise ValueError(f"pass_threshold={pass_threshold!r}: give a finite number")
        changes["pass_threshold"] = value
    names = resolve_runs(con, [run], expand=True)
    for name in names:
        con.execute("UPDATE runs SET meta = json_merge_patch(coalesce(meta, '{}'), ?::JSON) WHERE run_id = ?",
                    [json.dumps(changes), name])
    row = con.execute("SELECT meta FROM runs WHERE run_id = ?", [names[0]]).fetchone()
    return json.loads(row[0]) if row and row[0] else {}



def sample_texts_sql(rollouts: str) -> str:
    """Per rollout of the relation ``rollouts`` (a CTE of the caller with rollout_id, sample_id,
    run_id, source_id): its sample's ``prompt``, ``reference`` and ``meta`` (what the benchmark
    expects: ``expected_actions``, ``expected_outputs``, ``assertions``) — as the rollout's own file
    gave them first, then as its run's split did, then any. What the explorer, the label sheet and
    the failure features show of a sample."""
    order = "(s.source_id IS NOT DISTINCT FROM f.source_id) DESC, (s.split IS NOT DISTINCT FROM u.split) DESC"
    return f"""
    SELECT f.rollout_id, first(s.prompt ORDER BY {order}, s.prompt NULLS LAST) AS prompt,
           first(s.reference ORDER BY {order}, s.reference NULLS LAST) AS reference,
           first(s.meta ORDER BY {order}, s.meta NULLS LAST) AS meta
    FROM {rollouts} f JOIN samples s ON s.sample_id = f.sample_id LEFT JOIN runs u ON u.run_id = f.run_id
    GROUP BY f.rollout_id"""

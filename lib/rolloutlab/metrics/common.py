"""What every metric shares: run selection and which rollouts count for score statistics.

Infra errors and ungraded rollouts say nothing about the model, so by default they are left out
of every statistic (and counted: each result reports how many). ``include_errors=True`` puts them
back in with score 0. A rollout without a score otherwise (model_error, truncated) counts as 0.
"""
from __future__ import annotations

from typing import Iterable

import duckdb

from .. import config
from ..store import run_sql  # noqa: F401  (the metrics modules import it from here)

EXCLUDED_STATUSES = ("infra_error", "ungraded")


class UnknownRunError(ValueError):
    pass


def loaded_runs(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute("SELECT label FROM runs ORDER BY step NULLS FIRST, label").fetchall()]


def resolve_runs(con: duckdb.DuckDBPyConnection, runs: str | Iterable[str] | None) -> list[str]:
    """Run labels to query: all loaded runs for None; unknown labels raise with the known ones."""
    known = loaded_runs(con)
    if runs is None:
        return known
    wanted = [runs] if isinstance(runs, str) else list(runs)
    missing = [r for r in wanted if r not in known]
    if missing:
        raise UnknownRunError(f"run {', '.join(map(repr, missing))} not found; loaded runs: "
                              f"{', '.join(known) or 'none (ingest some logs first)'}")
    return wanted


def selected_sql() -> str:
    """Rollouts of the chosen runs with the score used for statistics (``s``) and whether they
    are left out by default (``excluded``). Parameters: $runs (list), $include_errors."""
    excluded = ", ".join(f"'{s}'" for s in EXCLUDED_STATUSES)
    return f"""
    SELECT *, status IN ({excluded}) AS excluded,
           CASE WHEN status IN ({excluded}) THEN 0.0 ELSE coalesce(score, 0.0) END AS s
    FROM rollouts WHERE list_contains($runs, run_id)
    """


def included_sql() -> str:
    """The rollouts that count: selected, less the excluded unless $include_errors."""
    return f"SELECT * FROM ({selected_sql()}) WHERE $include_errors OR NOT excluded"


def params(runs: list[str], include_errors: bool = False, **extra) -> dict:
    return {"runs": runs, "include_errors": include_errors, **extra}


def threshold(value: float | None) -> float:
    return config.PASS_THRESHOLD if value is None else float(value)


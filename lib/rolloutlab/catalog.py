"""What is loaded: runs, sources and rejects."""
from __future__ import annotations

import duckdb
import pandas as pd


def runs_sql() -> str:
    return """
    WITH r AS (
        SELECT run_id, count(*) AS rollouts, count(DISTINCT sample_id) AS samples,
               count(*) FILTER (WHERE status = 'infra_error') AS infra_errors,
               count(*) FILTER (WHERE sample_id IS NULL) AS without_sample,
               list(DISTINCT source_id) AS source_ids
        FROM rollouts GROUP BY run_id)
    SELECT runs.label AS run, runs.model, runs.checkpoint, runs.step, runs.split,
           r.rollouts, r.samples,
           (SELECT coalesce(sum(s.n_rejected), 0) FROM sources s
            WHERE list_contains(r.source_ids, s.source_id))::BIGINT AS rejected_in_sources,
           r.infra_errors, r.without_sample
    FROM runs JOIN r USING (run_id)
    ORDER BY runs.step NULLS FIRST, runs.label
    """


def runs(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """One row per run: label, model, step, split, rollout and sample counts, rejects in its sources,
    infra errors, and rollouts that never reached a dataset sample (``without_sample``: not samples)."""
    return con.execute(runs_sql()).df()


def sources_sql() -> str:
    return """
    SELECT source_id, path, format, n_records AS records, n_records - n_rejected AS loaded,
           n_rejected AS rejected, bytes, sha256, ingested_at
    FROM sources ORDER BY source_id
    """


def sources(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """One row per ingested file."""
    return con.execute(sources_sql()).df()


def run_sources_sql() -> str:
    """The files that loaded any rollout of run $run: those its rollouts came from, and (for
    endpoint logs) every file that holds one of their events."""
    return """
    SELECT source_id FROM rollouts WHERE run_id = $run
    UNION
    SELECT e.source_id FROM endpoint_events e JOIN rollouts r USING (rollout_id) WHERE r.run_id = $run
    """


def rejects_sql() -> str:
    return f"""
    SELECT r.source_id, s.path, r.line_no, r.reason, r.raw
    FROM rejects r JOIN sources s USING (source_id)
    WHERE ($source_id IS NULL OR r.source_id = $source_id)
      AND ($run IS NULL OR r.source_id IN ({run_sources_sql()}))
    ORDER BY r.source_id, r.line_no
    LIMIT $limit
    """


def rejects(con: duckdb.DuckDBPyConnection, source_id: int | None = None, run: str | None = None,
            limit: int | None = None) -> pd.DataFrame:
    """Every record that could not be loaded, with file, line and reason; only those of one
    file (``source_id``) or of the files that loaded a run (``run``) when given."""
    return con.execute(rejects_sql(), {"source_id": source_id, "run": run,
                                       "limit": None if limit is None else int(limit)}).df()

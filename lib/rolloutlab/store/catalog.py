"""What is loaded: runs (and the experiments they group into), sources and rejects, and which runs
a name means (``resolve_runs``)."""
from __future__ import annotations

from typing import Iterable

import duckdb
import pandas as pd


RUN_COLUMNS = ["run", "label", "evaluation", "model", "checkpoint", "step", "split", "rollouts", "samples",
               "mean_score", "reported_score", "score_min", "score_max", "reward_range", "pass_threshold", "files",
               "duplicates_in_sources", "rejected_in_sources", "infra_errors", "without_sample", "started_at",
               "ended_at", "paths"]


def runs_sql() -> str:
    """One row per run. Its files are those its rollouts came from and those that repeated them
    (duplicates of a twin or a copy); ``rejected_in_sources`` sums what those files rejected (a
    rejected record has no run). ``reported_score`` is the figure the producer wrote in its own
    header (an Inspect log's first metric), beside the mean computed from the rollouts. The run's
    rewards: the lowest and highest score of its rollouts, the range its producer declared
    (``reward_range``, e.g. [-1, 1] for Gemini's clipped rewards) and its own pass threshold
    (``pass_threshold``; NULL: ``config.PASS_THRESHOLD``)."""
    from ..analysis.metrics.common import declared_sql

    low, high, passing = (declared_sql(w, "runs.meta") for w in ("reward_range[0]", "reward_range[1]", "pass_threshold"))
    return f"""
    WITH r AS (
        SELECT run_id, count(*) AS rollouts, count(DISTINCT sample_id) AS samples,
               avg(score) FILTER (WHERE status NOT IN ('infra_error', 'ungraded')) AS mean_score,
               count(*) FILTER (WHERE status = 'infra_error') AS infra_errors,
               count(*) FILTER (WHERE sample_id IS NULL) AS without_sample,
               min(started_at) AS started_at, max(coalesce(ended_at, started_at)) AS ended_at,
               min(score) AS score_min, max(score) AS score_max
        FROM rollouts GROUP BY run_id),
    files AS (
        SELECT run_id, source_id FROM rollouts
        UNION SELECT o.run_id, d.source_id FROM duplicates d JOIN rollouts o USING (rollout_id)),
    dups AS (SELECT o.run_id, count(*) AS n FROM duplicates d JOIN rollouts o USING (rollout_id) GROUP BY o.run_id),
    f AS (SELECT files.run_id, count(*) AS files, sum(s.n_rejected) AS rejected,
                 list(s.path ORDER BY s.path) AS paths
          FROM files JOIN sources s USING (source_id) GROUP BY files.run_id),
    SELECT runs.run_id AS run, runs.label,
           CASE WHEN runs.evaluation IS NOT NULL THEN coalesce(runs.meta->>'tag', runs.evaluation) END AS evaluation,
           runs.model, runs.checkpoint, runs.step, runs.split,
           r.rollouts, r.samples, r.mean_score,
           TRY_CAST(json_extract_string(runs.meta, '$.reported.value') AS DOUBLE) AS reported_score,
           r.score_min, r.score_max,
           CASE WHEN {low} IS NOT NULL AND {high} IS NOT NULL THEN [{low}, {high}] END AS reward_range,
           {passing} AS pass_threshold,
           coalesce(f.files, 0) AS files, coalesce(d.n, 0)::BIGINT AS duplicates_in_sources,
           coalesce(f.rejected, 0)::BIGINT AS rejected_in_sources, r.infra_errors, r.without_sample,
           r.started_at, r.ended_at, f.paths
    FROM runs JOIN r USING (run_id) LEFT JOIN f USING (run_id) LEFT JOIN dups d USING (run_id)
    ORDER BY runs.step NULLS FIRST, runs.label, runs.split NULLS FIRST, runs.run_id
    """


EXPERIMENT_COLUMNS = ["label", "runs", "models", "steps", "splits", "evaluations", "rollouts", "samples", "files",
                      "duplicates_in_sources", "rejected_in_sources", "started_at", "ended_at", "run_names"]


def experiments_sql() -> str:
    """One row per label: the runs a person reads as one experiment (a model on a task, a
    training job over its steps and splits), with their files, counts and time span."""
    return f"""
    WITH listed AS ({runs_sql()}),
    files AS (  -- a file that holds several runs of the label counts once
        SELECT u.label, count(*) AS files, sum(s.n_rejected) AS rejected FROM (
            SELECT DISTINCT u.label, x.source_id FROM (
                SELECT run_id, source_id FROM rollouts
                UNION SELECT o.run_id, d.source_id FROM duplicates d JOIN rollouts o USING (rollout_id)) x
            JOIN runs u USING (run_id)) u
        JOIN sources s USING (source_id) GROUP BY u.label)
    SELECT label, count(*) AS runs, list(DISTINCT model ORDER BY model) FILTER (WHERE model IS NOT NULL) AS models,
           list(DISTINCT step ORDER BY step) FILTER (WHERE step IS NOT NULL) AS steps,
           list(DISTINCT split ORDER BY split) FILTER (WHERE split IS NOT NULL) AS splits,
           count(DISTINCT evaluation) AS evaluations, sum(rollouts)::BIGINT AS rollouts,
           sum(samples)::BIGINT AS samples, coalesce(any_value(f.files), 0) AS files,
           sum(duplicates_in_sources)::BIGINT AS duplicates_in_sources,
           coalesce(any_value(f.rejected), 0)::BIGINT AS rejected_in_sources,
           min(started_at) AS started_at, max(ended_at) AS ended_at,
           list(run ORDER BY step NULLS FIRST, split NULLS FIRST, run) AS run_names
    FROM listed LEFT JOIN files f USING (label)
    GROUP BY label ORDER BY min(step) NULLS FIRST, label
    """


def runs(con: duckdb.DuckDBPyConnection, group: bool = False) -> pd.DataFrame:
    """One row per run: its name, label, evaluation, model, step, split, rollout and sample counts,
    mean score (and the producer's own figure where its header gives one), its files, the
    duplicates and rejects in them, infra errors, rollouts that never reached a dataset sample
    (``without_sample``), and the time span. ``group=True``: one row per label — the runs that
    are one experiment — with the names of its runs (``rl.merge_runs`` makes runs one)."""
    if group:
        df = con.execute(experiments_sql()).df()
        return df[EXPERIMENT_COLUMNS]
    return con.execute(runs_sql()).df()[RUN_COLUMNS]


def sources_sql() -> str:
    return """
    SELECT source_id, path, format, n_records AS records,
           n_records - n_rejected - coalesce(n_duplicates, 0) AS loaded, coalesce(n_duplicates, 0) AS duplicates,
           n_rejected AS rejected, bytes, sha256, ingested_at
    FROM sources ORDER BY source_id
    """


def sources(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """One row per ingested file: records read = loaded + duplicates + rejected."""
    return con.execute(sources_sql()).df()


def run_sources_sql() -> str:
    """The files that loaded any rollout of run $run: those its rollouts came from, those that
    repeated them, and (for endpoint logs) every file that holds one of their events."""
    return """
    SELECT source_id FROM rollouts WHERE run_id = $run
    UNION
    SELECT d.source_id FROM duplicates d JOIN rollouts r USING (rollout_id) WHERE r.run_id = $run
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


class UnknownRunError(ValueError):
    pass


def loaded_runs(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute("SELECT run_id FROM runs ORDER BY step NULLS FIRST, run_id").fetchall()]


def resolve_runs(con: duckdb.DuckDBPyConnection, runs: str | Iterable[str] | None, expand: bool = False) -> list[str]:
    """Runs to query: all loaded runs for None. A name is a run; a label whose records are several
    runs (steps, splits, evaluations) names them all where ``expand`` (summary, by_step, cost: every
    run of a training job), else it must name one. Unknown names raise with the known runs."""
    known = loaded_runs(con)
    if runs is None:
        return known
    wanted = [runs] if isinstance(runs, str) else list(runs)
    missing = [r for r in wanted if r not in known]
    if not missing:
        return wanted
    labels = {}
    for label, run in con.execute("SELECT label, run_id FROM runs WHERE list_contains(?, label) "
                                  "ORDER BY step NULLS FIRST, split NULLS FIRST, run_id", [missing]).fetchall():
        labels.setdefault(label, []).append(run)
    unknown = [r for r in missing if r not in labels]
    if unknown:
        raise UnknownRunError(f"run {', '.join(map(repr, unknown))} not found; loaded runs: "
                              f"{', '.join(known) or 'none (ingest some logs first)'}")
    several = {r: labels[r] for r in missing if len(labels[r]) > 1}
    if several and not expand:
        label, names = next(iter(several.items()))
        raise UnknownRunError(f"{label!r} is a label of {len(names)} runs ({', '.join(names)}): name one of them "
                              "(rolloutlab runs lists them)")
    return [run for r in wanted for run in (labels[r] if r in labels else [r])]


def resolve_run(con: duckdb.DuckDBPyConnection, run: str) -> str:
    """The one run ``run`` names (a run, or a label of one run)."""
    return resolve_runs(con, [run])[0]

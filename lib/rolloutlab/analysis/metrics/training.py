"""Step-level metrics a trainer reports (``training_metrics``): OpenAI fine-tuning job events and
checkpoints, ART history. A long frame, one row per (job, step, split, grader, metric)."""
from __future__ import annotations

import duckdb
import pandas as pd

from .common import run_sql

COLUMNS = ["job", "step", "split", "grader", "metric", "value"]


def training_metrics_sql() -> str:
    """The same metric saved twice (overlapping API pages, a file loaded under two names) is one
    row: the value from the file loaded last."""
    return """
    SELECT job, step, split, grader, metric, arg_max(value, source_id) AS value
    FROM training_metrics
    WHERE $job IS NULL OR job = $job
    GROUP BY job, step, split, grader, metric
    ORDER BY job, split, grader, metric, step
    """


def training_metrics(con: duckdb.DuckDBPyConnection, job: str | None = None) -> pd.DataFrame:
    """``job, step, split, grader, metric, value``: split ``train`` / ``valid``; ``grader`` empty
    for whole-run metrics; ``metric`` without its split prefix (``reward_mean``,
    ``reasoning_tokens_mean``, ``model_grader_server_error_mean``, ``execution_latency_mean``,
    ``step_sampling_seconds`` ...). ``job=None``: every job."""
    df = run_sql(con, training_metrics_sql(), {"job": job}).df()
    return df[COLUMNS]


def training_jobs(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The fine-tuning jobs loaded: model, method, status, hyperparameters (JSON text)."""
    return con.execute("""SELECT DISTINCT ON (job) job, model, fine_tuned_model, method, status, hyperparameters, meta
                          FROM training_jobs ORDER BY job, source_id DESC""").df()

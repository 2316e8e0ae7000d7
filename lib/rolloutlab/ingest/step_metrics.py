"""What formats of step-level metrics (OpenAI job events, ART history) hand to the database:
rows of ``training_metrics`` and the records that could not be read, in two statements."""
from __future__ import annotations

import duckdb

from .lines import STAGED_REJECTS, add_rejects


def write(con: duckdb.DuckDBPyConnection, rows: list[tuple], rejects: list[tuple], source_id: int) -> None:
    """``rows``: (job, step, split, grader, metric, value); ``rejects``: (line_no, raw, reason),
    staged for the ingest to file under this source."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE {STAGED_REJECTS} (line_no BIGINT, raw VARCHAR, reason VARCHAR)")
    add_rejects(con, rejects)
    if rows:
        cols = list(zip(*rows))
        con.execute("""INSERT INTO training_metrics
                       SELECT unnest($job), unnest($step), unnest($split), unnest($grader), unnest($metric),
                              unnest($value), $sid""",
                    {"job": list(cols[0]), "step": list(cols[1]), "split": list(cols[2]), "grader": list(cols[3]),
                     "metric": list(cols[4]), "value": [float(v) for v in cols[5]], "sid": source_id})

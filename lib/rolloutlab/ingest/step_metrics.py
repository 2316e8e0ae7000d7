"""What formats of step-level metrics (OpenAI job events, ART history, Bedrock and Gemini jobs)
hand to the database: rows of ``training_metrics`` and the records that could not be read, in two
statements."""
from __future__ import annotations

from typing import Callable, Iterable

import duckdb

from .context import LoadContext, LoadResult
from .convert import Item, guarded, raw_text
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


def load_records(ctx: LoadContext, records: Iterable[tuple[int, object, str, str | None]],
                 rows_of: Callable[[dict], list[tuple]], notes: list[str] | None = None) -> LoadResult:
    """Load (line number, parsed record or None, raw text, problem) records, each mapped by
    ``rows_of(record)`` to (job, step, split, grader, metric, value) rows; a record it cannot read
    (a ``BadField``, a problem, not an object) is a reject with its line. Blank records count as
    nothing."""
    rows, rejects, n = [], [], 0
    for number, rec, raw, problem in records:
        if rec is None and problem is None:
            continue
        n += 1
        if problem or not isinstance(rec, dict):
            rejects.append((number, raw_text(raw), f"line {number}: {problem or 'not a JSON object'}"))
            continue
        item = guarded(f"line {number}", rec, lambda: Item("", record={"rows": rows_of(rec)}))
        if item.record is None:
            rejects.append((number, raw_text(raw), f"line {number}: {item.reason}"))
        else:
            rows.extend(item.record["rows"])
    write(ctx.con, rows, rejects, ctx.source_id)
    return LoadResult(n_records=n, n_rejected=len(rejects), notes=notes or [])

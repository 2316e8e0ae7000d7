"""The Parquet lake: the canonical tables as Parquet files, for engines beyond one DuckDB file.

Layout (docs/scale.md)::

    DIR/rolloutlab-lake.json            the manifest: lake and schema version, tables, row counts
    DIR/rollouts/run_id=<run>/*.parquet  per-rollout tables, Hive-partitioned by run; the files
    DIR/tool_calls/run_id=<run>/...      hold run_id too (tool_calls, grades, messages carry their rollout's run)
    DIR/runs.parquet ...                 the small tables whole

zstd-compressed. ``export`` writes one from a database, from one snapshot; ``read_lake`` (what
``ingest`` does with a lake folder) loads one back; ``connect_lake`` opens DuckDB views over one
without loading it. Both readers treat the lake as untrusted input: the manifest's tables, columns,
types and paths must be the store's own (nothing of it reaches SQL as text), and the files must
hold the manifest's row counts and every row the rollouts it names (``check_lake``).
"""
from __future__ import annotations

import functools
import json
import os
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import duckdb
import pandas as pd
from tqdm.auto import tqdm

from .. import config
from . import database as store
from .folders import remove_stale, staging_prefix
from ..version import __version__

MANIFEST = "rolloutlab-lake.json"
# 2: the per-rollout tables' files hold run_id (in version 1 only their folder names did, which
# Spark decodes byte by byte: a run "modèle" came back "modÃ¨le")
LAKE_VERSION = 2
PARTITION = "run_id"
# the store's own bookkeeping, not exported (a lake's runs get their keys again when read back)
INTERNAL_TABLES = ("rolloutlab_meta", "run_keys")
_CREATE_TABLE = re.compile(r"^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)


def _schema_tables() -> tuple[str, ...]:
    """The canonical tables, in the order of the store's DDL."""
    names: list[str] = []
    for ddl in store.SCHEMA_DDL:
        match = _CREATE_TABLE.match(ddl)
        if match and match.group(1) not in INTERNAL_TABLES and match.group(1) not in names:
            names.append(match.group(1))
    return tuple(names)


# per-rollout tables: partitioned by their rollout's run
PARTITIONED = ("rollouts", *store.ROLLOUT_CHILD_TABLES)
WHOLE = tuple(t for t in _schema_tables() if t not in PARTITIONED)
TABLES = PARTITIONED + WHOLE


class LakeError(ValueError):
    """A lake that cannot be written or read, with what to do."""


def _lit(value: str) -> str:
    """A SQL string literal (COPY's target and a view's files cannot be bound parameters)."""
    return "'" + str(value).replace("'", "''") + "'"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_schema(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    """(column, DuckDB type) of a table, in order."""
    return [tuple(r) for r in con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? AND table_schema = 'main' "
        "ORDER BY ordinal_position", [table]).fetchall()]


def table_columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    return [name for name, _ in table_schema(con, table)]


@functools.cache
def canonical_schema() -> Mapping[str, tuple[tuple[str, str], ...]]:
    """(column, type) of every lake table as the store's own schema (``store.SCHEMA_DDL``) makes
    them, built once in an in-memory DuckDB. The only columns and types a lake may have."""
    con = duckdb.connect(":memory:")
    try:
        for ddl in store.SCHEMA_DDL:
            con.execute(ddl)
        schema = {table: tuple(table_schema(con, table)) for table in TABLES}
    finally:
        con.close()
    for table, columns in schema.items():
        names = {c for c, _ in columns}
        if not columns or (table in PARTITIONED and "rollout_id" not in names) or not names & {"source_id", "rollout_id"}:
            raise RuntimeError(f"lake.py cannot export the store's table {table!r}: a lake table needs a source_id "
                               "(or, per rollout, a rollout_id) column to be read back; teach read_lake about it")
    return MappingProxyType(schema)


def _columns(table: str) -> list[str]:
    return [c for c, _ in canonical_schema()[table]]


def expected_path(table: str) -> str:
    """Where a table lives in the lake, relative to its folder: the only path a manifest may give."""
    return table if table in PARTITIONED else f"{table}.parquet"


def export_query_sql(table: str, columns: list[str]) -> str:
    """The rows of one table as exported: per-rollout child tables gain their rollout's run."""
    cols = ", ".join(f"t.{_q(c)}" for c in columns)
    if table in PARTITIONED and table != "rollouts":
        return f"SELECT {cols}, r.run_id FROM {_q(table)} t JOIN rollouts r USING (rollout_id)"
    return f"SELECT {cols} FROM {_q(table)} t"


STAGING_TAG = "partial"  # an export's staging folder beside its target: .DIR.partial-PID


def remove_stale_staging(target: Path) -> list[Path]:
    """Remove the staging folders (``.NAME.partial-PID``) that exports to ``target`` killed before
    they finished left behind: those whose process is gone. Returns what was removed."""
    return remove_stale(target.parent, staging_prefix(target, STAGING_TAG))


def export(con, to: str | os.PathLike, progress: bool | None = None) -> pd.DataFrame:
    """Write every canonical table of ``con`` (a DuckDB connection or a ``SharedReader``) to the
    lake folder ``to`` (which must not exist or be empty). Every table is read from one snapshot
    (``store.snapshot``: a writer committing meanwhile waits, or is not seen), so the lake is one
    consistent state. Written beside it first and renamed at the end, so a lake is never half
    there; what a killed export left beside it is removed. Returns one row per table: table,
    rows, partitioned, path."""
    target = Path(to)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise LakeError(f"{target} exists and is not empty: export to a new folder (a lake is written whole)")
    remove_stale_staging(target)
    staging = target.with_name(f"{staging_prefix(target, STAGING_TAG)}{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    tables, disable = {}, config.progress_disabled() if progress is None else not progress
    try:
        with store.snapshot(con) as snap:
            for table in tqdm(TABLES, desc="export", unit="table", disable=disable):
                columns = _columns(table)
                query = export_query_sql(table, columns)
                path = staging / expected_path(table)
                # COPY writes to the path it is given (no globbing: tested with [ ] * ?); it returns the rows written
                if table in PARTITIONED:
                    options = (f"FORMAT parquet, COMPRESSION zstd, PARTITION_BY ({_q(PARTITION)}), "
                               "WRITE_PARTITION_COLUMNS true")
                    rows = snap.execute(f"COPY ({query}) TO {_lit(path)} ({options})").fetchone()[0]
                    path.mkdir(exist_ok=True)  # no rows: no partition, an empty folder
                else:
                    rows = snap.execute(f"COPY ({query}) TO {_lit(path)} (FORMAT parquet, COMPRESSION zstd)").fetchone()[0]
                tables[table] = {"rows": int(rows), "path": path.name,
                                 "partition_by": PARTITION if table in PARTITIONED else None,
                                 "columns": columns, "types": [t for _, t in canonical_schema()[table]]}
        meta = {"format": "rolloutlab-lake", "lake_version": LAKE_VERSION, "schema_version": store.SCHEMA_VERSION,
                "rolloutlab": __version__, "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "compression": "zstd", "tables": tables}
        (staging / MANIFEST).write_text(json.dumps(meta, indent=2) + "\n")
        if target.exists():
            target.rmdir()
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return pd.DataFrame([{"table": t, "rows": v["rows"], "partitioned": v["partition_by"] is not None,
                          "path": str(target / v["path"])} for t, v in tables.items()])


def is_lake(path: str | os.PathLike) -> bool:
    return (Path(path) / MANIFEST).is_file()


def _shown(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _checked_table(file: Path, table: str, info) -> dict:
    """One table of a manifest, every field checked against what this rolloutlab writes."""
    def refuse(what: str):
        raise LakeError(f"{file}: table {table!r}: {what}; export the lake again with this release "
                        "(a lake's manifest is written by rolloutlab export, never by hand)")

    if not isinstance(info, dict):
        refuse(f"{_shown(info)} is not an object")
    canonical = canonical_schema()[table]
    columns, types = info.get("columns"), info.get("types")
    want_columns, want_types = [c for c, _ in canonical], [t for _, t in canonical]
    if columns != want_columns:
        where = next((f"column {i + 1} is {_shown(c)}, expected {w!r}" for i, (c, w)
                      in enumerate(zip(columns, want_columns)) if c != w), None) if isinstance(columns, list) else None
        refuse(f"columns {where or _shown(columns)} differ from this rolloutlab's (schema version "
               f"{store.SCHEMA_VERSION}: {', '.join(want_columns)})")
    if types != want_types:
        where = next((f"{c!r} is {_shown(t)}, expected {w!r}" for c, t, w in zip(want_columns, types, want_types)
                      if t != w), None) if isinstance(types, list) and len(types) == len(want_types) else None
        refuse(f"types ({where or _shown(types)}) differ from this rolloutlab's (schema version {store.SCHEMA_VERSION})")
    if info.get("path") != expected_path(table):
        refuse(f"path {_shown(info.get('path'))}, expected {expected_path(table)!r} (a lake's files are inside its folder)")
    rows = info.get("rows")
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
        refuse(f"rows {_shown(rows)}, expected a whole number of rows (0 or more)")
    partition = PARTITION if table in PARTITIONED else None
    if info.get("partition_by") != partition:
        refuse(f"partition_by {_shown(info.get('partition_by'))}, expected {partition!r}")
    return {"rows": rows, "path": expected_path(table), "partition_by": partition,
            "columns": want_columns, "types": want_types}


def manifest(path: str | os.PathLike) -> dict:
    """The lake's manifest, checked field by field: a lake of another version, or one whose
    tables, columns, types, paths, row counts or partitioning are not what this rolloutlab writes,
    is refused with what to do. Its ``tables`` hold only checked values (the store's own columns
    and types, the expected paths)."""
    file = Path(path) / MANIFEST
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise LakeError(f"{file}: not a readable lake manifest ({exc}); export the lake again") from exc
    if not isinstance(data, dict) or data.get("format") != "rolloutlab-lake":
        raise LakeError(f"{file}: not a rolloutlab lake manifest (no \"format\": \"rolloutlab-lake\"); "
                        "export the lake again with rolloutlab export")
    if data.get("lake_version") != LAKE_VERSION:
        raise LakeError(f"{file}: lake version {_shown(data.get('lake_version'))}, this rolloutlab reads version "
                        f"{LAKE_VERSION}: ingest it with the release that wrote it (rolloutlab ingest DIR --db NEW.duckdb) "
                        "and export it again with this one")
    if data.get("schema_version") != store.SCHEMA_VERSION:
        raise LakeError(f"{file}: tables of schema version {_shown(data.get('schema_version'))}, this rolloutlab uses "
                        f"{store.SCHEMA_VERSION}: ingest the lake with the release that wrote it, open the database "
                        "with this one (it upgrades in place), and export again")
    tables = data.get("tables")
    if not isinstance(tables, dict):
        raise LakeError(f"{file}: \"tables\" is not an object of tables; export the lake again")
    missing = [t for t in TABLES if t not in tables]
    if missing:
        raise LakeError(f"{file}: tables {', '.join(map(repr, missing))} missing; export the lake again")
    unknown = [t for t in tables if t not in TABLES]
    if unknown:
        raise LakeError(f"{file}: tables {', '.join(_shown(t, 40) for t in unknown)} are not rolloutlab tables; "
                        "export the lake again")
    return {**data, "tables": {t: _checked_table(file, t, tables[t]) for t in TABLES}}


def empty_table_sql(table: str) -> str:
    """No rows, with the table's columns and types from the store's schema (never the manifest's)."""
    return "SELECT " + ", ".join(f"CAST(NULL AS {t}) AS {_q(c)}" for c, t in canonical_schema()[table]) + " LIMIT 0"


def table_files(lake: str | os.PathLike, table: str) -> list[Path]:
    """The Parquet files of one table of a (local) lake."""
    path = Path(lake) / expected_path(table)
    if table in PARTITIONED:
        return sorted(path.rglob("*.parquet")) if path.is_dir() else []
    return [path] if path.is_file() else []


def _check_files(lake: str | os.PathLike) -> None:
    for table in WHOLE:
        path = Path(lake) / expected_path(table)
        if not path.is_file():
            raise LakeError(f"{path} is missing: the lake is incomplete; copy it again from where it came, "
                            "or export it again")


def scan_sql(lake: str | os.PathLike, table: str, filename: bool = False) -> str:
    """A query over one table of a local lake, with the store's columns in order (and, with
    ``filename``, the file of each row). Paths are taken literally (a lake folder may be called
    ``lake[1]``); run_id is read from the files."""
    root = Path(lake)
    cols = ", ".join(_q(c) for c in _columns(table)) + (", filename" if filename else "")
    name = ", filename = true" if filename else ""
    if table in PARTITIONED:
        if not table_files(lake, table):  # no partition, no file
            return f"SELECT *{', NULL AS filename' if filename else ''} FROM ({empty_table_sql(table)})"
        pattern = store.glob_literal(root / expected_path(table)) + "/**/*.parquet"
        return f"SELECT {cols} FROM read_parquet({_lit(pattern)}, hive_partitioning = false{name})"
    return f"SELECT {cols} FROM read_parquet({_lit(store.glob_literal(root / expected_path(table)))}{name})"


def views() -> dict[str, str]:
    """Each table as the (quoted) name of a view of it: ``check_lake``'s relations on a connection
    that has them (``connect_lake``, a SparkConnection)."""
    return {t: _q(t) for t in TABLES}


# (table, column, referenced table, its column, what the column names): rows a lake must not lack
REFERENCES = (*((child, "rollout_id", "rollouts", "rollout_id", "rollout") for child in store.ROLLOUT_CHILD_TABLES),
              ("rollouts", "source_id", "sources", "source_id", "source"),
              ("rollouts", "run_id", "runs", "run_id", "run"))


def _orphans_sql(relations: Mapping[str, str], table: str, column: str, other: str, other_column: str) -> str:
    return (f"FROM {relations[table]} a WHERE a.{_q(column)} IS NULL OR NOT EXISTS "
            f"(SELECT 1 FROM {relations[other]} b WHERE b.{_q(other_column)} = a.{_q(column)})")


def consistency_sql(relations: Mapping[str, str]) -> str:
    """One row: the rows of every table (``n0``…), then, per ``REFERENCES``, the rows naming what
    the lake lacks (``o0``…). ``relations``: table -> a view name or a parenthesised query."""
    parts = [f"(SELECT count(*) FROM {relations[t]}) AS n{i}" for i, t in enumerate(TABLES)]
    parts += [f"(SELECT count(*) {_orphans_sql(relations, *ref[:4])}) AS o{i}" for i, ref in enumerate(REFERENCES)]
    return "SELECT " + ", ".join(parts)


def check_lake(con, lake: str | os.PathLike, relations: Mapping[str, str], tables: Mapping[str, dict],
               types: bool = True) -> None:
    """Refuse (LakeError) a lake whose tables do not hold the manifest's row counts, or whose
    rows name what it lacks: a tool call, grade or message whose rollout is not in rollouts, a
    rollout whose source is not in sources or whose run is not in runs. With ``types``, the
    files' columns must have the store's types. ``con``: DuckDB, or a SparkConnection."""
    where = f"{lake}: "
    again = ("the lake is not consistent (written by an export that read its tables at different moments, or "
             "changed since); export it again from the database")
    if types:
        for table in TABLES:
            found = [tuple(r[:2]) for r in con.execute(f"DESCRIBE SELECT * FROM {relations[table]}").fetchall()]
            for (column, want), (_, got) in zip(canonical_schema()[table], found):
                if got != want:
                    raise LakeError(f"{where}{table}: column {column!r} is {got} in its files, expected {want}; {again}")
    row = con.execute(consistency_sql(relations)).fetchone()
    for table, n in zip(TABLES, row[:len(TABLES)]):
        if n != tables[table]["rows"]:
            raise LakeError(f"{where}{table} has {n} rows, its manifest says {tables[table]['rows']}: the lake is "
                            "incomplete or was changed after export (a file missing, cut off or added); copy it "
                            "again from where it came, or export it again")
    for (table, column, other, other_column, what), n in zip(REFERENCES, row[len(TABLES):]):
        if n:
            example = con.execute(f"SELECT a.{_q(column)} {_orphans_sql(relations, table, column, other, other_column)} "
                                  "LIMIT 1").fetchone()[0]
            raise LakeError(f"{where}{table} has {n} rows whose {what} is not in {other} (e.g. {_shown(example)}): "
                            f"{again}")


@functools.cache
def value_rules() -> Mapping[str, tuple]:
    """Per table, (column, the ``Field`` its log value is checked by): a lake is held to the rules
    of a log (ingest/formats: native's fields, the endpoint events'), and (table, later, earlier)
    times that must not run backwards."""
    from ..ingest.fields import Field
    from ..ingest.formats import native, rft_endpoint

    rollout, call, grade, message, event = ({f.name: f for f in fields} for fields in (
        native.ROLLOUT_FIELDS, native.TOOL_CALL_FIELDS, native.GRADE_FIELDS, native.MESSAGE_FIELDS,
        rft_endpoint.FIELDS))
    count = Field("count", "integer", bits=32, minimum=0)
    finite = Field("value", "number")
    rules = {
        "rollouts": [(c, rollout[c]) for c in ("attempt", "started_at", "ended_at", "latency_s", "status", "score",
                                               "cost_usd", "input_tokens", "output_tokens", "reasoning_tokens",
                                               "cached_input_tokens")] + [("n_turns", count), ("n_tool_calls", count)],
        "tool_calls": [("call_idx", count), ("turn_idx", call["turn"])]
                      + [(c, call[c]) for c in ("started_at", "ended_at", "latency_s", "output_chars")],
        "grades": [(c, grade[c]) for c in ("score", "weight", "latency_s")],
        "messages": [("msg_idx", count), ("turn_idx", message["turn"]), ("ts", message["ts"])],
        "runs": [("step", rollout["step"])],
        "endpoint_events": [(c, event[c]) for c in ("started_at", "ended_at", "http_status", "output_chars", "step",
                                                    "score", "ts", "grader_latency_s")],
        "training_metrics": [("value", finite)],
        "labels": [("value", finite), ("labelled_at", Field("labelled_at", "timestamp"))],
        "sources": [(c, Field(c, "integer", minimum=0)) for c in ("bytes", "n_records", "n_rejected")],
    }
    return MappingProxyType({t: tuple(r) for t, r in rules.items()})


ORDERED_TIMES = (("rollouts", "ended_at", "started_at"), ("tool_calls", "ended_at", "started_at"))


def values_sql(lake: str | os.PathLike, table: str) -> str | None:
    """The first row of one table of a lake that breaks a rule (``value_rules``): its problem, its
    rollout (where it has one) and its file. None for a table without rules."""
    from ..ingest.fields import first_problem_sql

    checks = [(f.typed_problem_sql(f"t.{_q(c)}"), f.typed_reason_sql(f"t.{_q(c)}", c))
              for c, f in value_rules().get(table, ())]
    checks += [(f"t.{_q(later)} < t.{_q(earlier)}", f"'field ''{later}'' precedes ''{earlier}'': a clock ran backwards'")
                for t, later, earlier in ORDERED_TIMES if t == table]
    if not checks:
        return None
    who = "t.rollout_id" if "rollout_id" in _columns(table) else "NULL"
    return (f"SELECT problem, rollout_id, filename FROM (SELECT {first_problem_sql(checks)} AS problem, "
            f"{who} AS rollout_id, t.filename FROM ({scan_sql(lake, table, filename=True)}) t) "
            "WHERE problem IS NOT NULL LIMIT 1")


def check_values(con, lake: str | os.PathLike) -> None:
    """Refuse (LakeError) a lake holding a value no log could load: a non-finite score, a negative
    latency, token count or cost, a time outside 1990–2100, an end before its start, an unknown
    status... (``value_rules``: the rules of ``ingest``), naming the file, the table, the row's
    rollout, the field and the value. One scan of each table's checked columns (DuckDB)."""
    for table in TABLES:
        sql = values_sql(lake, table)
        found = None if sql is None else con.execute(sql).fetchone()
        if found:
            problem, rollout_id, file = found
            row = f" (rollout {_shown(rollout_id)})" if rollout_id is not None else ""
            raise LakeError(f"{file}: {table}{row}: {problem}: a value no log could load, so the lake was changed "
                            "after export (or written by other software); export it again from its database")


def _probe(files: list[Path]) -> tuple[Path, str] | None:
    """The first file whose Parquet footer cannot be read, and why."""
    con = duckdb.connect(":memory:")
    try:
        for file in files:
            try:
                con.execute("SELECT count(*) FROM read_parquet(?)", [store.glob_literal(file)]).fetchone()
            except duckdb.Error as exc:
                return file, str(exc).splitlines()[0]
    finally:
        con.close()
    return None


def unreadable(lake: str | os.PathLike, exc: BaseException) -> LakeError | None:
    """A reading error as the LakeError naming the lake's file it is about (named in the error,
    else the first whose footer cannot be read), or None when no file of the lake is to blame."""
    files = [f for t in TABLES for f in table_files(lake, t)]
    text = str(exc)
    named = [f for f in files if str(f) in text]
    if named:
        bad, why = max(named, key=lambda f: len(str(f))), text.splitlines()[0] if text else type(exc).__name__
    else:
        probed = _probe(files)
        if probed is None:
            return None
        bad, why = probed
    return LakeError(f"{bad}: not a readable Parquet file ({why}); it is cut off or corrupt: copy the lake again "
                     "from where it came, or export the lake again")


def _lake_error(lake, exc: duckdb.Error) -> LakeError | None:
    """What a DuckDB error while reading a lake says about the lake, or None (not the lake's)."""
    found = unreadable(lake, exc)
    if found is None and isinstance(exc, (duckdb.ConstraintException, duckdb.ConversionException,
                                          duckdb.BinderException, duckdb.InvalidInputException)):
        found = LakeError(f"{lake}: its files could not be read as the manifest says "
                          f"({type(exc).__name__}: {str(exc).splitlines()[0]}); export the lake again")
    return found


def read_lake_sql(table: str, scans: Mapping[str, str]) -> str:
    """Insert one table of the lake, its sources renumbered by ``_rl_lake_ids`` (old_id, new_id),
    which leaves out the sources already loaded."""
    columns = _columns(table)
    names = ", ".join(_q(c) for c in columns)
    if "source_id" in columns:  # rows that name their source
        values = ", ".join("m.new_id" if c == "source_id" else f"t.{_q(c)}" for c in columns)
        join, keep = "JOIN _rl_lake_ids m ON m.old_id = t.source_id", ""
    else:  # the other per-rollout rows follow their rollout
        values, join = ", ".join(f"t.{_q(c)}" for c in columns), ""
        keep = (f"WHERE t.rollout_id IN (SELECT rollout_id FROM ({scans['rollouts']}) "
                "WHERE source_id IN (SELECT old_id FROM _rl_lake_ids))")
    if table == "runs":  # a run already here keeps its row
        join += " WHERE t.run_id NOT IN (SELECT run_id FROM runs)"
    if table == "samples":  # one row per (sample, split): a sample already here keeps its row
        join += (" WHERE NOT EXISTS (SELECT 1 FROM samples s WHERE s.sample_id = t.sample_id"
                 " AND s.split IS NOT DISTINCT FROM t.split)")
    return f"INSERT INTO {_q(table)} ({names}) SELECT {values} FROM ({scans[table]}) t {join} {keep}"


def lake_run_keys_sql() -> str:
    """A lake's runs get their keys again (``ingest.identity``): the keys a person's merge or rename
    recorded in ``runs.meta``, else the run's own, with its evaluation's tag."""
    return """
    INSERT INTO run_keys (label, evaluation, step, split, run_id, named, tag)
    SELECT coalesce(k.label, r.label), CASE WHEN k IS NULL THEN r.evaluation ELSE k.evaluation END,
           CASE WHEN k IS NULL THEN r.step ELSE k.step END, CASE WHEN k IS NULL THEN r.split ELSE k.split END,
           r.run_id, coalesce(TRY_CAST(r.meta->>'named' AS BOOLEAN), false), r.meta->>'tag'
    FROM runs r LEFT JOIN LATERAL (
        SELECT unnest(from_json(r.meta->'keys', '[{"label": "VARCHAR", "evaluation": "VARCHAR", "step": "INTEGER",
                                                  "split": "VARCHAR"}]'), recursive := true)) k ON true
    WHERE r.run_id NOT IN (SELECT run_id FROM run_keys)
    """


def read_lake(con: duckdb.DuckDBPyConnection, lake: str | os.PathLike) -> list[dict]:
    """Load a lake into ``con`` (inside the caller's transaction): one result row per source of
    the lake — ``loaded``, or ``unchanged`` when a source with the same content is already here.
    Into an empty database the source ids stay as they were (a round trip gives identical
    tables); otherwise they are numbered after the database's own. The lake is checked first
    (``manifest``, ``check_lake``); a lake that fails, or a file that cannot be read, is a
    LakeError naming the table or file."""
    tables = manifest(lake)["tables"]
    _check_files(lake)
    scans = {t: scan_sql(lake, t) for t in TABLES}
    try:
        check_lake(con, lake, {t: f"({s})" for t, s in scans.items()}, tables)
        check_values(con, lake)
        empty = con.execute("SELECT count(*) = 0 FROM sources").fetchone()[0]
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _rl_lake_ids AS
            SELECT source_id AS old_id, {'source_id' if empty else "nextval('source_id_seq')"} AS new_id
            FROM ({scans['sources']}) WHERE sha256 NOT IN (SELECT sha256 FROM sources) ORDER BY source_id""")
        clash = con.execute(f"""SELECT count(*), any_value(rollout_id) FROM ({scans['rollouts']})
                                WHERE source_id IN (SELECT old_id FROM _rl_lake_ids)
                                  AND rollout_id IN (SELECT rollout_id FROM rollouts)""").fetchone()
        if clash[0]:
            raise LakeError(f"{lake}: {clash[0]} of its rollouts are already in this database from other files (e.g. "
                            f"{clash[1]!r}); ingest the lake into a new database (--db NEW.duckdb)")
        if empty:  # the sequence continues after the ids kept
            con.execute("SELECT max(nextval('source_id_seq')) FROM range((SELECT coalesce(max(new_id), 0) FROM _rl_lake_ids))")
        with_sources = [t for t in TABLES if "source_id" in _columns(t)]
        for table in with_sources + [t for t in TABLES if t not in with_sources]:
            con.execute(read_lake_sql(table, scans))
        # a lake's runs get their keys again: the evaluation's tag and a person's name are in runs.meta
        con.execute(lake_run_keys_sql())
        rows = con.execute(f"""SELECT s.path, s.format, m.new_id, s.n_records, s.n_rejected, coalesce(s.n_duplicates, 0)
                               FROM ({scans['sources']}) s LEFT JOIN _rl_lake_ids m ON m.old_id = s.source_id
                               ORDER BY s.source_id""").fetchall()
        con.execute("DROP TABLE IF EXISTS _rl_lake_ids")
    except duckdb.Error as exc:
        error = _lake_error(lake, exc)
        if error is None:
            raise
        raise error from exc
    return [{"path": path, "format": fmt, "action": "unchanged" if sid is None else "loaded", "source_id": sid,
             "records": n, "loaded": 0 if sid is None else n - rej - dup, "duplicates": 0 if sid is None else dup,
             "rejected": 0 if sid is None else rej, "reasons": []} for path, fmt, sid, n, rej, dup in rows]


def connect_lake(lake: str | os.PathLike, memory_limit: str | None = None,
                 verify: bool = True) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection whose canonical tables are views over the lake's Parquet
    files: every metric function runs on it, reading only what its query needs (out of core).

    ``verify`` (default): check first that every table holds the manifest's row count and that no
    row names what the lake lacks (``check_lake``: an anti-join of every child table's rollout ids
    against rollouts, about 1 s per million rollouts, docs/scale.md); ``verify=False`` skips it."""
    tables = manifest(lake)["tables"]
    _check_files(lake)
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")  # as store.connect: no bars printed into output
    try:
        if memory_limit:
            con.execute("SET memory_limit = ?", [memory_limit])
        try:
            for table in TABLES:
                con.execute(f"CREATE VIEW {_q(table)} AS {scan_sql(lake, table)}")
            if verify:
                check_lake(con, lake, views(), tables)
                check_values(con, lake)
        except duckdb.Error as exc:
            error = _lake_error(lake, exc)
            if error is None:
                raise
            raise error from exc
    except BaseException:
        con.close()
        raise
    return con

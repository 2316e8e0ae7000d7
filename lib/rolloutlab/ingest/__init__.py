"""Ingest: files -> canonical tables, one transaction per call, bad records -> ``rejects``.

Each input format is one module of ``ingest/formats/`` with ``FORMAT``, ``sniff(path, head,
first_record) -> bool`` and ``load(ctx) -> LoadResult``; this module picks the format, tracks
sources and keeps re-ingest idempotent.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable

import duckdb
import pandas as pd
from tqdm.auto import tqdm

from .. import config, store
from .context import LoadContext, LoadResult
from .formats import FORMATS
from .lines import STAGED_REJECTS
HEAD_BYTES = 1 << 16  # how much of a file sniffing reads

RESULT_COLUMNS = ["path", "format", "action", "source_id", "records", "loaded", "rejected", "reasons"]


class IngestError(ValueError):
    """Nothing could be loaded, with what to do next."""


class IngestFailed(IngestError):
    """A file broke the loader in a way its rejects do not cover (a defect of rolloutlab): the
    whole ingest call was rolled back. The message names the file and what to do."""


def expand_paths(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Files named, and every file below a folder named (hidden files skipped), in sorted order."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found.extend(sorted(f for f in p.rglob("*") if f.is_file()
                                and not any(part.startswith(".") for part in f.relative_to(p).parts)))
        elif p.is_file():
            found.append(p)
        else:
            raise IngestError(f"{p}: no such file or folder. Check the path (relative to {Path.cwd()}).")
    return found


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _head(path: Path) -> tuple[str, object]:
    """The first bytes of a file as text, and its first line parsed as JSON (None if it is not)."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
    first = None
    for raw in head.splitlines():
        if raw.strip():
            try:
                first = json.loads(raw)
            except ValueError:
                first = None
            break
    return head.decode("utf-8", errors="replace"), first


def detect_format(path: Path) -> str | None:
    """The format of ``path`` from its extension, first bytes and first record, or None."""
    path = Path(path)
    head, first = _head(path)
    for name, module in FORMATS.items():
        if module.sniff(path, head, first):
            return name
    return None


def _delete_source_sql() -> list[str]:
    children = [f"DELETE FROM {t} WHERE rollout_id IN (SELECT rollout_id FROM rollouts WHERE source_id = $sid)"
                for t in store.ROLLOUT_CHILD_TABLES]
    return children + [
        "DELETE FROM rollouts WHERE source_id = $sid",
        "DELETE FROM samples WHERE source_id = $sid",
        "DELETE FROM rejects WHERE source_id = $sid",
        "DELETE FROM endpoint_events WHERE source_id = $sid",
        "DELETE FROM training_metrics WHERE source_id = $sid",
        "DELETE FROM training_jobs WHERE source_id = $sid",
        "DELETE FROM sources WHERE source_id = $sid",
    ]


def ingest(con: duckdb.DuckDBPyConnection, paths: Iterable[str | os.PathLike] | str | os.PathLike,
           format: str = "auto", run: str | None = None, split: str | None = None,
           step: int | None = None, progress: bool | None = None) -> pd.DataFrame:
    """Load files into the canonical tables in one transaction; return one row per file.

    ``action`` per file: ``loaded``, ``replaced`` (the path was loaded before with other content),
    ``unchanged`` (same content already loaded: nothing added) or ``failed`` (format not known).
    An exception leaves the database as it was.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if format != "auto" and format not in FORMATS:
        raise IngestError(f"Unknown format {format!r}; use one of: auto, {', '.join(FORMATS)}.")
    files = expand_paths(paths)
    rows = []
    disable = config.progress_disabled() if progress is None else not progress
    with store.transaction(con):
        for path in tqdm(files, desc="ingest", unit="file", disable=disable):
            try:
                rows.append(_ingest_file(con, path, format, run, split, step))
            except (IngestError, store.StoreError):
                raise
            except OSError as exc:
                raise IngestFailed(f"{path}: {exc}. Nothing was written: the whole ingest was rolled back. "
                                   "Check the file, its permissions and free disk space, then ingest again.") from exc
            except Exception as exc:  # bad input must never surface as a traceback
                raise IngestFailed(
                    f"{path}: could not be loaded ({type(exc).__name__}: {str(exc)[:300]}). Nothing was "
                    "written: the whole ingest was rolled back. Ingest the other files without this one, "
                    "and report this error with the file (it is a defect: bad records should land in "
                    "rejects).") from exc
        con.execute("DELETE FROM runs WHERE run_id NOT IN (SELECT DISTINCT run_id FROM rollouts)")
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def _ingest_file(con, path: Path, format: str, run, split, step) -> dict:
    resolved = str(path.resolve())
    row = {"path": str(path), "format": format, "source_id": None, "records": 0, "loaded": 0,
           "rejected": 0, "reasons": []}
    sha = sha256_file(path)
    same = con.execute("SELECT source_id, path, format, n_records, n_rejected FROM sources WHERE sha256 = ?",
                       [sha]).fetchone()
    if same:
        row.update(action="unchanged", source_id=same[0], format=same[2], records=same[3],
                   loaded=same[3] - same[4], rejected=same[4],
                   reasons=[] if same[1] == resolved else [f"same content as {same[1]}, already loaded"])
        return row
    fmt = format if format != "auto" else detect_format(path)
    if fmt is None:
        row.update(action="failed", reasons=[
            f"{path}: could not tell the format from its first record; pass --format "
            f"({', '.join(FORMATS)})"])
        return row
    row["format"] = fmt
    previous = con.execute("SELECT source_id FROM sources WHERE path = ?", [resolved]).fetchone()
    if previous:
        for sql in _delete_source_sql():
            con.execute(sql, {"sid": previous[0]})
    source_id = con.execute("SELECT nextval('source_id_seq')").fetchone()[0]
    con.execute("INSERT INTO sources VALUES (?, ?, ?, ?, ?, NULL, NULL, now()::TIMESTAMP)",
                [source_id, resolved, fmt, sha, path.stat().st_size])
    ctx = LoadContext(con=con, path=path, source_id=source_id, run=run, split=split, step=step,
                      id_prefix=f"{path.stem}-{sha[:8]}-L")
    result: LoadResult = FORMATS[fmt].load(ctx)
    con.execute(f"INSERT INTO rejects SELECT $sid, line_no, raw, reason FROM {STAGED_REJECTS}", {"sid": source_id})
    con.execute("UPDATE sources SET n_records = ?, n_rejected = ? WHERE source_id = ?",
                [result.n_records, result.n_rejected, source_id])
    reasons = [f"{path}:{line}: {reason}" for line, reason in con.execute(
        "SELECT line_no, reason FROM rejects WHERE source_id = ? ORDER BY line_no LIMIT ?",
        [source_id, config.SHOWN_REJECTS]).fetchall()]
    row.update(action="replaced" if previous else "loaded", source_id=source_id, records=result.n_records,
               loaded=result.n_records - result.n_rejected, rejected=result.n_rejected,
               reasons=result.notes + reasons)
    return row

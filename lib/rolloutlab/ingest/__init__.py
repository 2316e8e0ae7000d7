"""Ingest: files -> canonical tables, one transaction per call, bad records -> ``rejects``; ``watch`` follows
growing logs. May import store, text and config; never analysis, views, exports, capture, demo or cli.

Each input format is one module of ``ingest/formats/`` with ``FORMAT``, ``sniff(path, head,
first_record) -> bool`` and ``load(ctx) -> LoadResult``; this module picks the format, tracks
sources and keeps re-ingest idempotent.
"""
from __future__ import annotations

import errno
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import duckdb
import pandas as pd
from tqdm.auto import tqdm

from .. import config
from ..store import lake, database as store
from . import filescan, identity
from .batch import Batch, BatchFailed, Target, insert_sources_sql
from .context import LoadContext, LoadResult
from .formats import FORMATS
from .lines import STAGED_REJECTS
HEAD_BYTES = 1 << 16  # how much of a file sniffing reads

RESULT_COLUMNS = ["path", "format", "action", "source_id", "records", "loaded", "duplicates", "rejected", "runs",
                  "reasons"]


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


def _head(path: Path) -> tuple[str, object]:
    """The first bytes of a file as text, and its first record parsed as JSON (None if it is not).
    A first line longer than the head (a capture log whose first call had large arguments) is
    read whole, up to ``config.SNIFF_MAX_BYTES`` ($ROLLOUTLAB_SNIFF_MAX_BYTES)."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
        start = len(head) - len(head.lstrip())
        line = b""
        if head[start:start + 1] in (b"{", b"["):  # a JSON line: read to its end
            end = head.find(b"\n", start)
            parts = [head[start:] if end < 0 else head[start:end]]
            size, limit = len(parts[0]), config.limit("SNIFF_MAX_BYTES")
            # a whole-document .json is told from its head; only a line format needs its first line whole
            while end < 0 and size < limit and path.suffix != ".json":
                more = fh.read(1 << 20)
                if not more:
                    break
                end = more.find(b"\n")
                parts.append(more if end < 0 else more[:end])
                size += len(parts[-1])
            line = b"".join(parts)
    first = None
    if line:
        try:
            first = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, cut off, or nested too deeply to read
            first = None
    return head.decode("utf-8", errors="replace"), first


def detect_format(path: Path) -> str | None:
    """The format of ``path`` from its extension, first bytes and first record, or None."""
    path = Path(path)
    head, first = _head(path)
    for name, module in FORMATS.items():
        if module.sniff(path, head, first):
            return name
    return None


def release_samples_sql() -> list[str]:
    """A source lets go of the samples it provided: a sample row goes only when no other source
    still provides it (else it is kept, credited to one of those)."""
    same = "l.sample_id = samples.sample_id AND l.split IS NOT DISTINCT FROM samples.split"
    return [
        "CREATE OR REPLACE TEMP TABLE _rl_released AS SELECT DISTINCT sample_id, split FROM sample_sources "
        "WHERE source_id = $sid",
        "DELETE FROM sample_sources WHERE source_id = $sid",
        f"""DELETE FROM samples WHERE (source_id = $sid OR EXISTS (SELECT 1 FROM _rl_released l WHERE {same}))
            AND NOT EXISTS (SELECT 1 FROM sample_sources l WHERE {same})""",
        f"UPDATE samples SET source_id = (SELECT min(l.source_id) FROM sample_sources l WHERE {same}) "
        "WHERE source_id = $sid",
        "DROP TABLE _rl_released",
    ]


def _delete_source_sql() -> list[str]:
    children = [f"DELETE FROM {t} WHERE rollout_id IN (SELECT rollout_id FROM rollouts WHERE source_id = $sid)"
                for t in store.ROLLOUT_CHILD_TABLES]
    return children + [
        "DELETE FROM rollouts WHERE source_id = $sid",
        *release_samples_sql(),
        "DELETE FROM rejects WHERE source_id = $sid",
        "DELETE FROM duplicates WHERE source_id = $sid",
        "DELETE FROM endpoint_events WHERE source_id = $sid",
        "DELETE FROM training_metrics WHERE source_id = $sid",
        "DELETE FROM training_jobs WHERE source_id = $sid",
        "DELETE FROM sources WHERE source_id = $sid",
    ]


def ingest(con: duckdb.DuckDBPyConnection, paths: Iterable[str | os.PathLike] | str | os.PathLike,
           format: str = "auto", run: str | None = None, split: str | None = None,
           step: int | None = None, progress: bool | None = None, follow: bool = False) -> pd.DataFrame:
    """Load files into the canonical tables in one transaction; return one row per file.

    ``action`` per file: ``loaded``, ``appended`` (the file grew since it was loaded, its earlier
    bytes unchanged: only its new lines were read — line formats), ``replaced`` (the path was
    loaded before with other content), ``unchanged`` (same content already loaded: nothing added)
    or ``failed`` (format not known, or the file broke its loader: the call is then redone without
    it, and the reason says so). ``follow=True`` (``rolloutlab watch``) holds back a last line
    without its newline, as a file still being written has; otherwise such a line is read, and
    rejected when it is cut-off JSON. The counts of an appended file are those of its new lines.
    An exception leaves the database as it was.
    """
    if isinstance(con, store.SharedReader):
        raise IngestError(f"{con.path} was opened for reading (rl.connect(db, read_only=True)); ingest needs it "
                          "open for writing: con = rl.connect(db), then con.close() when done.")
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if format != "auto" and format not in FORMATS:
        raise IngestError(f"Unknown format {format!r}; use one of: auto, {', '.join(FORMATS)}.")
    paths = [Path(p) for p in paths]
    lakes = [p for p in paths if p.is_dir() and lake.is_lake(p)]  # a lake loads whole, not file by file
    files = expand_paths([p for p in paths if p not in lakes])
    disable = config.progress_disabled() if progress is None else not progress
    broken: dict[Path, str] = {}
    batching = True
    while True:  # a file that breaks the loader is left out and the call redone without it
        try:
            rows, again = _ingest_all(con, lakes, [f for f in files if f not in broken], format, run, split, step,
                                      follow, disable, batching)
            break
        except _FileBroke as exc:
            broken[exc.path] = exc.reason
        except BatchFailed:  # a defect showed in a batch of many files: redone a file at a time, to tell which
            if not batching:
                raise
            batching = False
    file_rows = iter(rows[len(rows) - (len(files) - sum(f in broken for f in files)):])
    ordered = rows[:len(rows) - (len(files) - sum(f in broken for f in files))]  # a lake's sources first
    for path in files:
        ordered.append(next(file_rows) if path not in broken else {
            "path": str(path), "format": format, "action": "failed", "source_id": None, "records": 0, "loaded": 0,
            "duplicates": 0, "rejected": 0, "reasons": [broken[path]]})
    for row in again:  # a file read again replaces its own row, or is added after the others
        same = next((i for i, r in enumerate(ordered) if str(Path(r["path"]).resolve()) == str(Path(row["path"]).resolve())),
                    None)
        if same is None:
            ordered.append(row)
        else:
            ordered[same] = row
    runs = dict(con.execute(source_runs_sql(), [[r["source_id"] for r in ordered if r["source_id"] is not None]]).fetchall())
    for row in ordered:
        row["runs"] = runs.get(row["source_id"], [])
    return pd.DataFrame(ordered, columns=RESULT_COLUMNS)


def source_runs_sql() -> str:
    """The runs each file's records are in (its own rollouts, and those it repeated), by name."""
    return """
    SELECT source_id, list(DISTINCT run_id ORDER BY run_id) FROM (
        SELECT source_id, run_id FROM rollouts WHERE list_contains($1, source_id)
        UNION ALL SELECT d.source_id, o.run_id FROM duplicates d JOIN rollouts o USING (rollout_id)
        WHERE list_contains($1, d.source_id))
    GROUP BY source_id
    """


class _FileBroke(Exception):
    """One file broke its loader: the call is rolled back and redone without it."""

    def __init__(self, path: Path, reason: str):
        super().__init__(reason)
        self.path, self.reason = path, reason


def _ingest_all(con, lakes: list[Path], files: list[Path], format, run, split, step, follow, disable,
                batching: bool = True) -> tuple[list[dict], list[dict]]:
    rows = []
    with store.transaction(con):
        for folder in lakes:
            try:
                rows.extend(lake.read_lake(con, folder))
            except lake.LakeError as exc:
                raise IngestError(str(exc)) from exc
        call = _Call(con, files, batching)
        try:
            for path in tqdm(files, desc="ingest", unit="file", disable=disable):
                try:
                    rows.append(_ingest_file(con, path, format, run, split, step, follow, call.known, call))
                except (IngestError, store.StoreError, BatchFailed):
                    raise
                except OSError as exc:
                    if exc.errno == errno.ENOSPC:
                        raise IngestFailed(f"{path}: {exc}. Nothing was written: the whole ingest was rolled back. "
                                           "Free disk space (DuckDB spills beside the database), then ingest "
                                           "again.") from exc
                    raise _FileBroke(path, f"{path}: could not be read ({exc}); nothing of it was loaded. Check the "
                                           "file and its permissions, then ingest it again.") from exc
                except Exception as exc:  # bad input must never surface as a traceback, nor stop the other files
                    raise _FileBroke(path, (
                        f"{path}: could not be loaded ({type(exc).__name__}: {str(exc)[:300]}); nothing of it was "
                        "loaded, the other files were. This is a defect of rolloutlab (bad records should land in "
                        "rejects): please report it with the file.")) from exc
            call.flush()
        finally:
            call.close()
        # formats that assemble rollouts from several files do it once, after all of them
        for name in dict.fromkeys(r["format"] for r in rows if r["action"] in ("loaded", "replaced", "appended")):
            finish = getattr(FORMATS[name], "finish", None)
            if finish is not None:
                try:
                    finish(con, run)
                except (IngestError, store.StoreError):
                    raise
                except Exception as exc:
                    raise IngestFailed(
                        f"assembling the {name} records could not finish ({type(exc).__name__}: {str(exc)[:300]}). "
                        "Nothing was written: the whole ingest was rolled back. This is a defect of rolloutlab: "
                        "please report it with the files.") from exc
        again = _reread_orphaned(con)
        identity.forget_empty_runs(con)
    return rows, again


class _Call:
    """What one ingest call holds across its files: the batch their lines load in (many small
    files: a few thousand records per statement), the result rows waiting for it, and what the
    store knew of the files when the call began."""

    def __init__(self, con, files: list[Path], batching: bool):
        self.con = con
        self.known = _known_sources(con, files)
        self.batch = Batch(con) if batching else None
        self.waiting: list[_Waiting] = []
        # content already in the store: a file whose hash is not among them needs no query
        self.shas = {r[0] for r in con.execute("SELECT sha256 FROM sources").fetchall()} if batching else set()
        self.staged_paths: set[str] = set()
        self.staged_shas: set[str] = set()

    def flush(self) -> None:
        """Load what the batch holds and finish the files that were waiting for it."""
        if self.batch is not None:
            self.batch.flush()
            self.settle()

    def wait(self) -> None:
        """Before the call touches the database: until a batch loading beside it is done."""
        if self.batch is not None and self.batch.loading:
            self.batch.wait()
            self.settle()

    def stage(self, waiting: "_Waiting") -> None:
        if waiting.target.source_id is None and waiting.target not in self.batch.segments:
            self.batch.flush()  # a file that staged no line: its source id after those of the files before it
        self.waiting.append(waiting)
        self.staged_paths.add(waiting.resolved)
        self.staged_shas.add(waiting.scan.sha256)
        self.shas.add(waiting.scan.sha256)
        self.settle()

    def settle(self) -> None:
        """Finish the files whose lines have all loaded (their counts are known)."""
        if self.batch.loading:  # later: the database is the loading thread's meanwhile
            return
        ready = [w for w in self.waiting if w.target not in self.batch.segments]
        if not ready:
            return
        self.waiting = [w for w in self.waiting if w not in ready]
        try:
            self.batch.new_sources([w.target for w in ready])  # files that staged no line
            _finish_waiting(self.con, ready)
        except (IngestError, store.StoreError):
            raise
        except Exception as exc:
            raise BatchFailed(str(exc)) from exc
        self.staged_paths -= {w.resolved for w in ready}
        self.staged_shas -= {w.scan.sha256 for w in ready}

    def close(self) -> None:
        if self.batch is not None:
            self.batch.close()


@dataclass
class _Waiting:
    """A file whose lines are in the batch: its result row is filled when they have loaded."""
    row: dict
    target: Target
    path: Path
    resolved: str
    scan: filescan.Scan
    appendable: bool
    lines: int
    end: int
    follow: bool
    notes: list[str]  # said before its duplicate notes (an appended file's --run)
    load_notes: list[str]  # what its loader said
    action: str


def orphaned_sources_sql() -> str:
    """Files whose records were duplicates of rollouts that are gone now (the file that loaded
    them first was replaced): they hold those rollouts, so they are read again."""
    return """SELECT DISTINCT s.source_id, s.path, s.options FROM duplicates d JOIN sources s USING (source_id)
              WHERE d.rollout_id NOT IN (SELECT rollout_id FROM rollouts) ORDER BY s.source_id"""


def orphan_source_sql(read_again: bool) -> str:
    """A file whose copies of rollouts are gone: read again from the start (stale, so its lines
    load again), or, gone from its path, kept as it is but for where its reading stopped."""
    stale = "sha256 = $stale || sha256, " if read_again else ""
    return f"UPDATE sources SET {stale}prefix_sha256 = NULL, bytes_loaded = NULL WHERE source_id = $sid"


def drop_orphan_copies_sql() -> list[str]:
    """A file's copies of rollouts that are gone go, and it accounts for what it still holds:
    read = loaded + duplicates + rejected without those copies."""
    return ["""CREATE OR REPLACE TEMP TABLE _rl_orphans AS SELECT rollout_id FROM duplicates
               WHERE source_id = $sid AND rollout_id NOT IN (SELECT rollout_id FROM rollouts)""",
            "DELETE FROM duplicates WHERE source_id = $sid AND rollout_id IN (SELECT rollout_id FROM _rl_orphans)",
            """UPDATE sources SET n_records = n_records - (SELECT count(*) FROM _rl_orphans),
                      n_duplicates = (SELECT count(*) FROM duplicates d WHERE d.source_id = sources.source_id)
               WHERE source_id = $sid""",
            "DROP TABLE _rl_orphans"]


def _reread_orphaned(con) -> list[dict]:
    rows = []
    for _ in range(3):  # a file read again may orphan another's duplicates in turn
        orphaned = con.execute(orphaned_sources_sql()).fetchall()
        if not orphaned:
            break
        for source_id, path, options in orphaned:
            if Path(path).is_file():
                store.run_sql(con, orphan_source_sql(True), {"sid": source_id, "stale": store.STALE})
                given = json.loads(options) if options else {}
                row = _ingest_file(con, Path(path), "auto", given.get("run"), given.get("split"), given.get("step"))
                row["reasons"].insert(0, f"{path}: read again: it holds rollouts of a file replaced in this call")
                rows.append(row)
            else:  # gone from its path: its own rollouts stay, its copies of the replaced ones go
                store.run_sql(con, orphan_source_sql(False), {"sid": source_id})
                for sql in drop_orphan_copies_sql():
                    store.run_sql(con, sql, {"sid": source_id})
                rows.append({"path": path, "format": None, "action": "unchanged", "source_id": source_id,
                             "records": 0, "loaded": 0, "duplicates": 0, "rejected": 0, "reasons": [
                                 f"{path}: it held copies of rollouts of a file replaced in this call, but it is no "
                                 "longer at its path: those copies are gone with the replaced file's rollouts; its "
                                 "own rollouts stay"]})
    return rows


PREVIOUS_COLUMNS = ["source_id", "format", "bytes_loaded", "lines_loaded", "prefix_sha256",
                    "tail_records", "tail_rejected", "n_records", "n_rejected", "n_duplicates"]


def _drop_tail_sql() -> list[str]:
    """Rows of a source from lines after $lines: a last line loaded without its newline, read again
    now that the file grew."""
    mine = "SELECT rollout_id FROM rollouts WHERE source_id = $sid AND source_line > $lines"
    return [f"DELETE FROM {t} WHERE rollout_id IN ({mine})" for t in store.ROLLOUT_CHILD_TABLES] + [
        "DELETE FROM rollouts WHERE source_id = $sid AND source_line > $lines",
        "DELETE FROM rejects WHERE source_id = $sid AND line_no > $lines",
        "DELETE FROM duplicates WHERE source_id = $sid AND line_no > $lines",
        "DELETE FROM endpoint_events WHERE source_id = $sid AND line_no > $lines",
    ]


KNOWN_COLUMNS = [*PREVIOUS_COLUMNS, "sha256"]


def _known_sources(con, files: list[Path]) -> dict[str, dict | None]:
    """What the store holds of each path named once in this call, read in one query before any is
    loaded (a folder of many unchanged files costs a hash each, not queries each). A path named
    twice is left out: its second time must see what its first time wrote."""
    counts: dict[str, int] = {}
    for f in files:
        key = str(f.resolve())
        counts[key] = counts.get(key, 0) + 1
    once = [k for k, n in counts.items() if n == 1]
    if not once:
        return {}
    found = con.execute(f"SELECT path, {', '.join(KNOWN_COLUMNS)} FROM sources WHERE list_contains(?, path)",
                        [once]).fetchall()
    known: dict[str, dict | None] = dict.fromkeys(once)  # None: not loaded before
    known.update({r[0]: dict(zip(KNOWN_COLUMNS, r[1:])) for r in found})
    return known


def _ingest_file(con, path: Path, format: str, run, split, step, follow: bool = False,
                 known: dict[str, dict | None] | None = None, call: _Call | None = None) -> dict:
    resolved = str(path.resolve())
    row = {"path": str(path), "format": format, "source_id": None, "records": 0, "loaded": 0,
           "duplicates": 0, "rejected": 0, "reasons": []}
    notes: list[str] = []
    batch = call.batch if call is not None else None
    if known is not None and resolved in known:
        previous = known.pop(resolved)
    else:
        if batch is not None and resolved in call.staged_paths:  # named twice: its first time must have loaded
            call.flush()
        elif batch is not None:
            call.wait()
        found = con.execute(f"SELECT {', '.join(KNOWN_COLUMNS)} FROM sources WHERE path = ?", [resolved]).fetchone()
        previous = dict(zip(KNOWN_COLUMNS, found)) if found else None
    scan = filescan.scan(path, prefix=previous["bytes_loaded"] if previous else None)
    if previous is not None and previous["sha256"] == scan.sha256:  # this path, unchanged
        same = (previous["source_id"], resolved, previous["format"], previous["n_records"], previous["n_rejected"],
                previous["n_duplicates"] or 0)
    else:
        if batch is not None and scan.sha256 in call.staged_shas:  # a copy of a file of this call
            call.flush()
        elif batch is not None and scan.sha256 in call.shas:
            call.wait()
        same = None if batch is not None and scan.sha256 not in call.shas else con.execute(
            "SELECT source_id, path, format, n_records, n_rejected, coalesce(n_duplicates, 0) "
            "FROM sources WHERE sha256 = ?", [scan.sha256]).fetchone()
    if same:
        reasons = [] if same[1] == resolved else [f"same content as {same[1]}, already loaded"]
        if call is not None and run is not None:
            call.wait()
        labels = [] if run is None else _labels_of(con, same[0])
        if labels and run not in labels:
            reasons.append(f"{path}: already loaded as run {', '.join(map(repr, labels))}: --run {run!r} was not "
                           "applied (an unchanged file adds nothing). To load it under another label, ingest it "
                           "into another database (--db), or a copy of it under another name.")
        row.update(action="unchanged", source_id=same[0], format=same[2], records=same[3],
                   loaded=same[3] - same[4] - same[5], duplicates=same[5], rejected=same[4], reasons=reasons)
        return row
    fmt = format if format != "auto" else (previous["format"] if previous else detect_format(path))
    if fmt is None:
        row.update(action="failed", reasons=[
            f"{path}: could not tell the format from its first record; pass --format "
            f"({', '.join(FORMATS)})"])
        return row
    row["format"] = fmt
    module = FORMATS[fmt]
    appendable = getattr(module, "appendable", lambda p: False)(path)
    # a last line without its newline may still be being written: held back while following
    end = scan.complete_end if (follow and appendable) else scan.size
    relabel = False  # labels follow a stale file's lines when it is read again (below)
    grew = (previous is not None and appendable and previous["format"] == fmt
            and previous["prefix_sha256"] is not None and scan.prefix_sha256 == previous["prefix_sha256"])
    lines = (previous["lines_loaded"] if grew else 0) + scan.lines_after_prefix
    if not grew and scan.prefix_sha256 is not None:  # counted after a prefix that did not match
        lines = filescan.count_lines(path, scan.complete_end)
    if previous is not None and batch is not None:  # what it replaces or extends goes after the files before it
        call.flush()
    options = {k: v for k, v in (("run", run), ("split", split), ("step", step)) if v is not None}
    if not grew:
        if previous:
            # a file read again as it was (marked stale by an upgrade): people's labels follow its
            # lines (loaded alone, below: its lines must be in before the labels move)
            relabel = previous["sha256"] == store.STALE + scan.sha256
            if relabel:
                store.run_sql(con, labelled_lines_sql(), {"sid": previous["source_id"]})
            for sql in _delete_source_sql():  # its runs, if left empty, go at the end of the call
                store.run_sql(con, sql, {"sid": previous["source_id"]})
        action = "replaced" if previous else "loaded"
        if batch is not None and not relabel and _batches(module, fmt, end, scan):
            target = Target(new_source=(resolved, fmt, scan.sha256, scan.size, json.dumps(options) if options else None))
            ctx = LoadContext(con=con, path=path, source_id=0, run=run, split=split, step=step, batch=batch,
                              target=target)
            result: LoadResult = module.load(ctx)  # every line of the file is staged now
            call.stage(_Waiting(row, target, path, resolved, scan, appendable, lines, end, follow, notes,
                                result.notes, action))
            return row
    if batch is not None:  # a file loaded alone: after the files before it
        call.flush()
    if grew:
        source_id, start, offset = previous["source_id"], previous["bytes_loaded"], previous["lines_loaded"]
        if end <= start and not previous["tail_records"]:
            n_duplicates = previous["n_duplicates"] or 0
            row.update(action="unchanged", source_id=source_id, records=previous["n_records"],
                       loaded=previous["n_records"] - previous["n_rejected"] - n_duplicates, duplicates=n_duplicates,
                       rejected=previous["n_rejected"],
                       reasons=[f"{path}: its last line has no line end yet: held back until it is complete"])
            return row
        for sql in _drop_tail_sql():
            store.run_sql(con, sql, {"sid": source_id, "lines": offset})
        base_records = previous["n_records"] - (previous["tail_records"] or 0)
        base_rejected = previous["n_rejected"] - (previous["tail_rejected"] or 0)
        action = "appended"
        before = _labels_of(con, source_id)
        if run is not None and before and before != [run]:
            notes.append(f"{path}: its new lines are run {run!r} (--run), its earlier lines run "
                         f"{', '.join(map(repr, before))}: the file is now split across runs; to keep it one run, "
                         "ingest it with the same --run every time")
    else:
        source_id = con.execute("SELECT nextval('source_id_seq')").fetchone()[0]
        con.execute(insert_sources_sql(), [[source_id], [resolved], [fmt], [scan.sha256], [scan.size],
                                           [json.dumps(options) if options else None]])
        start, offset, base_records, base_rejected = 0, 0, 0, 0
    if call is not None:
        call.shas.add(scan.sha256)
    with tempfile.TemporaryDirectory(prefix="rolloutlab-") as tmp:
        part = None if (start, end) == (0, scan.size) else filescan.copy_range(path, start, end, tmp)
        ctx = LoadContext(con=con, path=path, source_id=source_id, run=run, split=split, step=step,
                          read_path=part, line_offset=offset, file_name=path.name)
        result = module.load(ctx)
    con.execute(f"INSERT INTO rejects SELECT $sid, line_no, raw, reason FROM {STAGED_REJECTS}", {"sid": source_id})
    if relabel:
        store.run_sql(con, relabel_sql(), {"sid": source_id})
    waiting = _Waiting(row, Target(source_id=source_id, n_records=base_records + result.n_records,
                                   n_rejected=base_rejected + result.n_rejected, n_duplicates=result.n_duplicates),
                       path, resolved, scan, appendable, lines, end, follow, notes, result.notes, action)
    _finish_waiting(con, [waiting], offset=offset, new=(result.n_records, result.n_rejected, result.n_duplicates))
    return row


def _batches(module, fmt: str, end: int, scan: filescan.Scan) -> bool:
    """Whether a file's lines join the call's batch: formats that only stage records (BATCHED),
    read whole (a file followed while written holds its last line back: loaded alone); a native
    file only while small (a large one loads alone, in the transaction itself: no copy between
    connections)."""
    if not getattr(module, "BATCHED", False) or end != scan.size:
        return False
    return fmt != "native" or scan.size <= config.BATCH_FILE_MAX_BYTES


def _finish_waiting(con, files: list[_Waiting], offset: int = 0, new: tuple[int, int, int] | None = None) -> None:
    """Fill the result rows (and sources rows) of files whose lines have loaded: their counts,
    what is remembered of a last line without its line end, the first reject reasons and the
    duplicate notes. ``new``: the counts of the lines read this time (an appended file's new
    lines), where they differ from the file's totals in its Target."""
    for w in files:
        t = w.target
        # a last line read without its newline (a finished file): remembered, to be read again if it grows
        tail_read = w.appendable and w.end > w.scan.complete_end
        w.tail = (int(tail_read and bool(_tail_text(w.path, w.scan.complete_end, w.end).strip())), 0)
        if w.tail[0]:
            w.tail = (1, int(con.execute("SELECT count(*) FROM rejects WHERE source_id = ? AND line_no > ?",
                                         [t.source_id, w.lines]).fetchone()[0] > 0))
    a = [w.appendable for w in files]
    con.execute("""UPDATE sources SET sha256 = u.sha256, bytes = u.bytes, n_records = u.n_records,
                       n_rejected = u.n_rejected, ingested_at = now()::TIMESTAMP, bytes_loaded = u.bytes_loaded,
                       lines_loaded = u.lines_loaded, prefix_sha256 = u.prefix_sha256, tail_records = u.tail_records,
                       tail_rejected = u.tail_rejected,
                       n_duplicates = (SELECT count(*) FROM duplicates d WHERE d.source_id = sources.source_id)
                   FROM (SELECT unnest($sid) AS source_id, unnest($sha) AS sha256, unnest($bytes) AS bytes,
                                unnest($records) AS n_records, unnest($rejected) AS n_rejected,
                                unnest($bytes_loaded) AS bytes_loaded, unnest($lines_loaded) AS lines_loaded,
                                unnest($prefix) AS prefix_sha256, unnest($tail_records) AS tail_records,
                                unnest($tail_rejected) AS tail_rejected) u
                   WHERE sources.source_id = u.source_id""", {
        "sid": [w.target.source_id for w in files], "sha": [w.scan.sha256 for w in files],
        "bytes": [w.scan.size for w in files], "records": [w.target.n_records for w in files],
        "rejected": [w.target.n_rejected for w in files],
        "bytes_loaded": [w.scan.complete_end if ok else None for w, ok in zip(files, a)],
        "lines_loaded": [w.lines if ok else None for w, ok in zip(files, a)],
        "prefix": [w.scan.complete_sha256 if ok else None for w, ok in zip(files, a)],
        "tail_records": [w.tail[0] for w in files], "tail_rejected": [w.tail[1] for w in files]})
    shown: dict[int, list[str]] = {}
    for source_id, line, reason in con.execute(
            """SELECT source_id, line_no, reason FROM (
                   SELECT source_id, line_no, reason, row_number() OVER (PARTITION BY source_id ORDER BY line_no) AS k
                   FROM rejects WHERE list_contains($sid, source_id) AND line_no > $offset)
               WHERE k <= $n ORDER BY source_id, line_no""",
            {"sid": [w.target.source_id for w in files if w.target.n_rejected], "offset": offset,
             "n": config.SHOWN_REJECTS}).fetchall():
        shown.setdefault(source_id, []).append((line, reason))
    for w in files:
        t = w.target
        n_records, n_rejected, n_duplicates = new or (t.n_records, t.n_rejected, t.n_duplicates)
        reasons = [f"{w.path}:{line}: {reason}" for line, reason in shown.get(t.source_id, [])]
        if w.follow and w.appendable and w.scan.size > w.end:
            reasons.append(f"{w.path}: its last line has no line end yet: held back until it is complete")
        notes = w.notes + (duplicate_notes(con, w.path, t.source_id, offset) if n_duplicates else []) + w.load_notes
        action = w.action
        if action in ("loaded", "replaced") and n_records == 0:
            action = "empty"  # nothing in it to load: never called loaded
        w.row.update(action=action, source_id=t.source_id, records=n_records,
                     loaded=n_records - n_rejected - n_duplicates, duplicates=n_duplicates, rejected=n_rejected,
                     reasons=notes + reasons)


def labelled_lines_sql() -> str:
    """The labelled rollouts of source $sid by line, kept while the source is read again."""
    return """CREATE OR REPLACE TEMP TABLE _rl_labelled AS
              SELECT rollout_id AS old_id, source_line FROM rollouts
              WHERE source_id = $sid AND rollout_id IN (SELECT rollout_id FROM labels)"""


def relabel_sql() -> str:
    """People's labels move to the rollout the same line of the same content gives now."""
    return """UPDATE labels SET rollout_id = n.rollout_id FROM _rl_labelled l
              JOIN rollouts n ON n.source_id = $sid AND n.source_line = l.source_line
              WHERE labels.rollout_id = l.old_id"""


def duplicate_notes_sql() -> str:
    """The duplicates a file's lines after $offset brought, by where the rollout they repeat was
    loaded from (this file, another) and whether they hold the same."""
    return """
    SELECT CASE WHEN o.source_id = $sid THEN '' ELSE s.path END AS origin, d.same_content, count(*) AS n,
           min(o.source_line) AS first_line
    FROM duplicates d JOIN rollouts o USING (rollout_id) LEFT JOIN sources s ON s.source_id = o.source_id
    WHERE d.source_id = $sid AND d.line_no > $offset
    GROUP BY ALL ORDER BY n DESC, origin
    """


def duplicate_notes(con, path: Path, source_id: int, offset: int) -> list[str]:
    """A line per origin: records that are rollouts already loaded are kept once, and say so."""
    notes = []
    for origin, same, n, first in con.execute(duplicate_notes_sql(), {"sid": source_id, "offset": offset}).fetchall():
        where = f"already loaded from {origin}" if origin else f"earlier in this file (from line {first})"
        if same:
            notes.append(f"{path}: {n} record(s) are rollouts {where}: each is kept once")
        else:
            notes.append(f"{path}: {n} record(s) reuse the id of a rollout {where} but hold other content (a rescored "
                         "or edited copy?): the rollout loaded first is kept; give rollouts ids of their own to keep "
                         "both")
    return notes


def _labels_of(con, source_id: int) -> list[str]:
    """The run labels a file's rollouts load under."""
    return [r[0] for r in con.execute("SELECT DISTINCT u.label FROM rollouts r JOIN runs u USING (run_id) "
                                      "WHERE r.source_id = ? ORDER BY 1", [source_id]).fetchall()]


def _tail_text(path: Path, start: int, end: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(start)
        return fh.read(min(end - start, 1 << 16))

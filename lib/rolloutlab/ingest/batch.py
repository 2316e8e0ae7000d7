"""Lines of many files, loaded by one set of statements: a batch.

A folder of small logs loads a few thousand records per statement, not one file per statement:
each file's lines (a native file read by DuckDB, or the records a format converted, handed over as
Arrow) are staged with the file's segment number, and ``flush`` parses, checks and inserts them
all at once (formats/native.py). Line numbers, rejects, duplicates, ids and attempts stay per file
and exact: a segment maps to its file's source, and where lines of several files share a
(run, sample), their attempts are numbered file by file, as if loaded one at a time.

Memory stays flat in the number of files. A batch of the ingest (``shared``) parses and checks on a
connection of its own (a cursor of the database, outside the ingest's transaction), whose tables are
freed when dropped; only small tables (ids, runs, attempts) and the rows inserted live in the
ingest's transaction — DuckDB keeps what a transaction creates and drops until it commits. A batch
``alone`` (one file loaded by itself: a large native file, a file that grew) stages in the
transaction itself, saving the copy between connections.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from .. import config
from ..store.database import glob_literal
from .context import LoadContext, LoadResult
from .formats import native
from .lines import ENCODING_REASON_SQL, STAGED_REJECTS, csv_lines_sql, ends_with_newline, good_numbers_sql


class BatchFailed(Exception):
    """Loading a batch of many files broke in a way its rejects do not cover (a defect of
    rolloutlab): the ingest is redone a file at a time, which tells the file."""


@dataclass(eq=False)
class Target:
    """A file whose lines a batch loads, and what came of them so far."""
    source_id: int | None = None  # given when its first lines load (a shared batch)
    new_source: tuple | None = None  # its sources row (path, format, sha256, bytes, options), inserted then
    n_records: int = 0
    n_rejected: int = 0
    n_duplicates: int = 0


@dataclass
class _Segment:
    seg: int
    target: Target
    run: str | None  # overrides of the records' own run, step and split (--run ...; None: theirs)
    step: int | None
    split: str | None
    scope: str  # the file's name: the scope of ids of records that name no evaluation
    path: Path | None = None  # a native file read by DuckDB; None: converted lines
    offset: int = 0
    cut: bool = False  # the file's last line has no line end
    n_failures: int = 0


@dataclass
class _Job:
    """What one flush loads: the files' segments, converted lines and conversion failures."""
    segments: list[_Segment]
    lines: list[tuple[int, int, str, str]]  # (seg, line_no, line, location)
    failures: list[tuple[int, int, str, str]]  # (seg, line_no, raw, reason)


LINE_SCHEMA = pa.schema([("seg", pa.int32()), ("line_no", pa.int64()), ("line", pa.string()),
                         ("location", pa.string())])
ARROW_BATCH = 1 << 16  # rows per Arrow batch streamed from the staging connection

_names = itertools.count()


def file_lines_sql(seg: int, offset: int) -> str:
    """The lines of a native file numbered as read, on one thread (numbers after an undecodable
    line are fixed with _rl_renumber)."""
    return f"""
    SELECT {int(seg)}::INTEGER AS seg, n + {int(offset)} AS line_no, line FROM (
        SELECT row_number() OVER () AS n, line FROM {csv_lines_sql(False)})
    """


def numbered_sql(seg: int, offset: int) -> str:
    """Number the lines of segment ``seg`` that were parsed as read in parallel: rows keep the
    file's order (DuckDB inserts in order), so a line's number is its row's place."""
    first = f"(SELECT min(rowid) FROM {native.PARSED} WHERE seg = {int(seg)})"
    line_no = f"rowid - {first} + 1 + {int(offset)}"
    return f"""UPDATE {native.PARSED} SET line_no = {line_no}, pos = ({int(seg)}::BIGINT << 40) + {line_no}
               WHERE seg = {int(seg)}"""


def renumber_sql(read: str, offset: int) -> str:
    """Where a file had undecodable lines: the n-th line read (``read`` of them) is the n-th line
    number not taken by one."""
    return f"""
    CREATE OR REPLACE TEMP TABLE _rl_renumber AS
    WITH {good_numbers_sql(read)}
    SELECT n + {int(offset)} AS read_no, line_no + {int(offset)} AS line_no FROM good
    """


def encoding_rejects_sql(seg: int, offset: int) -> str:
    return f"""
    INSERT INTO _rl_encoding
    SELECT DISTINCT ON (line) {int(seg)}, line + {int(offset)}, csv_line, {ENCODING_REASON_SQL}
    FROM _rl_csv_rejects ORDER BY line
    """


def insert_sources_sql() -> str:
    """The sources rows of files read for the first time, as parallel lists: source ids, paths,
    formats, sha256s, sizes, options (JSON text or NULL)."""
    return """INSERT INTO sources (source_id, path, format, sha256, bytes, ingested_at, options)
              SELECT unnest($1), unnest($2), unnest($3), unnest($4), unnest($5), now()::TIMESTAMP, unnest($6)::JSON"""


class Batch:
    """Lines of one file or of many, waiting to be loaded together (``flush``)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, shared: bool = True, apart: bool | None = None):
        self.con = con
        self.shared = shared
        self.apart = shared if apart is None else apart  # staged outside the transaction
        self.staging_memory_limit: str | None = None
        self._stage: duckdb.DuckDBPyConnection | None = None
        self._loading: threading.Thread | None = None  # a flush running beside the caller
        self._failed: BaseException | None = None
        self._reset()

    def _reset(self) -> None:
        self.segments: dict[Target, _Segment] = {}
        self.lines: list[tuple[int, int, str, str]] = []
        self.failures: list[tuple[int, int, str, str]] = []
        self.n_lines = 0
        self.n_bytes = 0

    @classmethod
    def alone(cls, ctx: LoadContext, apart: bool = False) -> "Batch":
        """A batch of one file (or a chunk of one), loaded now: its rejects are left in
        _rl_rejects (line_no, raw, reason) for the caller to file, as every loader's are. Staged
        in the ingest's transaction, or ``apart`` (the chunks of a large file: memory stays a
        chunk's)."""
        batch = cls(ctx.con, shared=False, apart=apart)
        batch.alone_target = Target(source_id=ctx.source_id)
        return batch

    # --- staging ---------------------------------------------------------------------------------

    def _segment(self, target: Target | None, ctx: LoadContext) -> _Segment:
        target = target if target is not None else self.alone_target
        if target not in self.segments:
            self.segments[target] = _Segment(len(self.segments), target, ctx.run, ctx.step, ctx.split,
                                             ctx.file_name or ctx.path.name)
        return self.segments[target]

    def add_converted(self, target: Target | None, ctx: LoadContext) -> "Batch":
        """Records a format converted (``ctx.converted``), with the run, step and split the format
        gives them (``ctx``)."""
        converted = ctx.converted
        seg = self._segment(target, ctx)
        self.lines.extend((seg.seg, n, line, where) for n, line, where in converted.lines)
        self.failures.extend((seg.seg, n, raw, reason) for n, raw, reason in converted.failures)
        seg.n_failures += len(converted.failures)
        self.n_lines += len(converted.lines) + len(converted.failures)
        self.n_bytes += sum(len(line) for _, line, _ in converted.lines)
        self._flush_if_full()
        return self

    def add_file(self, target: Target | None, ctx: LoadContext) -> "Batch":
        """A native file's lines (``ctx.source``), numbered after ``ctx.line_offset``: read when
        the batch loads."""
        path, offset = ctx.source, ctx.line_offset
        seg = self._segment(target, ctx)
        if seg.path is not None:  # one file a segment
            self.flush()
            seg = self._segment(target, ctx)
        seg.path, seg.offset, seg.cut = Path(path), offset, not ends_with_newline(path)
        size = Path(path).stat().st_size
        self.n_bytes += size
        self.n_lines += max(1, size // 512)  # about: a file counts by its size until read
        self._flush_if_full()
        return self

    def _flush_if_full(self) -> None:
        if self.shared and (self.n_lines >= config.CONVERT_BATCH_RECORDS or self.n_bytes >= config.BATCH_BYTES):
            self.flush(wait=False)

    def finish(self) -> LoadResult:
        """Load a batch ``alone`` and say what came of its file."""
        try:
            self.flush()
        finally:
            self.close()
        t = self.alone_target
        return LoadResult(n_records=t.n_records, n_rejected=t.n_rejected, n_duplicates=t.n_duplicates)

    # --- where the lines are checked ----------------------------------------------------------------

    @property
    def stage(self) -> duckdb.DuckDBPyConnection:
        """The connection lines are parsed and checked on: a cursor of the database outside the
        ingest's transaction (apart), or the transaction itself."""
        if not self.apart:
            return self.con
        if self._stage is None:
            self._stage = self.con.cursor()
            self._stage.execute("SET SESSION TimeZone = 'UTC'")
            self._stage.execute("SET SESSION arrow_lossless_conversion = true")  # JSON stays JSON on the way across
        return self._stage

    def close(self) -> None:
        """Let go of the staging connection (after any flush running beside the caller)."""
        if self._loading is not None:
            self._loading.join()
            self._loading = None
        if self._stage is not None:
            self._stage.close()
            self._stage = None

    def _to_main(self, name: str, sql: str, params=None) -> None:
        """The staging side's ``sql`` as a table of the ingest's transaction."""
        if self.stage is self.con:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}", params)
            return
        table = self.stage.sql(sql, params=params).to_arrow_table()
        self._from_arrow(self.con, name, table)

    def _to_stage(self, name: str, sql: str) -> None:
        """The ingest's ``sql`` as a table of the staging side."""
        if self.stage is self.con:
            self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}")
            return
        self._from_arrow(self.stage, name, self.con.sql(sql).to_arrow_table())

    @staticmethod
    def _from_arrow(con, name: str, table: pa.Table) -> None:
        view = f"_rl_arrow_{next(_names)}"
        con.register(view, table)
        try:
            con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM {view}")
        finally:
            con.unregister(view)

    def _stream(self, sql: str, streams: list[str]) -> str:
        """Where the ingest's inserts read the staging side's ``sql``: the query itself, or an
        Arrow stream of it (read once, never held whole)."""
        if self.stage is self.con:
            return f"({sql})"
        view = f"_rl_stream_{next(_names)}"
        self.con.register(view, self.stage.sql(sql).to_arrow_reader(ARROW_BATCH))
        streams.append(view)
        return view

    # --- loading --------------------------------------------------------------------------------------

    def flush(self, wait: bool = True) -> None:
        """Parse, check and insert every staged line; add each file's counts to its Target.
        ``wait=False`` (a shared batch that filled up): the load runs in a thread of its own
        while the caller reads and converts the next files (DuckDB lets go of Python's lock);
        ``wait()`` before touching the database."""
        self.wait()
        if not self.segments:
            return
        job = _Job(list(self.segments.values()), self.lines, self.failures)
        self._reset()
        if wait or not self.shared:
            self._run(job)
            return
        self._loading = threading.Thread(target=self._run_beside, args=(job,), name="rolloutlab-batch", daemon=True)
        self._loading.start()

    def wait(self) -> None:
        """Until a flush running beside the caller has finished; its error, if any, raised here."""
        if self._loading is not None:
            self._loading.join()
            self._loading = None
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed

    @property
    def loading(self) -> bool:
        return self._loading is not None

    def _run_beside(self, job: _Job) -> None:
        try:
            self._run(job)
        except BatchFailed as exc:  # raised to the caller at its next wait()
            self._failed = exc
        except BaseException as exc:  # not the caller's current file: the call is redone a file at a time
            self._failed = BatchFailed(f"{type(exc).__name__}: {exc}")
            self._failed.__cause__ = exc

    def _run(self, job: _Job) -> None:
        try:
            self._load(job)
        except (OSError, KeyboardInterrupt, BatchFailed):
            raise
        except Exception as exc:
            if not self.shared:
                raise
            raise BatchFailed(f"{type(exc).__name__}: {exc}") from exc

    def _load(self, job: _Job) -> None:
        with self._staging_memory():
            self._load_job(job)

    def _load_job(self, job: _Job) -> None:
        con, st = self.con, self.stage
        segments = job.segments
        self.new_sources([s.target for s in segments])
        seg_rows = [(s.seg, s.target.source_id, s.run, s.step, s.split, s.scope) for s in segments]
        seg_sql = f"""CREATE OR REPLACE TEMP TABLE {native.SEGS} AS
            SELECT unnest($seg)::INTEGER AS seg, unnest($sid)::INTEGER AS source_id, unnest($run)::VARCHAR AS run,
                   unnest($step)::INTEGER AS step, unnest($split)::VARCHAR AS split, unnest($scope)::VARCHAR AS scope,
                   NULL::BIGINT AS cut_line"""
        seg_params = dict(zip(("seg", "sid", "run", "step", "split", "scope"), map(list, zip(*seg_rows))))
        for c in {id(con): con, id(st): st}.values():
            c.execute(seg_sql, seg_params)
        streams: list[str] = []
        try:
            self._parse(st, job)
            for sql in native.stage_sql():
                st.execute(sql)
            self._to_main("_rl_live", native.live_sql())
            native.settle_sql(con)
            self._rejects(job)
            for sql, values in native.insert_sql():
                con.execute(sql if values is None else sql.replace(native.SOURCE, self._stream(values, streams)))
            self._count(job)
        finally:
            for view in streams:
                con.unregister(view)
            if st is not con and job.lines:
                st.unregister("_rl_lines_in")
        # tables of the staging side go (freed: it is outside the transaction); those of the
        # transaction are small (DuckDB keeps them until the commit)
        for table in (*native.STAGE_TABLES, "_rl_encoding", "_rl_csv_rejects", "_rl_csv_scans", "_rl_renumber",
                      "_rl_reject_pos", native.SEGS):
            st.execute(f"DROP TABLE IF EXISTS {table}")
        st.execute(f"DROP {'TABLE' if st is con else 'VIEW'} IF EXISTS _rl_lines")
        for table in (*native.MAIN_TABLES, "_rl_flush_rejects", "_rl_extra_rejects", native.SEGS):
            con.execute(f"DROP TABLE IF EXISTS {table}")

    @contextlib.contextmanager
    def _staging_memory(self):
        """A large file alone stages in the transaction, which keeps what it stages until the
        commit: it loads under a lower memory limit (config.STAGING_MEMORY_LIMIT; a limit the user
        set, $ROLLOUTLAB_MEMORY_LIMIT, stays), past which DuckDB spills to disk instead of holding
        the file whole."""
        limit = self.staging_memory_limit
        if limit is None or os.environ.get("ROLLOUTLAB_MEMORY_LIMIT"):
            yield
            return
        self.con.execute("SET memory_limit = ?", [limit])
        try:
            yield
        finally:  # back to the writer's (store.connect); DuckDB shows a limit rounded, never to be set back as shown
            self.con.execute("SET memory_limit = ?", [config.WRITER_MEMORY_LIMIT])

    def new_sources(self, targets: list[Target]) -> None:
        """Source ids for the files loading for the first time, in their order; their sources rows."""
        new = [t for t in targets if t.source_id is None]
        if not new:
            return
        ids = sorted(r[0] for r in self.con.execute(
            "SELECT nextval('source_id_seq') FROM range(?)", [len(new)]).fetchall())
        for t, sid in zip(new, ids):
            t.source_id = sid
        rows = [(t.source_id, *t.new_source) for t in new if t.new_source is not None]
        if rows:
            self.con.execute(insert_sources_sql(), list(map(list, zip(*rows))))

    def _parse(self, st, job: _Job) -> None:
        """Every staged line into _rl_parsed, numbered per file; undecodable lines into _rl_encoding."""
        st.execute("CREATE OR REPLACE TEMP TABLE _rl_encoding (seg INTEGER, line_no BIGINT, raw VARCHAR, reason VARCHAR)")
        st.execute(native.parse_sql("SELECT NULL::INTEGER AS seg, NULL::BIGINT AS line_no, NULL::VARCHAR AS line "
                                    "WHERE false", create=True))
        if job.lines:
            seg, line_no, line, location = map(list, zip(*job.lines))
            table = pa.table([pa.array(seg, pa.int32()), pa.array(line_no, pa.int64()), pa.array(line, pa.string()),
                              pa.array(location, pa.string())], schema=LINE_SCHEMA)
            if st is self.con:
                self._from_arrow(st, "_rl_lines", table)
            else:  # the staging side is outside the transaction: a view on the Arrow table, never copied
                st.register("_rl_lines_in", table)
                st.execute("CREATE OR REPLACE TEMP VIEW _rl_lines AS SELECT * FROM _rl_lines_in")
            st.execute(native.parse_sql("SELECT seg, line_no, line FROM _rl_lines", create=False))
        for s in job.segments:
            if s.path is None or s.path.stat().st_size == 0:
                continue
            for table in ("_rl_csv_rejects", "_rl_csv_scans"):
                st.execute(f"DROP TABLE IF EXISTS {table}")
            path = {"path": glob_literal(s.path)}  # a name with [ ] * ? is not a pattern
            # read and parsed on every core; numbered after
            st.execute(native.parse_sql(f"SELECT {s.seg}::INTEGER AS seg, NULL::BIGINT AS line_no, line "
                                        f"FROM {csv_lines_sql(True)}", create=False), path)
            st.execute(numbered_sql(s.seg, s.offset))
            if st.execute("SELECT count(*) FROM _rl_csv_rejects").fetchone()[0]:
                # undecodable lines: read again on one thread, whose reject line numbers are exact
                st.execute(f"DELETE FROM {native.PARSED} WHERE seg = {s.seg}")
                for table in ("_rl_csv_rejects", "_rl_csv_scans"):
                    st.execute(f"DROP TABLE IF EXISTS {table}")
                st.execute(native.parse_sql(file_lines_sql(s.seg, s.offset), create=False), path)
                st.execute(renumber_sql(f"SELECT count(*) FROM {native.PARSED} WHERE seg = {s.seg}", s.offset))
                st.execute(f"""UPDATE {native.PARSED} SET line_no = m.line_no, pos = ({s.seg}::BIGINT << 40) + m.line_no
                               FROM _rl_renumber m WHERE seg = {s.seg} AND {native.PARSED}.line_no = m.read_no""")
                st.execute(encoding_rejects_sql(s.seg, s.offset))
            if s.cut:
                st.execute(f"""UPDATE {native.SEGS} SET cut_line = (SELECT max(line_no) FROM {native.PARSED}
                                                                   WHERE seg = {s.seg} AND NOT blank)
                               WHERE seg = {s.seg}""")

    @staticmethod
    def _raw_lines_sql(job: _Job, positions: str) -> str:
        """(pos, raw, location) of the lines at ``positions`` (a table of pos): the text of lines
        that did not parse is kept, a converted line's is staged, a native file's was read again."""
        if not job.lines:
            return f"""SELECT q.pos, p.bad_line AS raw, NULL::VARCHAR AS location
                       FROM {positions} q LEFT JOIN {native.PARSED} p USING (pos)"""
        return f"""SELECT q.pos, coalesce(p.bad_line, l.line) AS raw, l.location
                   FROM {positions} q LEFT JOIN {native.PARSED} p USING (pos)
                   LEFT JOIN (SELECT {native.POSITION} AS pos, line, location FROM _rl_lines) l USING (pos)"""

    def _reread(self, st, job: _Job) -> None:
        """Raw text of native lines rejected for what they hold (their text was not kept): read again."""
        need = st.execute(f"""SELECT DISTINCT q.seg FROM _rl_reject_pos q JOIN {native.PARSED} p USING (pos)
                              WHERE p.bad_line IS NULL""").fetchall()
        by_seg = {s.seg: s for s in job.segments}
        for (seg,) in need:
            s = by_seg[seg]
            if s.path is None:
                continue
            renumbered = st.execute("SELECT count(*) FROM _rl_encoding WHERE seg = ?", [seg]).fetchone()[0] > 0
            # the same numbering as the first read (undecodable lines were not rows then either)
            lines = file_lines_sql(s.seg, s.offset)
            if renumbered:
                for table in ("_rl_csv_rejects", "_rl_csv_scans"):
                    st.execute(f"DROP TABLE IF EXISTS {table}")
                st.execute(f"CREATE OR REPLACE TEMP TABLE _rl_reread AS {lines}", {"path": glob_literal(s.path)})
                st.execute(renumber_sql("SELECT count(*) FROM _rl_reread", s.offset))
                st.execute("""UPDATE _rl_reread SET line_no = m.line_no FROM _rl_renumber m
                              WHERE _rl_reread.line_no = m.read_no""")
            else:
                st.execute(f"""CREATE OR REPLACE TEMP TABLE _rl_reread AS SELECT * FROM ({lines})
                               WHERE ({native.POSITION}) IN (SELECT pos FROM _rl_reject_pos)""",
                           {"path": glob_literal(s.path)})
            st.execute(f"""UPDATE {native.PARSED} SET bad_line = r.line FROM _rl_reread r
                           WHERE {native.PARSED}.seg = {int(seg)} AND {native.PARSED}.line_no = r.line_no
                             AND {native.PARSED}.pos IN (SELECT pos FROM _rl_reject_pos)""")
            st.execute("DROP TABLE _rl_reread")

    def _rejects(self, job: _Job) -> None:
        """_rl_flush_rejects (seg, line_no, raw, reason) of the batch: lines rejected for what they
        hold, for their id or attempt, undecodable lines, and records that could not be converted
        (a converted line's reason starts with where its record is)."""
        con, st = self.con, self.stage
        con.execute("""CREATE OR REPLACE TEMP TABLE _rl_extra_rejects AS
            SELECT pos, reason FROM _rl_clashes UNION ALL SELECT pos, reason FROM _rl_attempts WHERE reason IS NOT NULL""")
        self._to_stage("_rl_extra", "SELECT * FROM _rl_extra_rejects")
        st.execute("""CREATE OR REPLACE TEMP TABLE _rl_reject_pos AS
            SELECT pos, seg, line_no, reason FROM _rl_rejected
            UNION ALL SELECT e.pos, w.seg, w.line_no, e.reason FROM _rl_extra e JOIN _rl_rows w USING (pos)""")
        st.execute("DROP TABLE IF EXISTS _rl_extra")
        self._reread(st, job)
        located = f"""SELECT q.seg, q.line_no, r.raw, coalesce(r.location || ': ', '') || q.reason AS reason
                      FROM _rl_reject_pos q JOIN ({self._raw_lines_sql(job, '_rl_reject_pos')}) r USING (pos)
                      UNION ALL SELECT seg, line_no, raw, reason FROM _rl_encoding"""
        self._to_main("_rl_flush_rejects", located)
        if job.failures:
            seg, line_no, raw, reason = map(list, zip(*job.failures))
            con.execute("INSERT INTO _rl_flush_rejects SELECT unnest($1), unnest($2), unnest($3), unnest($4)",
                        [seg, line_no, raw, reason])
        if self.shared:
            con.execute(f"""INSERT INTO rejects SELECT s.source_id, j.line_no, j.raw, j.reason
                            FROM _rl_flush_rejects j JOIN {native.SEGS} s USING (seg) ORDER BY s.source_id, j.line_no""")
        else:  # one file alone: staged for its caller, as every loader's rejects are
            con.execute(f"CREATE OR REPLACE TEMP TABLE {STAGED_REJECTS} (line_no BIGINT, raw VARCHAR, reason VARCHAR)")
            con.execute(f"INSERT INTO {STAGED_REJECTS} SELECT line_no, raw, reason FROM _rl_flush_rejects ORDER BY line_no")

    def _count(self, job: _Job) -> None:
        """Each file's records read, rejected and duplicated in this flush, added to its Target."""
        st = self.stage
        read = dict(st.execute(f"""SELECT seg, count(*) FROM (
            SELECT seg FROM {native.PARSED} WHERE NOT blank UNION ALL SELECT seg FROM _rl_encoding) GROUP BY seg""").fetchall())
        rejected = dict(self.con.execute("SELECT seg, count(*) FROM _rl_flush_rejects GROUP BY seg").fetchall())
        duplicates = dict(self.con.execute("SELECT seg, count(*) FROM _rl_dupes GROUP BY seg").fetchall())
        for s in job.segments:
            t = s.target
            t.n_records += read.get(s.seg, 0) + s.n_failures
            t.n_rejected += rejected.get(s.seg, 0)
            t.n_duplicates += duplicates.get(s.seg, 0)

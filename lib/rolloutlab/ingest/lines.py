"""Read a JSONL file into a numbered temp table inside DuckDB, rejecting lines that are not UTF-8.

The CSV reader with a delimiter that valid JSON never contains (\\x01) hands every line over as
one VARCHAR, in file order, and records undecodable lines (with their line numbers) in a rejects
table instead of failing. Line numbers of the good lines are recovered by counting around the
rejected ones, all in SQL.
"""
from __future__ import annotations

import itertools
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import duckdb

from .. import config
from ..store.database import glob_literal

LINES_TABLE = "_rl_lines"  # (line_no, line): non-blank, decodable lines
STAGED_REJECTS = "_rl_rejects"  # (line_no, raw, reason): what a loader could not load


def csv_lines_sql(parallel: bool = False) -> str:
    """Every line of the file at $path (blank ones too, as NULL or spaces), in file order: the CSV
    reader with a delimiter that valid JSON never contains hands each line over whole, and records
    undecodable lines in _rl_csv_rejects instead of failing (they are then missing here). The
    buffer holds the longest line allowed plus 1 MiB, so a large file reads on more than one core."""
    limit = config.limit("MAX_LINE_BYTES")
    return f"""read_csv($path, columns = {{'line': 'VARCHAR'}}, header = false,
            delim = '\x01', quote = '', escape = '', auto_detect = false, strict_mode = false,
            null_padding = false, ignore_errors = true, store_rejects = true,
            rejects_table = '_rl_csv_rejects', rejects_scan = '_rl_csv_scans',
            max_line_size = {limit}, buffer_size = {limit + (1 << 20)}, parallel = {str(parallel).lower()})"""


def read_lines_sql() -> str:
    return f"CREATE OR REPLACE TEMP TABLE _rl_raw AS SELECT line FROM {csv_lines_sql()}"


def good_numbers_sql(read: str) -> str:
    """CTEs ``bad`` (the numbers of undecodable lines) and ``good`` (``line_no`` and ``n``: the
    n-th line read, ``read`` of them, is the n-th line number not taken by an undecodable line)."""
    return f"""bad AS (SELECT DISTINCT line AS line_no FROM _rl_csv_rejects),
    total AS (SELECT ({read}) + (SELECT count(*) FROM bad) AS n),
    good AS (SELECT g.line_no, row_number() OVER (ORDER BY g.line_no) AS n
             FROM total, generate_series(1, total.n) AS g(line_no) WHERE g.line_no NOT IN (SELECT line_no FROM bad))"""


# The reason an undecodable line is rejected (a row of _rl_csv_rejects)
ENCODING_REASON_SQL = """CASE WHEN error_type = 'INVALID ENCODING'
             THEN 'invalid UTF-8: the line has bytes that are not UTF-8; re-encode the file as UTF-8'
             ELSE 'unreadable line (' || error_type || '): ' || error_message END"""
# The reason a last line without a line end that does not parse is rejected
TRUNCATED_REASON = ("'invalid JSON on the last line, which has no line end: the file looks truncated (was the writer "
                    "stopped mid-write?)'")


# rowids follow insertion (= file) order; inside a transaction they start at a large offset.
POSITION = "rowid - (SELECT min(rowid) FROM _rl_raw)"
# Cheap on long lines: only short ones can be blank.
NOT_BLANK = "line IS NOT NULL AND (strlen(line) > 64 OR trim(line) <> '')"


def number_lines_sql(with_rejected_lines: bool, offset: int = 0) -> str:
    """Lines numbered from ``offset`` + 1 (a file's new lines continue its numbering)."""
    offset = int(offset)
    if not with_rejected_lines:  # the usual case: a view, no copy of the text
        return f"""CREATE OR REPLACE TEMP VIEW {LINES_TABLE} AS
            SELECT {POSITION} + 1 + {offset} AS line_no, line FROM _rl_raw WHERE {NOT_BLANK}"""
    return f"""
    CREATE OR REPLACE TEMP TABLE {LINES_TABLE} AS
    WITH {good_numbers_sql("SELECT count(*) FROM _rl_raw")}
    SELECT n.line_no + {offset} AS line_no, r.line
    FROM (SELECT {POSITION} AS pos, line FROM _rl_raw) r JOIN (SELECT line_no, n - 1 AS pos FROM good) n USING (pos)
    WHERE {NOT_BLANK}
    """


def encoding_rejects_sql(offset: int = 0) -> str:
    return f"""
    INSERT INTO {STAGED_REJECTS}
    SELECT DISTINCT ON (line) line + {int(offset)}, csv_line, {ENCODING_REASON_SQL}
    FROM _rl_csv_rejects ORDER BY line
    """


@dataclass(frozen=True)
class Staged:
    n_records: int  # non-blank lines, decodable or not
    cut_line: int | None  # the last line when the file does not end with a line end

    def truncated_sql(self) -> str:
        """A CASE branch that explains a last line that does not parse because it was cut off
        (``r`` is the line's parse, NULL when invalid); empty when the file ends cleanly."""
        if self.cut_line is None:
            return ""
        return f"WHEN r IS NULL AND line_no = {int(self.cut_line)} THEN {TRUNCATED_REASON}"


def stage_lines(con: duckdb.DuckDBPyConnection, path: Path, offset: int = 0) -> Staged:
    """Make ``_rl_lines(line_no, line)`` (blank lines skipped) and stage undecodable lines;
    line numbers start after ``offset``."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE {STAGED_REJECTS} (line_no BIGINT, raw VARCHAR, reason VARCHAR)")
    drop_lines(con)
    if path.stat().st_size == 0:
        con.execute("CREATE TEMP TABLE _rl_raw (line VARCHAR)")
        con.execute(number_lines_sql(False, offset))
        return Staged(0, None)
    con.execute(read_lines_sql(), {"path": glob_literal(path)})  # a name with [ ] * ? is not a pattern
    n_bad = con.execute("SELECT count(*) FROM _rl_csv_rejects").fetchall()[0][0]
    con.execute(number_lines_sql(n_bad > 0, offset))
    con.execute(encoding_rejects_sql(offset))
    n_lines, last = con.execute(f"SELECT count(*), max(line_no) FROM {LINES_TABLE}").fetchall()[0]
    return Staged(n_lines + n_bad, None if ends_with_newline(path) else last)


def drop_lines(con: duckdb.DuckDBPyConnection) -> None:
    kind = con.execute("SELECT table_type FROM information_schema.tables WHERE table_name = ?",
                       [LINES_TABLE]).fetchone()
    if kind:
        con.execute(f"DROP {'VIEW' if kind[0] == 'VIEW' else 'TABLE'} {LINES_TABLE}")
    for table in ("_rl_raw", "_rl_csv_rejects", "_rl_csv_scans"):
        con.execute(f"DROP TABLE IF EXISTS {table}")


def ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        if fh.tell() == 0:
            return True
        fh.seek(-1, 2)
        return fh.read(1) == b"\n"


def add_rejects(con: duckdb.DuckDBPyConnection, rejects: list[tuple[int, str, str]]) -> None:
    """(line_no, raw, reason) rows into the staged rejects, in one statement."""
    if rejects:
        lines, raws, reasons = zip(*rejects)
        con.execute(f"INSERT INTO {STAGED_REJECTS} SELECT unnest($l), unnest($r), unnest($why)",
                    {"l": list(lines), "r": list(raws), "why": list(reasons)})


_gathering = itertools.count()


@contextmanager
def gathered_rejects(con: duckdb.DuckDBPyConnection) -> Iterator:
    """For a loader that loads in parts: ``keep()`` after each part adds its staged rejects to the
    call's; at the end they are the staged rejects. Each use has its own table, so a part that
    itself loads in parts (a large batch file) does not clobber the caller's."""
    table = f"_rl_gathered_{next(_gathering)}"
    con.execute(f"CREATE OR REPLACE TEMP TABLE {table} (line_no BIGINT, raw VARCHAR, reason VARCHAR)")
    yield lambda: con.execute(f"INSERT INTO {table} SELECT * FROM {STAGED_REJECTS}")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {STAGED_REJECTS} AS SELECT * FROM {table}")
    con.execute(f"DROP TABLE {table}")

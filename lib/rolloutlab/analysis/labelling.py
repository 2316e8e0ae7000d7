"""People's judgements of rollouts: "this one is actually correct" (docs/metrics.md, "Labels").

A label is one person's verdict on one rollout: pass / fail, or a score, with a note, who and
when. Labels live in the store's ``labels`` table, tied to the rollout id and to no source, so
re-ingesting the logs keeps them; the lake exports them with the rest. Several people may label
a rollout, and a person may change their mind: every judgement is kept, and the statistics use
each person's latest one (``label_truth_sql``).

Writing needs a writable connection (``rolloutlab.connect(db)``); given a ``SharedReader``,
``label`` lets go of the file, opens a short-lived writing connection, writes, and closes it.
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
from datetime import date, datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from .. import config
from ..store import database as store
from .metrics.common import included_sql, params, pass_at_sql, resolve_runs, run_sql, sample_texts_sql

LABEL_NOTE_MAX_CHARS = config.LABEL_NOTE_MAX_CHARS  # (config.py)
LABEL_WHO_MAX_CHARS = config.LABEL_WHO_MAX_CHARS
LABEL_ID_MAX_CHARS = config.LABEL_ID_MAX_CHARS
LABEL_SAMPLE_SIZE = config.LABEL_SAMPLE_SIZE
LABEL_SHOWN_REJECTS = config.LABEL_SHOWN_REJECTS

PASS_WORDS = {"pass", "passed", "correct", "true", "yes", "good", "1"}
FAIL_WORDS = {"fail", "failed", "incorrect", "wrong", "false", "no", "bad", "0"}
COLUMNS = ["rollout_id", "run", "sample_id", "value", "passed", "note", "who", "labelled_at", "origin"]
IMPORT_COLUMNS = ["path", "format", "records", "loaded", "duplicates", "rejected", "unknown_rollouts", "reasons"]
EXPORT_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}
TEXT_FIELDS = ("rollout_id", "run", "sample_id", "note", "who", "origin")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet would run these as formulas
_GUARDED_START = _FORMULA_START + ("'",)  # ...and the guard itself, so that taking it off is exact
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ]|$)")  # an ISO-8601 timestamp starts with its date
_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # bytes that are not UTF-8, as surrogateescape decodes them


class LabelError(ValueError):
    """A label that cannot be stored, with the reason."""


def parse_value(value) -> tuple[float, bool | None]:
    """(value, passed) of a judgement: pass / fail (True / False, "pass", "fail", "correct", ...)
    is 1.0 / 0.0 with ``passed`` set; a number is a score, its pass decided later by the pass
    threshold (``passed`` None)."""
    if isinstance(value, bool):
        return (1.0 if value else 0.0), value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in PASS_WORDS:
            return 1.0, True
        if word in FAIL_WORDS:
            return 0.0, False
        try:
            value = float(word)
        except ValueError:
            raise LabelError(f"label {value!r}: use pass / fail or a number") from None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LabelError(f"label {_shown(value)}: use pass / fail or a number") from None
    except OverflowError:  # an integer of 400 digits
        number = math.inf
    if not math.isfinite(number):
        raise LabelError(f"label {_shown(value)}: not a finite number")
    return number, None


def _shown(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _text(value, name: str, limit: int) -> str | None:
    """Text (a number is taken as its text); an object, a list or true / false is refused rather
    than stored as its Python repr, and so is a lone surrogate (JSON's "\\ud800"), which no
    store can encode."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (dict, list, tuple, set, bool)):
        raise LabelError(f"{name} must be text, not {type(value).__name__}")
    text = str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise LabelError(f"{name} is not valid Unicode (a lone surrogate)") from None
    if len(text) > limit:
        raise LabelError(f"{name} has {len(text):,} characters; at most {limit:,}")
    return text


def _when(value) -> datetime:
    """A timestamp as naive UTC within the store's sane window (config.TIMESTAMP_MIN/MAX). Text
    must be ISO-8601 (``2025-03-01``, ``2025-03-01T10:00:00+02:00``): "now", "today" or a bare
    number would be a different time at each import, so re-importing would add it again."""
    if value is None or value == "":
        return datetime.now(timezone.utc).replace(tzinfo=None)
    if isinstance(value, str):
        if not _ISO_DATE.match(value.strip()):
            raise LabelError(f"labelled_at {value!r}: not an ISO-8601 timestamp")
    elif not isinstance(value, (date, np.datetime64)):  # (datetime and pd.Timestamp are dates)
        raise LabelError(f"labelled_at {value!r}: not an ISO-8601 timestamp")
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError, OverflowError):
        raise LabelError(f"labelled_at {value!r}: not an ISO-8601 timestamp") from None
    if ts is pd.NaT:
        raise LabelError(f"labelled_at {value!r}: not an ISO-8601 timestamp")
    if ts.tzinfo is not None:
        ts = ts.tz_convert("UTC").tz_localize(None)
    if not (pd.Timestamp(config.TIMESTAMP_MIN) <= ts < pd.Timestamp(config.TIMESTAMP_MAX)):
        raise LabelError(f"labelled_at {value!r}: outside {config.TIMESTAMP_MIN} .. {config.TIMESTAMP_MAX}")
    return ts.to_pydatetime()


def _row(rollout_id, value, note=None, who=None, origin=None, labelled_at=None, passed=None) -> tuple:
    rid = _text(rollout_id, "rollout_id", LABEL_ID_MAX_CHARS)
    if not rid:
        raise LabelError("no rollout_id")
    v, p = parse_value(value)
    if passed is not None and p is not None and passed != p:
        raise LabelError(f"value {_shown(value)} and passed {str(passed).lower()} contradict each other: "
                         "give one verdict (or a score in value and the verdict in passed)")
    if passed is not None and p is None:  # a score with an explicit verdict (imports)
        p = passed
    return (rid, v, p, _text(note, "note", LABEL_NOTE_MAX_CHARS), _text(who, "who", LABEL_WHO_MAX_CHARS),
            _when(labelled_at), _text(origin, "origin", LABEL_WHO_MAX_CHARS))


def insert_sql() -> str:
    """Insert judgements that are not stored already (same rollout, value, verdict, note, who and
    time: importing a file twice adds nothing)."""
    return """
    INSERT INTO labels
    SELECT n.* FROM new_labels n
    WHERE NOT EXISTS (
        SELECT 1 FROM labels l
        WHERE l.rollout_id = n.rollout_id AND l.value IS NOT DISTINCT FROM n.value
          AND l.passed IS NOT DISTINCT FROM n.passed AND l.note IS NOT DISTINCT FROM n.note
          AND l.who IS NOT DISTINCT FROM n.who AND l.labelled_at IS NOT DISTINCT FROM n.labelled_at)
    """


def _write(con, rows: list[tuple]) -> int:
    """Insert rows (one transaction), skipping judgements already stored; returns rows added."""
    frame = pd.DataFrame(rows, columns=["rollout_id", "value", "passed", "note", "who", "labelled_at", "origin"])
    frame = frame.astype({"rollout_id": object, "value": float, "passed": object, "note": object, "who": object,
                          "origin": object})
    frame["labelled_at"] = pd.to_datetime(frame.labelled_at)
    before = con.execute("SELECT count(*) FROM labels").fetchone()[0]
    with store.transaction(con):
        con.register("new_labels_frame", frame)
        try:
            con.execute("""CREATE OR REPLACE TEMP TABLE new_labels AS
                           SELECT DISTINCT rollout_id::VARCHAR AS rollout_id, value::DOUBLE AS value,
                                  passed::BOOLEAN AS passed, note::VARCHAR AS note, who::VARCHAR AS who,
                                  labelled_at::TIMESTAMP AS labelled_at, origin::VARCHAR AS origin
                           FROM new_labels_frame""")
            con.execute(insert_sql())
            con.execute("DROP TABLE new_labels")
        finally:
            con.unregister("new_labels_frame")
    return con.execute("SELECT count(*) FROM labels").fetchone()[0] - before


def _writable(con, work):
    """Run ``work(writing_connection)``: on ``con`` itself, or — for a SharedReader — on a
    short-lived writing connection to the same file, closed right after."""
    if isinstance(con, store.SharedReader):
        con.release()  # this process's read handle lets go, so the writer can open the file
        writer = store.connect(con.path)
        try:
            return work(writer)
        finally:
            writer.close()
    if con.execute("SELECT readonly FROM duckdb_databases() WHERE database_name = current_database()").fetchone()[0]:
        raise LabelError("This connection is read-only: label through a shared handle (rolloutlab.connect(db, "
                         "read_only=True)) or a writing connection (rolloutlab.connect(db)).")
    return work(con)


def label(con, rollout_id: str, value, note: str | None = None, who: str | None = None,
          origin: str = "python", labelled_at=None) -> pd.DataFrame:
    """Store one judgement of a rollout: ``value`` pass / fail (True / False, "pass", "fail") or a
    score; ``note`` and ``who`` free text; ``origin`` where it was made (the explorer passes
    "explorer"). Works on a writable connection, or on a SharedReader through a short-lived
    writing connection. The rollout must be loaded. Returns the stored row as ``labels`` shows it."""
    row = _row(rollout_id, value, note, who, origin, labelled_at)

    def work(w):
        if not w.execute("SELECT count(*) FROM rollouts WHERE rollout_id = ?", [row[0]]).fetchone()[0]:
            raise LabelError(f"no rollout {row[0]!r} in this database")
        _write(w, [row])
        stored = _labels(w, None, [row[0]])
        mine = (stored.labelled_at == pd.Timestamp(row[5])) & (stored.who.fillna("") == (row[4] or ""))
        return stored[mine].tail(1).reset_index(drop=True)

    return _writable(con, work)


def labels_sql() -> str:
    """Every judgement with the rollout's run and sample (NULL for a rollout not loaded), oldest
    first. Parameters: $run (NULL for all), $ids (NULL for all)."""
    return """
    SELECT l.rollout_id, r.run_id AS run, r.sample_id, l.value, l.passed, l.note, l.who, l.labelled_at, l.origin
    FROM labels l LEFT JOIN rollouts r USING (rollout_id)
    WHERE ($run IS NULL OR r.run_id = $run) AND ($ids IS NULL OR list_contains($ids, l.rollout_id))
    ORDER BY l.labelled_at, l.rollout_id, l.who NULLS FIRST
    """


def _labels(con, run, ids=None) -> pd.DataFrame:
    return run_sql(con, labels_sql(), {"run": run, "ids": ids}).df()[COLUMNS]


def labels(con, run: str | None = None, rollout_ids=None) -> pd.DataFrame:
    """Every judgement stored (of one run's rollouts with ``run``; of the given rollouts with
    ``rollout_ids``, e.g. the one open in the explorer), oldest first: rollout_id, run, sample_id,
    value, passed, note, who, labelled_at, origin."""
    if run is not None:
        [run] = resolve_runs(con, run)
    ids = [rollout_ids] if isinstance(rollout_ids, str) else None if rollout_ids is None else list(rollout_ids)
    return _labels(con, run, ids)


def label_truth_sql() -> str:
    """Per labelled rollout: ``y``, the share of its labellers whose latest judgement is a pass
    (a judgement passes when ``passed`` says so, else when its value reaches its run's pass threshold), and how
    many labellers. Anonymous judgements (no ``who``) count as one labeller. $origin: only
    judgements whose origin starts with it (NULL: all)."""
    return f"""
    WITH latest AS (
        SELECT rollout_id, coalesce(passed, value >= {pass_at_sql()}) AS pass,
               row_number() OVER (PARTITION BY rollout_id, coalesce(who, '')
                                  ORDER BY labelled_at DESC NULLS LAST, value DESC, note) AS newest
        FROM labels LEFT JOIN rollouts USING (rollout_id)
        WHERE $origin IS NULL OR starts_with(coalesce(origin, ''), $origin))
    SELECT rollout_id, avg(pass::DOUBLE) AS y, count(*) AS labellers
    FROM latest WHERE newest = 1 AND pass IS NOT NULL GROUP BY rollout_id
    """


def labelling_sample_sql() -> str:
    """$n counted rollouts of $runs in a seeded random order (a hash of id and seed), the
    already-labelled ones left out when $unlabelled_only: with what a person judges from — the
    prompt and reference of its sample (the run's split first), its final answer, its tool calls —
    each text cut at $chars characters."""
    cut = "CASE WHEN length({x}) > $chars THEN left({x}, $chars) || ' […]' ELSE {x} END"
    return f"""
    WITH picked AS (
        SELECT rollout_id, run_id, sample_id, attempt, status, score, final_answer, n_tool_calls, source_id
        FROM ({included_sql()})
        WHERE NOT ($unlabelled_only AND rollout_id IN (SELECT rollout_id FROM labels))
        ORDER BY hash(rollout_id || ':' || $seed::VARCHAR), rollout_id
        LIMIT $n),
    texts AS ({sample_texts_sql("picked")})
    SELECT p.rollout_id, p.run_id AS run, p.sample_id, p.attempt, p.status, p.score,
           {cut.format(x='t.prompt')} AS prompt, {cut.format(x='t.reference')} AS reference,
           {cut.format(x='p.final_answer')} AS final_answer, p.n_tool_calls
    FROM picked p LEFT JOIN texts t USING (rollout_id)
    ORDER BY hash(p.rollout_id || ':' || $seed::VARCHAR), p.rollout_id
    """


def labelling_sample(con, run: str, n: int = LABEL_SAMPLE_SIZE, seed: int = 0, unlabelled_only: bool = True,
                     include_errors: bool = False, with_score: bool = False) -> pd.DataFrame:
    """``n`` rollouts of ``run`` drawn uniformly at random without replacement (seeded), to label:
    the subset the prediction-powered estimate needs (labels picked by hand — the audit's
    suspects, the odd-looking ones — are not a random subset and bias it). Each with what a person
    judges it from: ``prompt``, ``reference``, ``final_answer`` (each cut at
    ``config.LABEL_SHEET_TEXT_CHARS``), ``n_tool_calls``, and ``open_with`` — how to open its whole
    trajectory in the explorer. The grader's ``score`` is left out unless ``with_score``: a
    labeller who sees it leans toward it, and the labels then measure the grader against itself."""
    [run] = resolve_runs(con, run)
    p = params([run], include_errors, n=int(n), seed=int(seed), unlabelled_only=bool(unlabelled_only),
               chars=int(config.LABEL_SHEET_TEXT_CHARS))
    df = run_sql(con, labelling_sample_sql(), p).df()
    df["open_with"] = [f"rl.explore(con).open_rollout({r!r})" for r in df.rollout_id]
    return df if with_score else df.drop(columns=["score"])


# ---------------------------------------------------------------------------------------------
# Import and export: label elsewhere (a spreadsheet, an annotation tool) and bring them back


def _format(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in ("csv", "jsonl"):
            raise LabelError(f"format {fmt!r}: use csv or jsonl")
        return fmt
    suffix = path.suffix.lower()
    if suffix not in EXPORT_FORMATS:
        raise LabelError(f"{path}: name it .csv or .jsonl (or pass format='csv' / 'jsonl')")
    return EXPORT_FORMATS[suffix]


def _safe_cell(value):
    """A text cell a spreadsheet will not run as a formula (OWASP CSV injection): a leading
    ' before = + - @ tab CR, and before a ' itself, so that ``_unsafe_cell`` can take it off
    again exactly (a note "'=keep my quote" is written "''=keep my quote" and read back as it was)."""
    if isinstance(value, str) and value.startswith(_GUARDED_START):
        return "'" + value
    return value


def _unsafe_cell(value):
    """The inverse of ``_safe_cell``: one leading ' is taken off only when it guards (the next
    character is a formula character or another '); any other leading ' is the text's own."""
    if isinstance(value, str) and value.startswith("'") and value[1:].startswith(_GUARDED_START):
        return value[1:]
    return value


def export_labels(con, path, run: str | None = None, format: str | None = None) -> pd.DataFrame:
    """Write the judgements (``labels(con, run)``) to ``path``: CSV or JSONL by its extension.
    Returns what was written. In CSV, a text cell that starts like a formula (= + - @ tab CR) or
    with ' gets a leading ' so spreadsheets show it as text; ``import_labels`` removes exactly
    that one. Lines end in CRLF (RFC 4180), so every cell holding a CR or LF is quoted: a
    spreadsheet never sees a note's line break as a new row."""
    path = Path(path)
    fmt = _format(path, format)
    if path.is_dir():
        raise LabelError(f"{path} is a folder: give a file name for the labels (.csv or .jsonl)")
    df = labels(con, run)
    out = df.copy()
    out["labelled_at"] = [None if pd.isna(t) else pd.Timestamp(t).isoformat() for t in out.labelled_at]
    out["passed"] = [None if pd.isna(p) else bool(p) for p in out.passed]
    records = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
               for r in out.astype(object).to_dict("records")]
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    else:
        buffer = io.StringIO()
        # "\r\n": the writer quotes a field holding any character of the line terminator, so a
        # bare CR in a note is quoted too (with "\n" alone, "x\r=1" went out unquoted)
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\r\n")
        writer.writeheader()
        for r in records:
            writer.writerow({k: "" if v is None else (_safe_cell(v) if k in TEXT_FIELDS else v) for k, v in r.items()})
        path.write_text(buffer.getvalue(), encoding="utf-8", newline="")
    return df


def _csv_header(path: Path, fields: list[str] | None) -> list[str]:
    """The header's column names; a LabelError unless it names rollout_id and value (or label)
    once each: a sheet without a header would lose its first row as one."""
    expected = "a header row naming the columns: rollout_id and value (or label); optionally passed, note, who, " \
               "labelled_at, origin"
    if fields is None:
        raise LabelError(f"{path}: empty file; expected {expected}")
    names = [f.strip() for f in fields]
    if _NOT_UTF8.search("".join(names)):
        raise LabelError(f"{path}: the header is not UTF-8; save the sheet as CSV UTF-8")
    if "rollout_id" not in names or not ({"value", "label"} & set(names)):
        raise LabelError(f"{path}: the first line {','.join(names)[:200]!r} is not a header; expected {expected}")
    dup = sorted({n for n in names if n and names.count(n) > 1})
    if dup:
        raise LabelError(f"{path}: the header names {', '.join(dup)} more than once; name each column once")
    return names


# appended after a record's lines: a quoted field still open at their end runs into it
_OPEN_QUOTE = "\ue000rolloutlab: a quoted field is still open\ue000\n"


def _csv_record(lines: list[str]) -> list[str] | None:
    """The cells of the one CSV record ``lines`` hold, or None while a quoted field is still open
    at their end. csv.Error when it cannot be read (a field over the csv module's limit)."""
    cells = next(csv.reader(lines + [_OPEN_QUOTE]), [])
    return None if any(_OPEN_QUOTE[:-1] in c for c in cells) else cells


def _row_like(raw: str, names: list[str]) -> bool:
    """Whether one physical line reads as a label row of its own: complete, no more cells than the
    header names, a rollout id and a value (or label) that is one. Inside a quoted field such a
    line means the quote was a stray one."""
    try:
        cells = _csv_record([raw])
    except csv.Error:
        return False
    if not cells or len(cells) > len(names):
        return False
    row = dict(zip(names, (c.strip() for c in cells)))
    value = row.get("value") or row.get("label")
    if not row.get("rollout_id") or not value:
        return False
    try:
        parse_value(value)
    except LabelError:
        return False
    return True


class _Lines:
    """Physical lines with their numbers; lines read ahead can be given back."""

    def __init__(self, source):
        self.source, self.number, self.back = source, 0, []

    def take(self) -> tuple[int, str] | None:
        if self.back:
            return self.back.pop(0)
        raw = next(self.source, None)
        if raw is None:
            return None
        self.number += 1
        return self.number, raw

    def give_back(self, lines: list[tuple[int, str]]) -> None:
        self.back[:0] = lines


def _csv_lines_of_record(lines: _Lines, first: tuple[int, str], names: list[str] | None):
    """(cells, None) of the record starting at ``first``, or (None, why it is rejected and the
    line it ends on). A quoted field spans lines only until a line that reads as a row of its
    own (``_row_like``) or the end of the file: then its quote was a stray one, the record is
    rejected and the lines after it are read again as rows."""
    taken, text = [], [first[1]]
    try:
        while (cells := _csv_record(text)) is None:
            nxt = lines.take()
            if nxt is None or (names is not None and _row_like(nxt[1], names)):
                lines.give_back(taken + ([nxt] if nxt else []))
                where = "the end of the file" if nxt is None else f"line {nxt[0]}, which reads as a row of its own"
                return None, (f'an unmatched " (the quoted cell it opens is still open at {where}): quote the '
                              'whole cell and double each " in it; the lines after it are read as rows')
            taken.append(nxt)
            text.append(nxt[1])
    except csv.Error as exc:
        # a field over the csv module's limit: skip to the line that closes it (an even count of ")
        while sum(t.count('"') for t in text) % 2:
            nxt = lines.take()
            if nxt is None:
                break
            taken.append(nxt)
            text.append(nxt[1])
        why = str(exc)
        if "field larger than field limit" in why:
            why = (f"a field longer than {csv.field_size_limit():,} characters "
                   f"(notes hold at most {LABEL_NOTE_MAX_CHARS:,})")
        last = taken[-1][0] if taken else first[0]
        return None, (f"{why}; lines {first[0]}-{last} skipped" if last > first[0] else why)
    return cells, None


def _csv_records(path: Path):
    """(first line number, dict or error text) per CSV record. Read as UTF-8 line by line: a
    record holding bytes that are not UTF-8 is rejected rather than stored with U+FFFD; a record
    the csv module cannot read (a field over its 128 KiB limit) is rejected and reading goes on
    after it (a quoted field still open is skipped to its end); a stray quote (a quoted cell
    never closed before a line that reads as a row of its own, or before the end) is rejected
    and the lines after it are read as rows; a record with more cells than the header (a note
    with an unquoted comma) is rejected rather than cut. Cells are trimmed, but for ``note``."""
    with path.open(encoding="utf-8-sig", errors="surrogateescape", newline="") as f:
        lines = _Lines(iter(f))
        first = lines.take()
        fields, why = (None, None) if first is None else _csv_lines_of_record(lines, first, None)
        if why is not None:
            raise LabelError(f"{path}: the header cannot be read ({why})")
        names = _csv_header(path, fields)
        while (first := lines.take()) is not None:
            cells, why = _csv_lines_of_record(lines, first, names)
            if why is not None:
                yield first[0], why
                continue
            if not any(c.strip() for c in cells):  # a blank line, or a row of empty cells
                continue
            if _NOT_UTF8.search("".join(cells)):
                yield first[0], "not UTF-8 (save the sheet as CSV UTF-8)"
                continue
            extra = [c for c in cells[len(names):] if c.strip()]
            unnamed = [c for n, c in zip(names, cells) if not n and c.strip()]
            if extra or unnamed:
                yield first[0], (f"{len(cells)} cells but the header names {sum(1 for n in names if n)} columns "
                                 f"(an unquoted comma?)")
                continue
            trimmed = ((n, c if n == "note" else c.strip()) for n, c in zip(names, cells) if n)
            yield first[0], {n: (_unsafe_cell(c) if c != "" else None) for n, c in trimmed}


def _records(path: Path, fmt: str):
    """(line number, dict or error text) per record of the file (for CSV, the record's first line)."""
    if fmt == "jsonl":
        with path.open("rb") as f:
            for i, raw in enumerate(f, 1):
                if len(raw) > config.limit("MAX_LINE_BYTES"):
                    yield i, f"line longer than {config.limit('MAX_LINE_BYTES'):,} bytes"
                    continue
                if not raw.strip():
                    continue
                try:
                    rec = json.loads(raw)
                except (ValueError, UnicodeDecodeError) as exc:
                    yield i, f"not JSON ({str(exc)[:80]})"
                    continue
                yield i, rec if isinstance(rec, dict) else "not a JSON object"
    else:
        yield from _csv_records(path)


def _as_bool(value) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in PASS_WORDS:
        return True
    if word in FAIL_WORDS:
        return False
    raise LabelError(f"passed {value!r}: use true / false")


def _one_value(rec: dict):
    """The judgement of a record with ``value`` or ``label`` (or both, saying the same)."""
    value, label = rec.get("value"), rec.get("label")
    if value is None or label is None:
        return label if value is None else value
    try:
        same = parse_value(value) == parse_value(label)
    except LabelError:
        same = value == label
    if not same:
        raise LabelError(f"value {_shown(value)} and label {_shown(label)} disagree: fill in one of the two columns")
    return value


def import_labels(con, path, who: str | None = None, origin: str | None = None,
                  format: str | None = None) -> pd.DataFrame:
    """Load judgements from a CSV or JSONL file (the columns of ``export_labels``; ``value`` —
    or ``label`` — is required: pass / fail or a number; ``passed``, ``note``, ``who``,
    ``labelled_at`` and ``origin`` are optional; ``run`` and ``sample_id`` are ignored). ``who``
    and ``origin`` fill in where a record has none (origin defaults to ``import:<file name>``).
    Judgements already stored are skipped, so importing a file twice adds nothing: a record
    without ``labelled_at`` takes the file's modification time plus its line number in
    microseconds, so a later row of the sheet (a correction) is the newer judgement. A CSV must
    start with a header naming rollout_id and value (or label), each column once (LabelError
    otherwise). A record that cannot be read is rejected with its line and reason (not UTF-8, a
    field over the csv limit, a stray quote, more cells than the header, a note or who that is
    not text, labelled_at that is not ISO-8601, a value that is not a finite number, a pass / fail
    value that contradicts ``passed``, ``value`` and ``label`` that disagree, ...); CSV cells are
    trimmed but ``note``. Labels of rollouts that are not loaded are kept (they apply once the
    rollout is ingested) and counted.

    Returns one row: path, format, records, loaded, duplicates, rejected, unknown_rollouts,
    reasons (up to LABEL_SHOWN_REJECTS)."""
    path = Path(path)
    fmt = _format(path, format)
    if not path.is_file():
        raise LabelError(f"no file {path}")
    default_origin = origin or f"import:{path.name}"
    # a record without a time takes the file's plus its line in microseconds: importing the same
    # sheet twice adds nothing, and a later row (a correction by the same person) is the newer one
    file_time = pd.Timestamp(datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).replace(tzinfo=None))
    rows, reasons, n = [], [], 0
    for line, rec in _records(path, fmt):
        n += 1
        if isinstance(rec, str):
            reasons.append(f"line {line}: {rec}")
            continue
        try:
            value = _one_value(rec)
            if value is None:
                raise LabelError("no value (pass / fail or a number)")
            rows.append(_row(rec.get("rollout_id"), value, rec.get("note"), rec.get("who") or who,
                             rec.get("origin") or default_origin,
                             file_time + pd.Timedelta(microseconds=line) if rec.get("labelled_at") in (None, "")
                             else rec["labelled_at"],
                             _as_bool(rec.get("passed"))))
        except LabelError as exc:
            reasons.append(f"line {line}: {exc}")

    def work(w):
        added = _write(w, rows) if rows else 0
        ids = sorted({r[0] for r in rows})
        known = w.execute("SELECT count(DISTINCT rollout_id) FROM rollouts WHERE list_contains(?, rollout_id)",
                          [ids]).fetchone()[0] if ids else 0
        return added, len(ids) - known

    added, unknown = _writable(con, work)
    return pd.DataFrame([{"path": str(path), "format": fmt, "records": n, "loaded": added,
                          "duplicates": len(rows) - added, "rejected": len(reasons), "unknown_rollouts": unknown,
                          "reasons": reasons[:LABEL_SHOWN_REJECTS]}], columns=IMPORT_COLUMNS)

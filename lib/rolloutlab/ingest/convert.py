"""Load formats that are mapped record by record: each source record becomes a native record.

A format module yields ``Item``s — a native record, or the reason a source record cannot be one —
with a location users recognize ("simulation 3 (task 13)"). They are written, a batch at a time,
to a temporary native JSONL file where line k is source record k (blank lines stand for the
records of earlier batches and for failed conversions), and loaded by the native loader:
validation, rejects and the typed inserts all run in DuckDB. Conversion failures join the
rejects with their location.
"""
from __future__ import annotations

import itertools
import json
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from .. import config
from . import native
from .context import LoadContext, LoadResult
from .lines import STAGED_REJECTS

RAW_LIMIT = 2000  # characters of a rejected source record kept in rejects.raw


@dataclass
class Item:
    location: str
    record: dict | None = None
    reason: str | None = None
    raw: object = None
    skip: bool = False  # a blank line: keeps the numbering, counts as nothing


def raw_text(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:RAW_LIMIT]


def load_items(ctx: LoadContext, items: Iterable[Item], notes: list[str] | None = None,
               batch: int | None = None) -> LoadResult:
    """Load converted records through the native loader, ``batch`` records at a time (memory
    stays bounded by a batch, not the file), all inside the caller's transaction."""
    batch = batch or config.CONVERT_BATCH_RECORDS
    notes = list(notes or [])
    con = ctx.con
    con.execute("CREATE OR REPLACE TEMP TABLE _rl_all_rejects (line_no BIGINT, raw VARCHAR, reason VARCHAR)")
    n_records = n_rejected = 0
    ordinal = 0
    with tempfile.TemporaryDirectory(prefix="rolloutlab-") as tmp:
        path = Path(tmp) / f"{ctx.path.stem}.jsonl"
        iterator = iter(items)
        while True:
            chunk = list(itertools.islice(iterator, batch))
            if not chunk:
                break
            failures, locations = [], []
            with open(path, "w", encoding="utf-8") as fh:
                fh.write("\n" * ordinal)  # blank lines: line k of the file is source record k
                for item in chunk:
                    ordinal += 1
                    if item.skip:
                        fh.write("\n")
                        continue
                    locations.append((ordinal, item.location))
                    if item.record is None:
                        failures.append((ordinal, raw_text(item.raw), f"{item.location}: {item.reason}"))
                        fh.write("\n")
                    else:
                        fh.write(json.dumps(item.record, default=str, ensure_ascii=False) + "\n")
            result = native.load(replace(ctx, path=path))
            _locate_rejects(con, locations, failures)
            con.execute(f"INSERT INTO _rl_all_rejects SELECT * FROM {STAGED_REJECTS}")
            n_records += result.n_records + len(failures)
            n_rejected += result.n_rejected + len(failures)
            notes += result.notes
    con.execute(f"CREATE OR REPLACE TEMP TABLE {STAGED_REJECTS} AS SELECT * FROM _rl_all_rejects")
    con.execute("DROP TABLE _rl_all_rejects")
    if ordinal == 0:
        notes.append(f"{ctx.path}: no records in the file: nothing to load")
    return LoadResult(n_records=n_records, n_rejected=n_rejected, notes=notes)


def _locate_rejects(con, locations: list[tuple[int, str]], failures: list[tuple[int, str, str]]) -> None:
    """Prefix the native loader's reasons with the source location; add conversion failures.
    One statement each, with list parameters: no per-row round trips."""
    if locations:
        lines, where = zip(*locations)
        con.execute(f"""UPDATE {STAGED_REJECTS} SET reason = w.location || ': ' || {STAGED_REJECTS}.reason
                        FROM (SELECT unnest($lines) AS line_no, unnest($where) AS location) w
                        WHERE w.line_no = {STAGED_REJECTS}.line_no""", {"lines": list(lines), "where": list(where)})
    if failures:
        lines, raws, reasons = zip(*failures)
        con.execute(f"INSERT INTO {STAGED_REJECTS} SELECT unnest($l), unnest($r), unnest($why)",
                    {"l": list(lines), "r": list(raws), "why": list(reasons)})


def loads_file(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def parse_json_arguments(arguments: object) -> object:
    """Tool-call arguments given as a JSON string become the object; other text stays text."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def text_of(content: object) -> str | None:
    """Message content as text: strings as they are, lists of parts joined by their text."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, dict) else str(p) for p in content]
        return "\n".join(p for p in parts if p)
    return json.dumps(content, default=str)


INFRA_MARKERS = ("timeout", "timed out", "connection", "503", "502", "500", "504", "unavailable",
                 "rate limit", "429", "econnreset", "network", "dns", "socket")


def classify_error(text: str | None) -> str:
    """infra_error when an error text looks like a tool/network failure, else model_error."""
    lowered = (text or "").lower()
    return "infra_error" if any(m in lowered for m in INFRA_MARKERS) else "model_error"


def jsonl_records(path: Path):
    """(line number, parsed record or None, raw line, problem) for every line of a JSONL file; blank
    lines come back as None records without a problem."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                yield number, None, line, None
                continue
            try:
                yield number, json.loads(line), line, None
            except ValueError as exc:
                cut = not line.endswith("\n")
                yield number, None, line, ("invalid JSON on the last line, which has no line end: the file looks "
                                           "truncated" if cut else f"invalid JSON ({exc.msg} at column {exc.colno})")


def jsonl_items(path: Path, convert) -> Iterable[Item]:
    """Items of a JSONL file whose lines are mapped one by one by ``convert(record, line_no)``
    -> (native record or None, reason or None); blank, invalid and non-object lines handled here."""
    for number, rec, line, problem in jsonl_records(path):
        location = f"line {number}"
        if rec is None and problem is None:
            yield Item(location, skip=True)
        elif problem:
            yield Item(location, reason=problem, raw=line)
        elif not isinstance(rec, dict):
            yield Item(location, reason="not a JSON object", raw=line)
        else:
            out, why = convert(rec)
            yield Item(location, record=out, reason=why, raw=line)

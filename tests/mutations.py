"""Mutated copies of real and fixture logs, for the property-based tests of every loader.

A mutation replaces values anywhere in a record with values of other kinds (lists, objects,
numbers, huge numbers, NaN, long or odd strings, deep nesting, null) or deletes keys; the bytes
may then be cut short or get bytes that are not UTF-8. Whatever comes out, an ingest must either
load it or reject it record by record: only the documented IngestError may escape (never its
IngestFailed), no file is left out as ``failed`` (a loader defect), and records read = loaded +
rejected.
"""
from __future__ import annotations

import copy
import io
import json
import tempfile
import zipfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import rolloutlab as rl

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _deep(depth: int):
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["", "C", "x" * 70_000, "2025-13-45T99:99:99", "\u0000\ud7ff\U0001f600", "{\"a\": 1}"]),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
    st.builds(_deep, st.sampled_from([50, 2000])),
)


def node_paths(value, prefix=(), limit=400) -> list[tuple]:
    """Paths to the nodes of a parsed JSON value (breadth first, at most ``limit``)."""
    out, queue = [], [(prefix, value)]
    while queue and len(out) < limit:
        path, node = queue.pop(0)
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in children:
            out.append(path + (key,))
            queue.append((path + (key,), child))
    return out


@st.composite
def mutated(draw, doc, max_mutations: int = 3):
    """A copy of ``doc`` with 1..max_mutations values replaced or keys deleted."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, max_mutations))):
        paths = node_paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(ODD_VALUES)
    return doc


def dumps(value) -> str:
    try:
        return json.dumps(value)
    except RecursionError:  # too deep for the encoder: a flat stand-in
        return json.dumps("deep")


@st.composite
def damaged(draw, data: bytes) -> bytes:
    """The bytes as they are, cut short, or with bytes that are not UTF-8 put in."""
    how = draw(st.sampled_from(["as is", "as is", "cut", "not utf-8"]))
    if how == "cut" and data:
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "not utf-8":
        at = draw(st.integers(0, len(data)))
        return data[:at] + b"\xff\xfe\xc3(" + data[at:]
    return data


@st.composite
def mutated_jsonl(draw, lines: list[dict]) -> bytes:
    lines = list(lines)
    for i in draw(st.sets(st.integers(0, len(lines) - 1), min_size=1, max_size=min(3, len(lines)))):
        lines[i] = draw(mutated(lines[i]))
    return draw(damaged(("\n".join(dumps(x) for x in lines) + "\n").encode()))


@st.composite
def mutated_document(draw, doc) -> bytes:
    return draw(damaged(dumps(draw(mutated(doc, max_mutations=4))).encode()))


@st.composite
def mutated_zip(draw, members: dict[str, object]) -> bytes:
    """A zip (deflate) of JSON members, one or two of them mutated, maybe cut short."""
    members = dict(members)
    for name in draw(st.sets(st.sampled_from(sorted(members)), min_size=1, max_size=2)):
        members[name] = draw(mutated(members[name]))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, value in members.items():
            zf.writestr(name, dumps(value))
    return draw(damaged(buf.getvalue()))


@st.composite
def mutated_parquet(draw, rows: list[dict]) -> bytes:
    """Parquet bytes of the rows with one or two mutated — where Arrow can write the mixed types
    that makes (else the rows as they were) — maybe cut short or with bytes that are not UTF-8."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    changed = [dict(r) for r in rows]
    for i in draw(st.sets(st.integers(0, len(rows) - 1), min_size=1, max_size=min(2, len(rows)))):
        changed[i] = draw(mutated(changed[i], max_mutations=2))
    for candidate in (changed, rows):
        buf = io.BytesIO()
        try:
            pq.write_table(pa.Table.from_pylist(candidate), buf)
        except (pa.ArrowException, TypeError, ValueError, OverflowError, RecursionError):
            continue
        return draw(damaged(buf.getvalue()))
    raise AssertionError("the fixture rows themselves cannot be written")


def read_parquet(path: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def read_jsonl(path: Path) -> list:
    """The lines of a JSONL fixture that parse (some fixtures hold broken lines on purpose)."""
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


ONE_ROLLOUT_PER_RECORD = {"native", "buildhours", "openai-chat", "tau-bench", "tau2", "inspect"}


def assert_each_attempt_once(con) -> None:
    """No run holds the same (sample, attempt) twice."""
    twice = con.execute("SELECT run_id, sample_id, attempt, count(*) FROM rollouts WHERE sample_id IS NOT NULL "
                        "GROUP BY ALL HAVING count(*) > 1 LIMIT 3").fetchall()
    assert not twice, twice


def assert_ingest_survives(data: bytes, name: str, format: str) -> None:
    """Ingest ``data`` as a file called ``name``: it loads or is rejected record by record."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        con = rl.connect(Path(tmp) / "t.duckdb")
        try:
            try:
                result = rl.ingest(con, path, format=format)
            except rl.IngestFailed:
                raise
            except rl.IngestError:
                return
            row = result.iloc[0]
            assert row.action != "failed", row.reasons  # a loader defect: the file was left out
            assert row.records == row.loaded + row.rejected, row.reasons
            stored = con.execute("SELECT n_records, n_rejected, (SELECT count(*) FROM rejects) FROM sources").fetchone()
            assert stored == (row.records, row.rejected, row.rejected)
            if format in ONE_ROLLOUT_PER_RECORD:  # endpoint events assemble; job events hold no rollouts
                assert con.execute("SELECT count(*) FROM rollouts").fetchone()[0] == row.loaded
            assert_each_attempt_once(con)
        finally:
            con.close()

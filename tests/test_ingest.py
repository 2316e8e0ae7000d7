"""Ingest orchestration: idempotence, replacement, all-or-nothing, folders, format detection."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest

import rolloutlab as rl
from rolloutlab.ingest.formats import native
from conftest import FIXTURES, rollout

GOOD = FIXTURES / "native" / "good.jsonl"
BAD = FIXTURES / "native" / "bad.jsonl"

COUNTS = "SELECT (SELECT count(*) FROM rollouts), (SELECT count(*) FROM tool_calls), " \
         "(SELECT count(*) FROM grades), (SELECT count(*) FROM messages), (SELECT count(*) FROM rejects), " \
         "(SELECT count(*) FROM sources), (SELECT count(*) FROM runs)"


def test_unchanged_file_adds_nothing(con):
    rl.ingest(con, [GOOD, BAD])
    before = con.execute(COUNTS).fetchone()
    again = rl.ingest(con, [GOOD, BAD])
    assert again.action.tolist() == ["unchanged", "unchanged"]
    assert again.loaded.tolist() == [4, 2] and again.rejected.tolist() == [0, 15]
    assert con.execute(COUNTS).fetchone() == before == (6, 6, 4, 2, 15, 2, 2)


def test_same_content_under_another_path_is_not_loaded_twice(con, tmp_path):
    rl.ingest(con, GOOD)
    copy = tmp_path / "copy.jsonl"
    shutil.copy(GOOD, copy)
    result = rl.ingest(con, copy)
    assert result.action.tolist() == ["unchanged"]
    assert "same content as" in result.reasons[0][0]
    assert con.execute("SELECT count(*) FROM rollouts").fetchone() == (4,)


def test_changed_file_replaces_its_rows(con, tmp_path):
    path = tmp_path / "run.jsonl"
    shutil.copy(GOOD, path)
    rl.ingest(con, path)
    path.write_text('{"rollout_id": "new", "run": "base", "sample_id": "q-9", "score": 0.25}\n')
    result = rl.ingest(con, path)
    assert result.action.tolist() == ["replaced"]
    assert con.execute("SELECT rollout_id, score FROM rollouts").fetchall() == [("new", 0.25)]
    assert con.execute("SELECT count(*) FROM tool_calls").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM sources").fetchone() == (1,)
    assert con.execute("SELECT run_id FROM runs").fetchall() == [("base",)]  # step10 went with its rows


def test_an_error_mid_way_leaves_the_database_as_it_was(con, monkeypatch, tmp_path):
    rl.ingest(con, BAD)
    before = con.execute(COUNTS).fetchone()
    calls = []
    real_load = native.load

    def load_then_fail(ctx):
        calls.append(ctx.path)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return real_load(ctx)

    monkeypatch.setattr(native, "load", load_then_fail)
    second = tmp_path / "second.jsonl"
    second.write_text('{"run": "x", "sample_id": "s", "score": 1}\n')
    with pytest.raises(rl.IngestFailed, match=r"second.jsonl: could not be loaded \(RuntimeError: disk full\)"):
        rl.ingest(con, [GOOD, second])
    assert len(calls) == 2  # the first file was loaded, then rolled back
    assert con.execute(COUNTS).fetchone() == before


def test_a_kill_mid_way_leaves_the_database_as_it_was(db_path):
    con = rl.connect(db_path)
    rl.ingest(con, BAD)
    before = con.execute(COUNTS).fetchone()
    con.close()
    # A process that loads GOOD, then dies without any cleanup while loading the second file.
    script = textwrap.dedent(f"""
        import os, rolloutlab as rl
        from rolloutlab.ingest.formats import native
        real = native.load
        def load(ctx):
            if ctx.path.name == 'second.jsonl':
                os._exit(9)
            return real(ctx)
        native.load = load
        rl.ingest(rl.connect({str(db_path)!r}), [{str(GOOD)!r}, {str(db_path.parent / 'second.jsonl')!r}])
    """)
    (db_path.parent / "second.jsonl").write_text('{"run": "x", "sample_id": "s", "score": 1}\n')
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    con = rl.connect(db_path)
    assert con.execute(COUNTS).fetchone() == before
    con.close()


def test_folder_means_every_file_in_it(con, tmp_path):
    folder = tmp_path / "logs"
    (folder / "nested").mkdir(parents=True)
    shutil.copy(GOOD, folder / "a.jsonl")
    shutil.copy(BAD, folder / "nested" / "b.jsonl")
    (folder / ".hidden.jsonl").write_text("junk\n")
    result = rl.ingest(con, folder)
    assert [p.split("/")[-1] for p in result.path] == ["a.jsonl", "b.jsonl"]
    assert result.loaded.sum() == 6


def test_unknown_format_fails_that_file_only(con, tmp_path):
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"hello": "world"}\n')
    result = rl.ingest(con, [odd, GOOD])
    assert result.action.tolist() == ["failed", "loaded"]
    assert "pass --format" in result.reasons[0][0]


def test_explicit_format_and_detection(con, tmp_path):
    assert rl.detect_format(GOOD) == "native"
    with pytest.raises(rl.IngestError, match="Unknown format 'csv'"):
        rl.ingest(con, GOOD, format="csv")
    with pytest.raises(rl.IngestError, match="no such file or folder"):
        rl.ingest(con, tmp_path / "missing.jsonl")


def test_empty_file_loads_nothing(con, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = rl.ingest(con, empty, format="native")
    assert result.loc[0, ["action", "records", "loaded", "rejected"]].tolist() == ["loaded", 0, 0, 0]


TABLES = {
    "rollouts": "SELECT * EXCLUDE (source_id) FROM rollouts ORDER BY rollout_id",
    "tool_calls": "SELECT * FROM tool_calls ORDER BY rollout_id, call_idx",
    "grades": "SELECT * FROM grades ORDER BY rollout_id, grader",
    "rejects": "SELECT line_no, raw, reason FROM rejects ORDER BY line_no",
    "sources": "SELECT path, format, sha256, bytes, n_records, n_rejected, bytes_loaded, lines_loaded, prefix_sha256 "
               "FROM sources",
    "runs": "SELECT * EXCLUDE (source_id) FROM runs ORDER BY run_id",
    "endpoint_events": "SELECT * EXCLUDE (source_id) FROM endpoint_events ORDER BY line_no",
}


def assert_same_tables(a, b):
    for name, sql in TABLES.items():
        assert a.execute(sql).fetchall() == b.execute(sql).fetchall(), name


def native_lines(start, n, run="live"):
    out = []
    for i in range(start, start + n):
        rec = rollout(run, f"s{i % 7}", (i % 3) / 2, ["search"] * (i % 4))  # attempts continue across appends
        if i % 11 == 5:
            rec["score"] = "bad"  # a reject
        if i % 13 == 7:
            rec["rollout_id"] = "twice"  # duplicates, also across the boundary
        out.append(json.dumps(rec))
    return out


def test_a_grown_file_loads_only_its_new_lines_and_equals_a_full_ingest(tmp_path):
    path = tmp_path / "live.jsonl"
    path.write_text("\n".join(native_lines(0, 40)) + "\n")
    grown = rl.connect(tmp_path / "grown.duckdb")
    first = rl.ingest(grown, path).iloc[0]
    assert (first.action, first.records) == ("loaded", 40)
    with open(path, "a") as fh:
        fh.write("\n".join(native_lines(40, 25)) + "\n")
    second = rl.ingest(grown, path).iloc[0]
    assert (second.action, second.records, second.source_id) == ("appended", 25, first.source_id)
    assert rl.ingest(grown, path).iloc[0].action == "unchanged"
    whole = rl.connect(tmp_path / "whole.duckdb")
    rl.ingest(whole, path)
    assert_same_tables(grown, whole)
    assert grown.execute("SELECT count(*) FROM rejects WHERE reason LIKE 'duplicate%(first on line%'").fetchone()[0] == 4
    grown.close(), whole.close()


def test_a_last_line_being_written_is_held_back_while_following(tmp_path):
    lines = native_lines(0, 12)
    path = tmp_path / "live.jsonl"
    path.write_text("\n".join(lines[:10]) + "\n" + lines[10][:25])  # the writer is mid-line
    con = rl.connect(tmp_path / "follow.duckdb")
    got = rl.ingest(con, path, follow=True).iloc[0]
    assert (got.records, got.rejected) == (10, 1)  # line 6 is a bad score; the cut line is not a record
    assert any("held back" in r for r in got.reasons)
    path.write_text("\n".join(lines) + "\n")  # the writer finished the line and wrote another
    got = rl.ingest(con, path, follow=True).iloc[0]
    assert (got.action, got.records) == ("appended", 2)
    whole = rl.connect(tmp_path / "whole.duckdb")
    rl.ingest(whole, path)
    assert_same_tables(con, whole)
    con.close(), whole.close()


def test_a_cut_line_of_a_finished_ingest_is_taken_back_when_the_file_grows(tmp_path):
    lines = native_lines(0, 12)
    path = tmp_path / "live.jsonl"
    path.write_text("\n".join(lines[:10]) + "\n" + lines[10][:25])
    con = rl.connect(tmp_path / "finished.duckdb")
    got = rl.ingest(con, path).iloc[0]
    assert (got.records, got.rejected) == (11, 2)  # a finished file: the cut line is a reject
    path.write_text("\n".join(lines) + "\n")
    assert rl.ingest(con, path).iloc[0].action == "appended"
    whole = rl.connect(tmp_path / "whole.duckdb")
    rl.ingest(whole, path)
    assert_same_tables(con, whole)
    con.close(), whole.close()


def test_a_file_whose_earlier_bytes_changed_is_replaced(con, tmp_path):
    path = tmp_path / "live.jsonl"
    path.write_text("\n".join(native_lines(0, 10)) + "\n")
    rl.ingest(con, path)
    path.write_text("\n".join(native_lines(1, 12)) + "\n")
    got = rl.ingest(con, path).iloc[0]
    assert (got.action, got.records) == ("replaced", 12)
    assert con.execute("SELECT n_records FROM sources").fetchall() == [(12,)]


def test_endpoint_rollouts_complete_when_their_grades_arrive_in_a_later_append(tmp_path):
    tools = [{"rollout_id": f"r{i}", "tool": "search", "started_at": f"2025-12-09T10:0{i}:00Z",
              "ended_at": f"2025-12-09T10:0{i}:01Z", "http_status": 200} for i in range(4)]
    grades = [{"rollout_id": f"r{i}", "run": "train", "sample_id": f"q{i}", "score": i / 4,
               "ts": f"2025-12-09T10:0{i}:05Z"} for i in range(4)]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in tools + grades[:1]))
    grown = rl.connect(tmp_path / "grown.duckdb")
    rl.ingest(grown, path, format="rft-endpoint")
    assert grown.execute("SELECT count(*) FROM rollouts WHERE status = 'ungraded'").fetchone() == (3,)
    with open(path, "a") as fh:
        fh.write("".join(json.dumps(e) + "\n" for e in grades[1:]))
    assert rl.ingest(grown, path).iloc[0].action == "appended"
    assert grown.execute("SELECT count(*) FROM rollouts WHERE status = 'ok'").fetchone() == (4,)
    whole = rl.connect(tmp_path / "whole.duckdb")
    rl.ingest(whole, path, format="rft-endpoint")
    assert_same_tables(grown, whole)
    grown.close(), whole.close()


@pytest.mark.parametrize("fixture, fmt", [(FIXTURES / "buildhours" / "run-1" / "results.jsonl", "buildhours"),
                                          (FIXTURES / "chat" / "chats.jsonl", "openai-chat")])
def test_converted_formats_grow_the_same_way(tmp_path, fixture, fmt):
    lines = fixture.read_text().splitlines(keepends=True)
    folder = tmp_path / "run-1"
    folder.mkdir()
    path = folder / fixture.name
    half = len(lines) // 2
    path.write_text("".join(lines[:half]))
    grown = rl.connect(tmp_path / "grown.duckdb")
    rl.ingest(grown, path, format=fmt)
    path.write_text("".join(lines))
    assert rl.ingest(grown, path, format=fmt).iloc[0].action == "appended"
    whole = rl.connect(tmp_path / "whole.duckdb")
    rl.ingest(whole, path, format=fmt)
    assert_same_tables(grown, whole)
    grown.close(), whole.close()


def test_ingest_through_a_reading_handle_says_what_to_do(db_path):
    rl.connect(db_path).close()
    reader = rl.connect(db_path, read_only=True)
    with pytest.raises(rl.IngestError, match=r"opened for reading .* con = rl.connect\(db\)"):
        rl.ingest(reader, GOOD)
    reader.close()

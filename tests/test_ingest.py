"""Ingest orchestration: idempotence, replacement, all-or-nothing, folders, format detection."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest

import rolloutlab as rl
from rolloutlab.ingest.formats import native
from conftest import FIXTURES

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

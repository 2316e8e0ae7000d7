"""Ingest orchestration: idempotence, replacement, all-or-nothing, folders, format detection."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rolloutlab as rl
from rolloutlab.ingest.formats import FORMATS, native
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
    assert again.loaded.tolist() == [4, 3] and again.rejected.tolist() == [0, 14]
    assert again.duplicates.tolist() == [0, 0]
    assert con.execute(COUNTS).fetchone() == before == (7, 6, 4, 2, 14, 2, 3)


def test_same_content_under_another_path_is_not_loaded_twice(con, tmp_path):
    rl.ingest(con, GOOD)
    copy = tmp_path / "copy.jsonl"
    shutil.copy(GOOD, copy)
    result = rl.ingest(con, copy)
    assert result.action.tolist() == ["unchanged"]
    assert "same content as" in result.reasons[0][0]
    assert con.execute("SELECT count(*) FROM rollouts").fetchone() == (4,)


def test_a_file_named_twice_in_one_call_loads_once(con, tmp_path):
    # the sources known before the call are read once; a path named twice must see its first time
    (tmp_path / "logs").mkdir()
    path = tmp_path / "logs" / "run.jsonl"
    shutil.copy(GOOD, path)
    result = rl.ingest(con, [path, tmp_path / "logs", path])
    assert result.action.tolist() == ["loaded", "unchanged", "unchanged"]
    assert con.execute("SELECT count(*), count(DISTINCT source_id) FROM rollouts").fetchone() == (4, 1)
    path.write_text('{"rollout_id": "new", "run": "base", "sample_id": "q-9", "score": 0.25}\n')
    again = rl.ingest(con, [path, GOOD])  # one changed, one new: neither taken for unchanged
    assert again.action.tolist() == ["replaced", "loaded"]
    assert con.execute("SELECT count(*) FROM rollouts").fetchone() == (5,)


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


def test_a_file_that_breaks_its_loader_is_left_out_and_the_rest_loads(con, monkeypatch, tmp_path):
    # A defect in one file's loading (here: an exception no reject covers) rolls back the call and
    # redoes it without that file: the other files load, the broken one says why, nothing of it stays.
    calls = []
    real_load = native.load

    def load_then_fail(ctx):
        calls.append(ctx.path.name)
        if ctx.path.name == "second.jsonl":
            raise RuntimeError("boom")
        return real_load(ctx)

    monkeypatch.setattr(native, "load", load_then_fail)
    second = tmp_path / "second.jsonl"
    second.write_text('{"run": "x", "sample_id": "s", "score": 1}\n')
    result = rl.ingest(con, [GOOD, second])
    assert result.action.tolist() == ["loaded", "failed"]
    assert "second.jsonl: could not be loaded (RuntimeError: boom)" in result.reasons[1][0]
    assert calls == ["good.jsonl", "second.jsonl", "good.jsonl"]  # loaded, rolled back, loaded again alone
    assert con.execute("SELECT count(*) FROM rollouts WHERE run_id = 'x'").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM sources").fetchone() == (1,)
    monkeypatch.setattr(native, "load", real_load)  # fixed: the file loads on the next call
    assert rl.ingest(con, second).action.tolist() == ["loaded"]


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
    assert result.loaded.sum() == 7


def test_every_format_says_which_files_it_reads():
    """A format module declares its file types (FILE_TYPES): the CLI's list of what ingest reads is
    built from them, so a new format is one module here, not an edit elsewhere."""
    from rolloutlab.ingest.formats import FILE_KINDS, MODULES, file_types

    for module in MODULES:
        assert module.FILE_TYPES and all(kind in FILE_KINDS for kind, _ in module.FILE_TYPES), module.FORMAT
        assert all(what.split(" (")[0] == module.FORMAT for _, what in module.FILE_TYPES), module.FORMAT
    listed = dict(file_types())
    assert list(listed) == list(FILE_KINDS.values())
    assert listed["Inspect logs (.eval)"] == ["inspect"] and "native" in listed["JSON lines (.jsonl, or any name)"]
    assert {w.split(" (")[0] for ws in listed.values() for w in ws} == set(FORMATS)


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
    # nothing to load is never called loaded
    assert result.loc[0, ["action", "records", "loaded", "rejected"]].tolist() == ["empty", 0, 0, 0]


TABLES = {
    "rollouts": "SELECT * EXCLUDE (source_id) FROM rollouts ORDER BY rollout_id",
    "tool_calls": "SELECT * FROM tool_calls ORDER BY rollout_id, call_idx",
    "grades": "SELECT * FROM grades ORDER BY rollout_id, grader",
    "rejects": "SELECT line_no, raw, reason FROM rejects ORDER BY line_no",
    "sources": "SELECT path, format, sha256, bytes, n_records, n_rejected, n_duplicates, bytes_loaded, lines_loaded, "
               "prefix_sha256 FROM sources",
    "duplicates": "SELECT * EXCLUDE (source_id) FROM duplicates ORDER BY line_no",
    "run_keys": "SELECT * FROM run_keys ORDER BY ALL",
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
    # the lines repeating id 'twice' hold other rollouts ('twice' is no unique id): each loads as
    # twice~<what it holds>, never a reject, whole or grown
    assert grown.execute("SELECT count(*) FROM rollouts WHERE rollout_id LIKE 'twice%'").fetchone()[0] == 5
    assert grown.execute("SELECT count(*) FROM rejects WHERE reason LIKE '%duplicate%'").fetchone()[0] == 0
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


# ---- hostile input (issue 23) ---------------------------------------------------------------

GLOB_NAMES = ["a[1].jsonl", "star*.jsonl", "q?.jsonl", "b{1,2}.jsonl", "c]x.jsonl", "[x].jsonl"]


@pytest.mark.parametrize("name", GLOB_NAMES)
def test_a_file_name_with_glob_characters_is_read_literally(con, tmp_path, name):
    # Files whose names the pattern would also match sit beside it: only the named file is read.
    for other in ("a1.jsonl", "starX.jsonl", "qa.jsonl", "b1.jsonl", "x.jsonl"):
        (tmp_path / other).write_text(json.dumps(rollout("other", "s9", 0.0)) + "\n")
    target = tmp_path / name
    target.write_text(json.dumps(rollout("literal", "s1", 1.0)) + "\n")
    result = rl.ingest(con, target)
    assert result[["action", "loaded"]].values.tolist() == [["loaded", 1]]
    assert con.execute("SELECT run_id, sample_id FROM rollouts").fetchall() == [("literal", "s1")]


@given(st.text(alphabet="ab*?[]{},!-_ ", min_size=1, max_size=8))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_file_name_is_read_literally(tmp_path_factory, stem):
    folder = tmp_path_factory.mktemp("names")
    for decoy in ("a.jsonl", "b.jsonl", "ab.jsonl", "_.jsonl"):
        (folder / decoy).write_text(json.dumps(rollout("decoy", "d", 0.0)) + "\n")
    target = folder / f"{stem}.jsonl"
    target.write_text(json.dumps(rollout("literal", stem, 1.0)) + "\n")
    con = rl.connect(folder / "t.duckdb")
    try:
        result = rl.ingest(con, target)
        assert result.loaded.tolist() == [1]
        assert con.execute("SELECT run_id, sample_id FROM rollouts").fetchall() == [("literal", stem)]
    finally:
        con.close()


def test_replacing_a_file_keeps_the_samples_another_file_provides(con, tmp_path):
    # Runs A and B both name 60 samples with their prompts; A loaded first, so its rows held them.
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(rollout("A", f"s{i}", 1.0, prompt=f"question {i}")) + "\n" for i in range(60)))
    b.write_text("".join(json.dumps(rollout("B", f"s{i}", 0.0, prompt=f"question {i}")) + "\n" for i in range(60)))
    rl.ingest(con, [a, b])
    a.write_text(json.dumps(rollout("A", "t0", 1.0, prompt="another")) + "\n")  # A replaced: names other samples
    assert rl.ingest(con, a).action.tolist() == ["replaced"]
    assert con.execute("SELECT count(*), count(prompt) FROM samples WHERE sample_id LIKE 's%'").fetchone() == (60, 60)
    assert rl.ingest(con, b).action.tolist() == ["unchanged"]
    b.unlink()
    b.write_text(json.dumps(rollout("B", "t0", 0.0)) + "\n")  # now nobody provides s0..s59
    rl.ingest(con, b)
    assert con.execute("SELECT sample_id FROM samples ORDER BY 1").fetchall() == [("t0",)]


def test_a_run_label_for_an_unchanged_file_is_not_silently_ignored(con):
    rl.ingest(con, GOOD)
    again = rl.ingest(con, GOOD, run="renamed")
    assert again.action.tolist() == ["unchanged"]
    assert "--run 'renamed' was not applied" in again.reasons[0][-1]
    assert "renamed" not in rl.runs(con).run.tolist()


def test_a_first_line_longer_than_the_head_is_still_detected(tmp_path):
    path = tmp_path / "capture.jsonl"
    event = {"event": "tool", "rollout_id": "r1", "tool": "search", "arguments": {"query": "x" * 200_000},
             "started_at": "2025-01-01T00:00:00Z", "ended_at": "2025-01-01T00:00:01Z"}
    path.write_text(json.dumps(event) + "\n")
    assert rl.detect_format(path) == "rft-endpoint"


def test_a_first_line_nested_too_deeply_is_no_crash(con, tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text("[" * 20_000 + "]" * 20_000 + "\n" + json.dumps(rollout("r", "s", 1.0)) + "\n")
    assert rl.detect_format(path) is None
    assert rl.ingest(con, path, format="native").rejected.tolist() == [1]


def test_a_native_record_with_messages_and_no_tool_calls_is_native(con, tmp_path):
    record = {"run": "r", "sample_id": "s", "score": 0.5, "latency_s": 3.5, "usage": {"input_tokens": 10},
              "grades": [{"grader": "judge", "score": 0.5}], "cost_usd": 0.01,
              "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    path = tmp_path / "n.jsonl"
    path.write_text(json.dumps(record) + "\n")
    assert rl.detect_format(path) == "native"
    rl.ingest(con, path)
    assert con.execute("SELECT latency_s, input_tokens, cost_usd FROM rollouts").fetchone() == (3.5, 10, 0.01)
    assert con.execute("SELECT grader FROM grades").fetchall() == [("judge",)]


NATIVE_OPTIONAL = {
    "rollout_id": st.text(min_size=1, max_size=6), "attempt": st.integers(0, 5), "latency_s": st.floats(0, 100),
    "status": st.sampled_from(["ok", "model_error"]), "final_answer": st.text(max_size=10),
    "usage": st.fixed_dictionaries({"input_tokens": st.integers(0, 10**6)}), "cost_usd": st.floats(0, 1),
    "grades": st.just([{"grader": "g", "score": 1.0}]), "model": st.just("m"), "split": st.just("valid"),
    "messages": st.just([{"role": "user", "content": "q", "turn": 0}, {"role": "assistant", "content": "a", "turn": 0}]),
    "tool_calls": st.just([{"tool": "search", "turn": 0}]), "prompt": st.text(max_size=10),
}


@given(st.sets(st.sampled_from(sorted(NATIVE_OPTIONAL))).flatmap(
    lambda keys: st.fixed_dictionaries({k: NATIVE_OPTIONAL[k] for k in keys})))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_native_records_are_detected_as_native(tmp_path_factory, extra):
    path = tmp_path_factory.mktemp("detect") / "n.jsonl"
    path.write_text(json.dumps({"run": "r", "sample_id": "s", "score": 1.0, **extra}) + "\n")
    assert rl.detect_format(path) == "native", extra


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                         max_size=3), max_leaves=10)


@given(value=JSON_VALUES, depth=st.sampled_from([0, 1, 100, 5_000, 50_000]), tail=st.binary(max_size=50))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_detection_never_crashes_on_any_first_line(tmp_path_factory, value, depth, tail):
    path = tmp_path_factory.mktemp("sniff") / "x.jsonl"
    path.write_bytes(("[" * depth + json.dumps(value) + "]" * depth).encode() + b"\n" + tail)
    assert rl.detect_format(path) in (None, *FORMATS)


def corpus_files(real_dir):
    """Every real log at hand: ../shared/data/real, and the folders in $ROLLOUTLAB_CORPUS (colon
    separated: real files from other people's repositories a developer keeps locally)."""
    import os
    from pathlib import Path

    roots = [real_dir] + [Path(p) for p in os.environ.get("ROLLOUTLAB_CORPUS", "").split(":") if p]
    return [p for root in roots for p in sorted(root.rglob("*")) if p.is_file() and p.suffix in (".json", ".jsonl", ".eval")]


def test_every_real_file_loads_whole_and_each_attempt_once(real_dir, con):
    # Read = loaded + rejected for every file, in the source table too, and no run holds the same
    # (sample, attempt) twice, however the files overlap (the tau2 base and fine-tuned files share
    # every task; Inspect's logs repeat tasks).
    from mutations import assert_each_attempt_once

    files = corpus_files(real_dir)
    result = rl.ingest(con, files, progress=False)
    broken = [r for a, reasons in zip(result.action, result.reasons) for r in reasons
              if a == "failed" and "could not tell the format" not in r]  # a file no format claims is not a log
    assert not broken, broken
    assert (result.records == result.loaded + result.duplicates + result.rejected).all()
    stored = con.execute("SELECT sum(n_records), sum(n_rejected), (SELECT count(*) FROM rejects), sum(n_duplicates), "
                         "(SELECT count(*) FROM duplicates) FROM sources").fetchone()
    assert stored[1] == stored[2] and stored[3] == stored[4]
    assert stored[0] == result.records[result.action != "unchanged"].sum()
    # no distinct rollout is ever a reject for being a duplicate: copies are counted as duplicates
    assert con.execute("SELECT count(*) FROM rejects WHERE reason ILIKE '%duplicate%' "
                       "OR reason ILIKE '%attempt loads once%'").fetchone() == (0,)
    assert_each_attempt_once(con)


def corpus_folder(name: str):
    import os
    from pathlib import Path

    roots = [Path(p) / name for p in os.environ.get("ROLLOUTLAB_CORPUS", "").split(":") if p]
    found = next((r for r in roots if r.is_dir()), None)
    if found is None:
        pytest.skip(f"no {name}/ in $ROLLOUTLAB_CORPUS (real files from other repositories, kept out of the repo)")
    return found


def test_vitals_logs_keep_every_evaluation_apart(con):
    """Inspect logs written by the R package vitals (tidyverse/vitals): task ids reused across
    models, no sample uuids, twins of one evaluation in several folders. Counts from the producers'
    own logs (each file's samples x epochs), means from their scores (C = 1, P = 0.5, I = 0)."""
    folder = corpus_folder("vitals")
    result = rl.ingest(con, [p for p in sorted(folder.rglob("*.json")) if "python-inspect-fixtures" not in p.parts])
    assert (result.records.sum(), result.loaded.sum(), result.duplicates.sum(), result.rejected.sum()) == \
        (1012, 960, 52, 0)
    runs = rl.runs(con).set_index("run")
    assert len(runs) == 25 and runs.model.notna().all()
    # two runs that share task_id e4763d5da8fe03a6cf4a90: claude and gpt-4o, never merged
    assert runs.loc["gpt-4o/An-R-Eval", ["rollouts", "mean_score"]].tolist() == [26, pytest.approx(0.4808, abs=1e-4)]
    claude = runs.loc["claude-3-7-sonnet-latest/An-R-Eval@2025-04-29T14:36:27"]
    assert (claude.rollouts, round(claude.mean_score, 4)) == (26, 0.5962)
    # the producer's own figure beside ours, where they differ (vitals rescales partial credit)
    odd = runs.loc["claude-3-7-sonnet-latest/An-R-Eval@2025-04-29T14:37:34"]
    assert (round(odd.mean_score, 4), round(odd.reported_score, 4)) == (0.1346, 26.9231)


def test_a_folder_of_tau2_results_of_several_models(con):
    """One fork's data/simulations: 52 results files of grok models, 10 without simulations."""
    folder = corpus_folder("tau2-sims")
    result = rl.ingest(con, sorted(folder.rglob("*.json")))
    assert result.action.value_counts().to_dict() == {"loaded": 42, "empty": 10}
    assert (result.loaded.sum(), result.duplicates.sum(), result.rejected.sum()) == (586, 0, 0)
    groups = rl.runs(con, group=True).set_index("label")
    assert groups.loc["xai/grok-3/airline", ["runs", "rollouts"]].tolist() == [18, 247]
    pooled = con.execute("SELECT count(*), avg(score) FROM rollouts JOIN runs USING (run_id) "
                         "WHERE label = 'xai/grok-4/airline_tighter_policy'").fetchone()
    assert groups.loc["xai/grok-4/airline_tighter_policy", "runs"] == 5 and (pooled[0], round(pooled[1], 4)) == (71, 0.7746)


def test_a_chat_transcript_with_native_fields_keeps_its_tool_calls_and_the_fields(con, tmp_path):
    # Its messages carry tool calls (a chat transcript), and it has native fields too: read as a
    # chat, keeping both its calls and those fields. A native record without `run` (loaded with
    # --run) and with native fields is native.
    chat = {"sample_id": "s", "score": 1, "model": "m", "latency_s": 2.0, "grades": [{"grader": "g", "score": 1}],
            "messages": [{"role": "user", "content": "q"},
                         {"role": "assistant", "content": None, "tool_calls": [
                             {"id": "1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "1", "content": "x"}, {"role": "assistant", "content": "a"}]}
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(chat) + "\n")
    assert rl.detect_format(path) == "openai-chat"
    rl.ingest(con, path)
    assert con.execute("SELECT n_tool_calls, latency_s, final_answer FROM rollouts").fetchone() == (1, 2.0, "a")
    assert con.execute("SELECT grader FROM grades").fetchall() == [("g",)]
    native = tmp_path / "native.jsonl"
    native.write_text(json.dumps({"sample_id": "s2", "score": 1, "latency_s": 3.0, "usage": {"input_tokens": 5},
                                  "messages": [{"role": "user", "content": "q"}]}) + "\n")
    assert rl.detect_format(native) == "native"


def test_a_grown_file_under_another_run_label_says_it_is_split(con, tmp_path):
    path = tmp_path / "grow.jsonl"
    path.write_text(json.dumps(rollout("x", "s1", 1.0)) + "\n")
    rl.ingest(con, path, run="A")
    path.write_text(path.read_text() + json.dumps(rollout("x", "s2", 1.0)) + "\n")
    result = rl.ingest(con, path, run="B")
    assert result.action.tolist() == ["appended"]
    assert "its new lines are run 'B' (--run), its earlier lines run 'A'" in result.reasons[0][0]
    assert "was not applied" not in " ".join(rl.ingest(con, path, run="B").reasons[0])


# ---- many files in one pass (issue 39) ----------------------------------------------------------

def _small_files(folder):
    """Native files that share runs and samples, give attempts or not (colliding across files),
    repeat ids and whole lines of other files, hold rejects, a copy, a file without its last line
    end and an empty one; and Inspect logs: what loading files together must keep per file."""
    import random
    import shutil

    folder.mkdir()
    rng = random.Random(39)
    pool = []
    for f in range(12):
        lines = []
        for i in range(rng.randint(0, 6)):
            if pool and rng.random() < 0.15:
                lines.append(rng.choice(pool))  # the same rollout as another file's line
                continue
            rec = rollout(rng.choice(["r", "q"]), f"s{rng.randint(0, 2)}", rng.choice([0, 0.5, 1]), ["search"] * (i % 3))
            rec.pop("attempt", None) if rng.random() < 0.4 else rec.update(attempt=rng.randint(0, 3))
            if rng.random() < 0.3:
                rec["rollout_id"] = f"id-{rng.randint(0, 9)}"
            if rng.random() < 0.1:
                rec["score"] = "bad"
            lines.append(json.dumps(rec))
            pool.append(lines[-1])
        (folder / f"f{f:02d}.jsonl").write_text("\n".join(lines) + ("\n" if f % 5 else ""))
    shutil.copy(folder / "f03.jsonl", folder / "zz-copy.jsonl")  # a copy: "unchanged", as the same content
    shutil.copy(GOOD, folder / "good.jsonl")
    shutil.copy(BAD, folder / "zbad.jsonl")
    shutil.copy(FIXTURES / "inspect" / "revenue-zstd.eval", folder / "log.eval")
    return sorted(folder.iterdir())


def same_rows(a, b):
    """The same rows in every table (sources by their path: ids are the files' order in both)."""
    for name, sql in {**TABLES, "sources": "SELECT source_id, path, n_records, n_rejected, n_duplicates FROM sources",
                      "rejects": "SELECT * FROM rejects", "duplicates": "SELECT * FROM duplicates",
                      "rollouts": "SELECT * FROM rollouts"}.items():
        assert sorted(map(repr, a.execute(sql).fetchall())) == sorted(map(repr, b.execute(sql).fetchall())), name


def test_many_files_load_together_as_they_would_one_at_a_time(tmp_path, monkeypatch):
    # A folder loads a few thousand records per statement, not one file per statement; line
    # numbers, rejects, duplicates, ids, attempts (numbered file by file where files share a run
    # and sample), runs and sources are those of loading each file in a call of its own.
    from rolloutlab import config
    from rolloutlab.ingest import batch

    files = _small_files(tmp_path / "logs")
    loads = []
    real = batch.Batch._load
    monkeypatch.setattr(batch.Batch, "_load", lambda self, job: (loads.append(len(job.segments)), real(self, job))[1])
    together = rl.connect(tmp_path / "together.duckdb")
    result = rl.ingest(together, tmp_path / "logs")
    assert len(loads) == 1 and loads[0] > 10  # the files' lines in one load (a copy, or an empty twin, adds none)
    assert (result.records == result.loaded + result.duplicates + result.rejected).all()
    one_by_one = rl.connect(tmp_path / "one.duckdb")
    for path in files:
        rl.ingest(one_by_one, path)
    same_rows(together, one_by_one)
    monkeypatch.setattr(config, "CONVERT_BATCH_RECORDS", 3)  # loads that end inside a file, beside the next
    small = rl.connect(tmp_path / "small.duckdb")
    again = rl.ingest(small, tmp_path / "logs")
    assert len(loads) > 10
    same_rows(small, one_by_one)
    assert again.drop(columns="source_id").equals(result.drop(columns="source_id"))
    for c in (together, one_by_one, small):
        c.close()

"""Native JSONL: field-by-field mapping and every reject reason, with exact line numbers."""
from __future__ import annotations

import hashlib
import json
import re
import math
import shutil
from datetime import datetime

import pytest

import rolloutlab as rl
from hypothesis import given
from hypothesis import strategies as st
from mutations import SETTINGS, assert_ingest_survives, mutated_jsonl, read_jsonl
from conftest import FIXTURES

GOOD = FIXTURES / "native" / "good.jsonl"
BAD = FIXTURES / "native" / "bad.jsonl"


def one(con, sql, params=None):
    return con.execute(sql, params or []).fetchone()


def test_good_file_loads_every_record(con):
    result = rl.ingest(con, GOOD)
    assert result.loc[0, ["format", "action", "records", "loaded", "rejected"]].tolist() == \
        ["native", "loaded", 4, 4, 0]
    assert one(con, "SELECT count(*) FROM rollouts") == (4,)


def test_full_record_maps_field_by_field(con):
    rl.ingest(con, GOOD)
    row = con.execute("SELECT * FROM rollouts WHERE rollout_id = 'b-1-0'").df().iloc[0]
    # label 'base' holds records of split 'valid' and records naming no split: two runs
    assert row.run_id == "base-valid" and row.sample_id == "q-1" and row.attempt == 0 and row.attempt_raw == 0
    assert row.started_at == datetime(2025, 12, 9, 10, 0, 0)
    assert row.latency_s == pytest.approx(12.5)  # derived from the two times
    assert (row.status, row.stop_reason, row.final_answer, row.score) == ("ok", "stop", "$32", 1.0)
    assert row.stop_reason_raw == "final_answer"  # the producer's word, beside the vocabulary's
    # three calls; the 2nd and 3rd share turn 1 (issued in parallel) -> 2 turns
    assert (row.n_tool_calls, row.n_turns) == (3, 2)
    assert (row.input_tokens, row.output_tokens, row.reasoning_tokens) == (2500, 300, 1200)
    assert row.cost_usd == pytest.approx(0.01)
    assert (row.source_line, row.error) == (1, None)

    calls = con.execute("SELECT * FROM tool_calls WHERE rollout_id = 'b-1-0' ORDER BY call_idx").df()
    assert calls.tool.tolist() == ["search", "cat", "list"]
    assert calls.turn_idx.tolist() == [0, 1, 1]
    assert calls.latency_s.tolist() == pytest.approx([0.41, 0.25, 0.10])
    assert calls.status.tolist() == ["ok", "ok", "error"]  # error text without status -> error
    assert calls.error.tolist()[2] == "HTTP 404 not found"
    assert json.loads(calls.arguments[0]) == {"query": "acme revenue"}
    assert calls.output_chars.tolist()[:2] == [812, 4000]

    grades = con.execute("SELECT grader, score, weight, passed FROM grades WHERE rollout_id = 'b-1-0' "
                         "ORDER BY grader").fetchall()
    assert grades == [("answer", 1.0, 0.8, True), ("format", 1.0, 0.2, None)]
    msgs = con.execute("SELECT msg_idx, role, content, turn_idx FROM messages WHERE rollout_id = 'b-1-0' "
                       "ORDER BY msg_idx").fetchall()
    assert msgs[0] == (0, "user", "What was Acme's revenue?", 0)
    assert json.loads(msgs[1][2]) == [{"type": "text", "text": "searching"}]  # structured content kept as JSON


def test_derived_fields(con):
    rl.ingest(con, GOOD)
    rows = con.execute("SELECT rollout_id, sample_id, attempt, started_at, latency_s, score, final_answer, "
                       "status, source_line FROM rollouts ORDER BY source_line").fetchall()
    second = rows[1]
    # id from what the line holds (not where it is); attempt from order within (run, sample) — the
    # first line of run 'base' (no split) for q-1; +02:00 converted to UTC
    line = GOOD.read_text().splitlines()[2]
    fingerprint = hashlib.md5(f"base\x1f\x1f\x1f{hashlib.md5(line.encode()).hexdigest()}".encode()).hexdigest()
    # no evaluation named: scoped by the file's name (identical records of two files stay two)
    assert second[0] == "rl-" + hashlib.md5(f"good.jsonl\x1f{fingerprint}".encode()).hexdigest()[:20]
    assert second[2] == 0
    assert second[3] == datetime(2025, 12, 9, 10, 0, 0)
    assert second[4] == pytest.approx(4.0)
    # no score: weighted mean of grades (0.5*3 + 1.0*1) / 4
    assert second[5] == pytest.approx(0.625)
    assert second[6] == "31"
    infra = rows[2]
    assert (infra[1], infra[5], infra[7], infra[4]) == ("2", None, "infra_error", 30.0)
    assert rows[3][2] == 4  # explicit attempt is kept


def test_runs_and_samples_tables(con):
    rl.ingest(con, GOOD)
    runs = con.execute("SELECT run_id, label, model, step, split FROM runs ORDER BY run_id").fetchall()
    assert runs == [("base", "base", None, None, None), ("base-valid", "base", "gpt-5", None, "valid"),
                    ("step10", "step10", "ft:gpt-5", 10, None)]
    samples = con.execute("SELECT sample_id, split FROM samples ORDER BY ALL").fetchall()
    assert samples == [("2", None), ("q-1", "valid"), ("q-1", None)]  # NULLs sort last


def test_sample_meta_is_the_sample_s_and_must_be_an_object(con, tmp_path):
    """``sample_meta`` (what the sample expects: the explorer shows it) lands in samples.meta, the
    first line's; anything but an object is a reject naming the field."""
    path = tmp_path / "m.jsonl"
    expected = {"expected_actions": [{"tool": "search", "arguments": {"q": "x"}}], "assertions": ["cites"]}
    lines = [{"run": "r", "sample_id": "s", "score": 1, "sample_meta": expected},
             {"run": "r", "sample_id": "s", "score": 0, "sample_meta": {"expected_outputs": ["later"]}},
             {"run": "r", "sample_id": "t", "score": 0, "sample_meta": ["not", "an", "object"]}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = rl.ingest(con, path)
    assert result.loc[0, ["loaded", "rejected"]].tolist() == [2, 1]
    assert json.loads(one(con, "SELECT meta FROM samples WHERE sample_id = 's'")[0]) == expected
    assert "field 'sample_meta' must be a JSON object" in one(con, "SELECT reason FROM rejects")[0]


def test_same_rollout_id_is_stable_across_databases(tmp_path):
    ids = []
    for name in ("a.duckdb", "b.duckdb"):
        c = rl.connect(tmp_path / name)
        rl.ingest(c, GOOD)
        ids.append(c.execute("SELECT list(rollout_id ORDER BY rollout_id) FROM rollouts").fetchone()[0])
        c.close()
    assert ids[0] == ids[1]


EXPECTED_REJECTS = {
    2: "field 'score' must be a number, got string \"abc\"",
    3: "invalid JSON: fix the line or remove it",
    4: "missing required field 'run' (or pass --run LABEL)",
    5: "missing required field 'sample_id'",
    6: "missing required field 'score' (required unless status is infra_error, model_error or ungraded)",
    9: "not a JSON object: each line must be one rollout object",
    10: "field 'status' must be one of ok, model_error, infra_error, truncated, ungraded, got string \"finished\"",
    11: "field 'tool_calls[1].latency_s' must be a number, got string \"slow\"",
    12: "missing required field 'tool_calls[1].tool'",
    13: "field 'started_at' must be an ISO-8601 timestamp string, got string \"yesterday\"",
    14: "field 'tool_calls' must be a JSON array, got object {\"tool\":\"search\"}",
    15: "field 'usage.input_tokens' must be an integer, got string \"many\"",
    17: "field 'grades[0].score' must be a number, got string \"high\"",
    18: "invalid JSON on the last line, which has no line end: the file looks truncated "
        "(was the writer stopped mid-write?)",
}


def test_every_reject_reason_with_its_line(con):
    result = rl.ingest(con, BAD)
    # 18 lines, one blank: 17 records = 3 loaded + 14 rejected; line 8 reuses line 1's id for another
    # rollout ('dup' is no unique id): loaded as a rollout of its own
    assert result.loc[0, ["records", "loaded", "duplicates", "rejected"]].tolist() == [17, 3, 0, 14]
    got = dict(con.execute("SELECT line_no, reason FROM rejects ORDER BY line_no").fetchall())
    assert got == EXPECTED_REJECTS
    raw = one(con, "SELECT raw FROM rejects WHERE line_no = 2")[0]
    assert raw == '{"run": "base", "sample_id": "ok-2", "score": "abc"}'
    assert sorted(r[0] for r in con.execute("SELECT source_line FROM rollouts").fetchall()) == [1, 8, 16]
    assert one(con, "SELECT n_records, n_rejected, n_duplicates FROM sources") == (17, 14, 0)
    ids = [r[0] for r in con.execute("SELECT rollout_id FROM rollouts WHERE rollout_id LIKE 'dup%' "
                                     "ORDER BY source_line").fetchall()]
    assert ids[0] == "dup" and re.fullmatch(r"dup~[0-9a-f]{8}", ids[1])


def test_invalid_utf8_line_is_rejected_with_its_number(con, tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"run": "a", "sample_id": "s1", "score": 1}\n'
                     b'{"run": "a", "sample_id": "caf\xe9", "score": 1}\n'
                     b'\n'
                     b'{"run": "a", "sample_id": "s3", "score": 0}\n')
    result = rl.ingest(con, path)
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [3, 2, 1]
    line, reason = one(con, "SELECT line_no, reason FROM rejects")
    assert line == 2 and reason.startswith("invalid UTF-8")
    assert sorted(r[0] for r in con.execute("SELECT source_line FROM rollouts").fetchall()) == [1, 4]


def test_duplicate_of_a_rollout_already_in_the_database(con, tmp_path):
    rl.ingest(con, GOOD)
    other = tmp_path / "other.jsonl"
    other.write_text('{"rollout_id": "b-1-0", "run": "base", "sample_id": "q-1", "score": 0}\n')
    result = rl.ingest(con, other)
    # 'b-1-0' is no globally unique id, and it holds another rollout here: both load, never a reject
    assert result.loc[0, ["records", "loaded", "duplicates", "rejected"]].tolist() == [1, 1, 0, 0]
    assert one(con, "SELECT count(*) FROM rejects") == (0,)
    assert one(con, "SELECT score FROM rollouts WHERE rollout_id = 'b-1-0'") == (1.0,)
    assert con.execute("SELECT score FROM rollouts WHERE rollout_id LIKE 'b-1-0~%'").fetchall() == [(0.0,)]
    # a unique id (a UUID) with other content is the same rollout rescored: kept once, and said
    uid = "6f1c0a52-1d2b-4c3e-9f00-0123456789ab"
    first, again = tmp_path / "u1.jsonl", tmp_path / "u2.jsonl"
    first.write_text(json.dumps({"rollout_id": uid, "run": "base", "sample_id": "q-9", "score": 1}) + "\n")
    again.write_text(json.dumps({"rollout_id": uid, "run": "base", "sample_id": "q-9", "score": 0}) + "\n")
    result = rl.ingest(con, [first, again])
    assert result[["loaded", "duplicates"]].values.tolist() == [[1, 0], [0, 1]]
    assert f"reuse the id of a rollout already loaded from {first.resolve()}" in result.reasons[1][0]


def test_run_split_step_overrides(con, tmp_path):
    path = tmp_path / "norun.jsonl"
    shutil.copy(BAD, path)
    result = rl.ingest(con, path, run="mine", split="train", step=3)
    assert 4 not in dict(con.execute("SELECT line_no, reason FROM rejects").fetchall())
    assert result.loc[0, "loaded"] == 4  # line 8 reuses line 1's id for another rollout: both load
    assert con.execute("SELECT DISTINCT run_id FROM rollouts").fetchall() == [("mine",)]
    assert one(con, "SELECT step, split FROM runs") == (3, "train")


def test_a_failed_grader_loads_with_its_rollout(con, tmp_path):
    """A grade with a null score is a grader that failed: loaded (score NULL, error kept), never a
    reason to reject; a rollout without a status becomes infra_error, one with a status keeps it."""
    records = [
        {"rollout_id": "a", "run": "r", "sample_id": "s1", "status": "infra_error",
         "grades": [{"grader": "answer", "score": None}]},
        {"rollout_id": "b", "run": "r", "sample_id": "s2",
         "grades": [{"grader": "tests", "score": 1.0, "weight": 3},
                    {"grader": "judge", "score": None, "error": "HTTP 503", "latency_s": 30.0}]},
        {"rollout_id": "c", "run": "r", "sample_id": "s3", "status": "ok",
         "grades": [{"grader": "tests", "score": 0.5, "weight": 1}, {"grader": "judge", "score": 1.0, "weight": 3,
                                                                     "latency_s": 2.5}]},
    ]
    path = tmp_path / "graded.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = rl.ingest(con, path)
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [3, 3, 0]
    got = {r[0]: r[1:] for r in con.execute("SELECT rollout_id, status, score FROM rollouts").fetchall()}
    # b: the weighted mean of the grades that answered (the failed one does not count as 0)
    assert got == {"a": ("infra_error", None), "b": ("infra_error", 1.0), "c": ("ok", (0.5 + 3.0) / 4)}
    grades = con.execute("SELECT rollout_id, grader, score, error, latency_s FROM grades ORDER BY 1, 2").fetchall()
    assert grades == [("a", "answer", None, None, None), ("b", "judge", None, "HTTP 503", 30.0),
                      ("b", "tests", 1.0, None, None), ("c", "judge", 1.0, None, 2.5), ("c", "tests", 0.5, None, None)]
    s = rl.summary(con, "r").iloc[0]
    assert (s.rollouts, s.n_infra_error, s.n_excluded, s.mean_score) == (3, 2, 2, 0.875)


def test_an_integer_too_large_is_rejected_not_nulled(con, tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_text('{"run": "r", "sample_id": "s", "score": 1, "attempt": 99999999999999999999}\n')
    rl.ingest(con, path)
    assert one(con, "SELECT reason FROM rejects")[0] == \
        "field 'attempt' must be an integer from 0 to 2147483647, got number 99999999999999999999"


def test_token_counts_past_int64_are_rejects_naming_the_field_wherever_they_stand(con, tmp_path):
    """#34: token counts written at the top level, as the rollouts table names them, were unknown
    fields: 2**63, 1e30 and 10**400 loaded as NULL (3 loaded, 0 rejected) and a sane count was
    lost. Now they are read and checked as in ``usage``, every token column."""
    path = tmp_path / "tokens.jsonl"
    huge = [2 ** 63, "1e30", 10 ** 400]
    lines = [f'{{"run": "r", "sample_id": "s{i}", "score": 1, "{field}": {value}}}'
             for i, (field, value) in enumerate((f, v) for f in ("input_tokens", "output_tokens", "reasoning_tokens",
                                                                 "cached_input_tokens") for v in huge)]
    lines += ['{"run": "r", "sample_id": "u", "score": 1, "usage": {"input_tokens": ' + str(2 ** 63) + '}}',
              '{"run": "r", "sample_id": "both", "score": 1, "input_tokens": 7, "usage": {"input_tokens": 8}}',
              '{"run": "r", "sample_id": "top", "score": 1, "input_tokens": 2500, "output_tokens": 300, '
              '"reasoning_tokens": 1200, "cached_input_tokens": 2000}',
              '{"run": "r", "sample_id": "same", "score": 1, "input_tokens": 9, "usage": {"input_tokens": 9}}']
    path.write_text("\n".join(lines) + "\n")
    result = rl.ingest(con, path).iloc[0]
    assert (result.records, result.loaded, result.rejected) == (16, 2, 14)
    reasons = [r for (r,) in con.execute("SELECT reason FROM rejects ORDER BY line_no").fetchall()]
    for k, field in enumerate(("input_tokens", "output_tokens", "reasoning_tokens", "cached_input_tokens")):
        assert reasons[3 * k:3 * k + 3] == [
            f"field '{field}' must be an integer from 0 to 9223372036854775807, got number 9223372036854775808",
            f"field '{field}' must be an integer, got number 1e30",
            f"field '{field}' must be an integer from 0 to 9223372036854775807, got number {'1' + '0' * 59}"]
    assert reasons[12:] == [
        "field 'usage.input_tokens' must be an integer from 0 to 9223372036854775807, got number 9223372036854775808",
        "field 'input_tokens' and 'usage.input_tokens' differ: give the count once"]
    rows = con.execute("SELECT sample_id, input_tokens, output_tokens, reasoning_tokens, cached_input_tokens "
                       "FROM rollouts ORDER BY sample_id").fetchall()
    assert rows == [("same", 9, None, None, None), ("top", 2500, 300, 1200, 2000)]


@given(mutated_jsonl(read_jsonl(FIXTURES / "native" / "good.jsonl")))
@SETTINGS
def test_mutated_native_lines_never_crash(data):
    assert_ingest_survives(data, "mutated.jsonl", "native")


def test_a_file_larger_than_a_chunk_loads_as_if_whole(tmp_path, monkeypatch):
    """Chunks of a few lines: line numbers, rejects (a cut-off last line too), duplicate ids and
    attempts continue across chunk borders exactly as in one piece."""
    from rolloutlab import config
    from test_ingest import TABLES, native_lines

    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(native_lines(0, 60)) + "\n" + native_lines(60, 1)[0][:30])
    whole = rl.connect(tmp_path / "whole.duckdb")
    rl.ingest(whole, path)
    monkeypatch.setattr(config, "NATIVE_CHUNK_BYTES", 700)  # a few lines a chunk
    chunked = rl.connect(tmp_path / "chunked.duckdb")
    result = rl.ingest(chunked, path).iloc[0]
    assert (result.records, result.rejected) == (61, whole.execute("SELECT n_rejected FROM sources").fetchone()[0])
    for name, sql in TABLES.items():
        assert chunked.execute(sql).fetchall() == whole.execute(sql).fetchall(), name
    whole.close(), chunked.close()


def test_a_converted_batch_larger_than_a_chunk_keeps_every_reject(tmp_path, monkeypatch):
    """Converted formats load through native batch files; a batch file larger than a chunk loads in
    chunks itself. Its rejects and the batch's conversion failures all reach the source."""
    from rolloutlab import config
    from test_ingest import TABLES

    src = FIXTURES.parent / "fixtures" / "buildhours" / "run-1" / "results.jsonl"
    whole = rl.connect(tmp_path / "whole.duckdb")
    rl.ingest(whole, src)
    monkeypatch.setattr(config, "NATIVE_CHUNK_BYTES", 300)
    chunked = rl.connect(tmp_path / "chunked.duckdb")
    rl.ingest(chunked, src)
    assert chunked.execute("SELECT count(*) FROM rejects").fetchone()[0] >= 3
    for name, sql in TABLES.items():
        assert chunked.execute(sql).fetchall() == whole.execute(sql).fetchall(), name
    whole.close(), chunked.close()


# ---- absurd values and values too large for their column (issue 23, points 9 and 10) ----------

ABSURD = [
    ('"score": 1e400', "field 'score' must be a finite number, got number 1e400"),
    ('"score": -1e400', "field 'score' must be a finite number, got number -1e400"),
    ('"started_at": "infinity"', "field 'started_at' must be an ISO-8601 timestamp string from 1990-01-01 to "
                                 "2100-01-01, got string \"infinity\""),
    ('"started_at": "294246-01-01T00:00:00Z"', "field 'started_at' must be an ISO-8601 timestamp string from "
                                               "1990-01-01 to 2100-01-01, got string \"294246-01-01T00:00:00Z\""),
    ('"ended_at": "1900-01-01T00:00:00Z"', "field 'ended_at' must be an ISO-8601 timestamp string from 1990-01-01 "
                                           "to 2100-01-01, got string \"1900-01-01T00:00:00Z\""),
    ('"latency_s": -3', "field 'latency_s' must be a finite number >= 0, got number -3"),
    ('"started_at": "2025-01-02T00:00:00Z", "ended_at": "2025-01-01T00:00:00Z"',
     "field 'ended_at' precedes 'started_at': the rollout's clock is wrong"),
    ('"step": 3000000000', "field 'step' must be an integer from -2147483648 to 2147483647, got number 3000000000"),
    ('"attempt": 2147483648', "field 'attempt' must be an integer from 0 to 2147483647, got number 2147483648"),
    ('"tool_calls": [{"tool": "t", "turn": 4294967296}]',
     "field 'tool_calls[0].turn' must be an integer from 0 to 2147483647, got number 4294967296"),
    ('"tool_calls": [{"tool": "t", "latency_s": -0.5}]',
     "field 'tool_calls[0].latency_s' must be a finite number >= 0, got number -0.5"),
    ('"tool_calls": [{"tool": "t", "started_at": "2025-01-02T00:00:00Z", "ended_at": "2025-01-01T00:00:00Z"}]',
     "field 'tool_calls[0].ended_at' precedes its 'started_at': the clock is wrong"),
    ('"messages": [{"role": "user", "turn": 9999999999}]',
     "field 'messages[0].turn' must be an integer from 0 to 2147483647, got number 9999999999"),
    ('"usage": {"input_tokens": -5}', "field 'usage.input_tokens' must be an integer from 0 to "
                                      "9223372036854775807, got number -5"),
    ('"grades": [{"grader": "g", "score": 1e999}]', "field 'grades[0].score' must be a finite number, got number 1e999"),
]


def test_absurd_values_are_rejects_naming_the_field(con, tmp_path):
    path = tmp_path / "absurd.jsonl"
    lines = [f'{{"run": "r", "sample_id": "s{i}", {extra}' + ('}' if extra.startswith('"score"') else ', "score": 1}')
             for i, (extra, _) in enumerate(ABSURD)]
    path.write_text("\n".join(lines) + '\n{"run": "r", "sample_id": "ok", "score": 0.5}\n')
    result = rl.ingest(con, path)  # one call: nothing aborts it
    assert result[["records", "loaded", "rejected"]].values.tolist() == [[len(ABSURD) + 1, 1, len(ABSURD)]]
    reasons = dict(con.execute("SELECT line_no, reason FROM rejects").fetchall())
    assert reasons == {i + 1: why for i, (_, why) in enumerate(ABSURD)}


FINITE = st.floats(allow_nan=False, allow_infinity=False, width=64)
INT = st.integers(min_value=-(2 ** 70), max_value=2 ** 70)
TIME = st.one_of(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)).map(
    lambda d: d.isoformat() + "Z"), st.sampled_from(["infinity", "-infinity", "294246-01-01T00:00:00Z"]))


@given(score=st.one_of(FINITE, st.just(float("inf"))), step=INT, attempt=INT, turn=INT, started=TIME,
       latency=st.one_of(FINITE, st.just(-1e-9)))
@SETTINGS
def test_any_number_or_time_loads_sane_or_is_rejected(tmp_path_factory, score, step, attempt, turn, started, latency):
    # Whatever the values, one ingest call finishes; a value loads only when it is sane.
    path = tmp_path_factory.mktemp("n") / "n.jsonl"
    text = json.dumps({"run": "r", "sample_id": "s", "score": score, "step": step, "attempt": attempt,
                       "started_at": started, "latency_s": latency, "tool_calls": [{"tool": "t", "turn": turn}]})
    path.write_text(text.replace("Infinity", "1e400") + "\n")
    con = rl.connect(path.with_suffix(".duckdb"))
    try:
        result = rl.ingest(con, path)
        assert result.records.tolist() == [1] and result.loaded.sum() + result.rejected.sum() == 1
        sane = (math.isfinite(score) and -2**31 <= step < 2**31 and 0 <= attempt < 2**31 and 0 <= turn < 2**31
                and started[:4].isdigit() and "1990" <= started[:4] < "2100" and len(started.split("-")[0]) == 4
                and latency >= 0)
        assert result.loaded.tolist() == [int(sane)], (text, con.execute("SELECT reason FROM rejects").fetchall())
    finally:
        con.close()

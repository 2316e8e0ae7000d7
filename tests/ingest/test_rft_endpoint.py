"""rft-endpoint: events split across files and calls, shuffled, parallel calls, ungraded rollouts,
infra failures, conflicts; assembled rollouts checked field by field."""
from __future__ import annotations

import json
import random
from datetime import datetime

import pytest

import rolloutlab as rl
from hypothesis import given
from hypothesis import strategies as st
from mutations import SETTINGS, assert_ingest_survives, mutated_jsonl, read_jsonl
from conftest import FIXTURES

RFT = FIXTURES / "rft"
FILES = [RFT / "grades.jsonl", RFT / "tools.jsonl", RFT / "tools-parallel.jsonl"]


def rollouts(con):
    return {r[0]: r[1:] for r in con.execute(
        "SELECT rollout_id, run_id, sample_id, started_at, latency_s, status, score, n_turns, n_tool_calls, "
        "final_answer, error FROM rollouts").fetchall()}


def check_assembled(con):
    got = rollouts(con)
    assert set(got) == {"r1", "r2", "r3", "r4", "r6"}  # r5's only event was rejected
    # r1: tool events from two files, ordered by start; cat and list overlap -> one turn
    assert got["r1"] == ("train", "q1", datetime(2025, 12, 9, 10, 0, 1), 9.0, "ok", 0.75, 3, 4, "$32", None)
    calls = con.execute("SELECT tool, turn_idx, latency_s, output_chars FROM tool_calls WHERE rollout_id = 'r1' "
                        "ORDER BY call_idx").fetchall()
    assert calls == [("search", 0, 1.0, 800), ("cat", 1, 2.0, 4000), ("list", 1, 0.5, 300), ("search", 2, 1.0, 900)]
    assert con.execute("SELECT grader, score FROM grades WHERE rollout_id = 'r1' ORDER BY grader").fetchall() == \
        [("answer", 1.0), ("format", 0.5)]
    # r2: a 504 -> infra_error, the raw error kept, scored 0 but excluded from statistics
    assert got["r2"][4:7] == ("infra_error", 0.0, 1) and got["r2"][9] == "search: upstream timeout"
    # r3: tool events, no grade event -> ungraded, attributed to the file set's run
    assert got["r3"][0:2] == ("train", None) and got["r3"][4] == "ungraded" and got["r3"][5] is None
    # r4: a grade event without tool events, latency from its explicit started_at
    assert got["r4"][2:8] == (datetime(2025, 12, 9, 12, 59), 60.0, "ok", 1.0, 0, 0)
    # r6: a 404 is the model's fault
    assert got["r6"][4] == "model_error" and got["r6"][9] == "cat: no such file"
    assert con.execute("SELECT prompt FROM samples WHERE sample_id = 'q1'").fetchone() == ("What was Acme's revenue?",)


def test_events_across_files_in_one_call(con):
    result = rl.ingest(con, FILES)
    assert (result.format == "rft-endpoint").all()
    assert result[["records", "loaded", "rejected"]].values.tolist() == [[7, 5, 2], [6, 5, 1], [2, 2, 0]]
    check_assembled(con)
    reasons = dict(con.execute("SELECT s.path || ':' || r.line_no, r.reason FROM rejects r JOIN sources s "
                               "USING (source_id)").fetchall())
    g, t = str(FILES[0].resolve()), str(FILES[1].resolve())
    assert reasons[f"{g}:5"] == f"conflicting grade event for rollout 'r4': score 0.0 here, 1.0 at {g} line 4 (kept)"
    assert reasons[f"{g}:7"].startswith("cannot tell the event's kind")
    assert reasons[f"{t}:5"] == "ended_at precedes started_at: the event's clock is wrong"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_order_and_separate_calls_do_not_matter(db_path, tmp_path, seed):
    # shuffle the lines of every file, and ingest the files one call at a time in a random order
    rng = random.Random(seed)
    files = []
    for f in FILES:
        lines = f.read_text().splitlines()
        rng.shuffle(lines)
        out = tmp_path / f.name
        out.write_text("\n".join(lines) + "\n")
        files.append(out)
    rng.shuffle(files)
    con = rl.connect(db_path)
    for f in files:
        rl.ingest(con, f, format="rft-endpoint")
    got = rollouts(con)
    assert got["r1"][3:8] == (9.0, "ok", 0.75, 3, 4)
    assert got["r3"][4] == "ungraded"
    assert got["r4"][5] in (1.0, 0.0)  # which conflicting grade is kept depends on which came first
    assert con.execute("SELECT count(*) FROM rejects WHERE reason LIKE 'conflicting grade%'").fetchone() == (1,)
    con.close()


def test_reingest_is_idempotent_and_a_changed_file_reassembles(con, tmp_path):
    parallel = tmp_path / "tools-parallel.jsonl"
    parallel.write_text(FILES[2].read_text())
    files = [FILES[0], FILES[1], parallel]
    rl.ingest(con, files)
    before = con.execute("SELECT count(*), sum(n_tool_calls) FROM rollouts").fetchone()
    assert rl.ingest(con, files).action.tolist() == ["unchanged"] * 3
    assert con.execute("SELECT count(*), sum(n_tool_calls) FROM rollouts").fetchone() == before
    # the parallel-calls file is rewritten without its last event: r1 is assembled again
    parallel.write_text(FILES[2].read_text().splitlines()[0] + "\n")
    assert rl.ingest(con, parallel).action.tolist() == ["replaced"]
    assert rollouts(con)["r1"][6:8] == (2, 3)
    assert con.execute("SELECT count(*) FROM rollouts").fetchone()[0] == before[0]
    assert con.execute("SELECT count(*) FROM endpoint_events WHERE rollout_id = 'r1'").fetchone() == (4,)


def test_format_detection():
    for f in FILES:
        assert rl.detect_format(f) == "rft-endpoint"


def test_a_failed_grader_is_an_infra_error_not_a_reject(con, tmp_path):
    events = [
        {"event": "tool", "rollout_id": "g1", "tool": "search", "started_at": "2025-12-09T10:00:00Z",
         "ended_at": "2025-12-09T10:00:01Z", "http_status": 200},
        # the grader endpoint timed out: no score at all
        {"event": "grade", "rollout_id": "g1", "run": "train", "sample_id": "q1", "http_status": 504,
         "error": "grader timed out", "ts": "2025-12-09T10:00:05Z"},
        # one of two graders did not answer; no event field: kind from rollout_id + sample_id
        {"rollout_id": "g2", "run": "train", "sample_id": "q2", "grades": {"tests": 1.0, "judge": None},
         "ts": "2025-12-09T10:00:05Z"},
        {"rollout_id": "g3", "run": "train", "sample_id": "q3", "score": 0.5, "ts": "2025-12-09T10:00:05Z"},
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    result = rl.ingest(con, path, format="rft-endpoint")
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [4, 4, 0]
    got = {r[0]: r[1:] for r in con.execute("SELECT rollout_id, status, score, error FROM rollouts").fetchall()}
    assert got == {"g1": ("infra_error", None, "grader grader: grader timed out"),
                   "g2": ("infra_error", 1.0, "grader judge: no score"), "g3": ("ok", 0.5, None)}
    grades = con.execute("SELECT rollout_id, grader, score, error FROM grades ORDER BY 1, 2").fetchall()
    assert grades == [("g1", "grader", None, "grader timed out"), ("g2", "judge", None, "no score"),
                      ("g2", "tests", 1.0, None)]


@pytest.mark.parametrize("name", ["grades.jsonl", "tools.jsonl"])
@given(data=st.data())
@SETTINGS
def test_mutated_endpoint_logs_never_crash(name, data):
    assert_ingest_survives(data.draw(mutated_jsonl(read_jsonl(RFT / name))), name, "rft-endpoint")


def test_an_ungraded_rollout_belongs_to_the_run_running_when_it_started(con, tmp_path):
    def tool(rid, start):
        return {"rollout_id": rid, "tool": "search", "started_at": f"2025-12-09T{start}:00Z",
                "ended_at": f"2025-12-09T{start}:30Z", "http_status": 200}

    def grade(rid, run, ts):
        return {"rollout_id": rid, "run": run, "sample_id": rid, "score": 1.0, "ts": f"2025-12-09T{ts}:50Z"}

    tools = [tool("a1", "10:00"), tool("a2", "10:05"), tool("b1", "11:00"), tool("b2", "11:05"),
             tool("lost-in-a", "10:02"), tool("lost-in-b", "11:03")]
    grades = [grade("a1", "step1", "10:01"), grade("a2", "step1", "10:06"),
              grade("b1", "step2", "11:01"), grade("b2", "step2", "11:06")]
    (tmp_path / "tools.jsonl").write_text("".join(json.dumps(e) + "\n" for e in tools))
    (tmp_path / "grades.jsonl").write_text("".join(json.dumps(e) + "\n" for e in grades))
    rl.ingest(con, [tmp_path / "tools.jsonl", tmp_path / "grades.jsonl"], format="rft-endpoint")
    got = dict(con.execute("SELECT rollout_id, run_id FROM rollouts WHERE status = 'ungraded'").fetchall())
    assert got == {"lost-in-a": "step1", "lost-in-b": "step2"}
    assert rl.runs(con).set_index("run").without_sample.to_dict() == {"step1": 1, "step2": 1}


# ---- events from elsewhere never overwrite; retries; unauthenticated calls (issue 23) ---------

def tool_event(rollout_id, **extra):
    return {"event": "tool", "rollout_id": rollout_id, "tool": "search", "started_at": "2025-12-09T10:00:00Z",
            "ended_at": "2025-12-09T10:00:01Z", **extra}


def write_events(path, events):
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


@pytest.mark.parametrize("order", ["native first", "events first", "one call"])
def test_an_event_never_destroys_a_rollout_of_another_file(con, tmp_path, order):
    native = tmp_path / "native.jsonl"
    native.write_text(json.dumps({"rollout_id": "r1", "run": "base", "sample_id": "q1", "score": 1.0,
                                  "grades": [{"grader": "judge", "score": 1.0}],
                                  "messages": [{"role": "user", "content": "q"}]}) + "\n")
    events = write_events(tmp_path / "events.jsonl", [tool_event("r1"), tool_event("r2")])
    if order == "native first":
        rl.ingest(con, native)
        result = rl.ingest(con, events)
        clash = result.reasons[0][0]
        assert f"{events}:1: rollout_id 'r1' is already a rollout loaded from {native} line 1 (native)" in clash
    elif order == "events first":
        rl.ingest(con, events)
        result = rl.ingest(con, native)
        assert result.reasons[0] == [f"{native}:1: rollout_id 'r1' is already logged as endpoint events in {events} "
                                     "line 1: a rollout loads from one format (give this file's rollouts ids of their "
                                     "own, or leave rollout_id out)"]
    else:
        result = rl.ingest(con, [native, events])
        assert result.rejected.tolist() == [0, 1]
    kept = con.execute("SELECT run_id, status, score FROM rollouts WHERE rollout_id = 'r1'").fetchall()
    if order == "events first":  # the events came first: theirs is the rollout, the native line the reject
        assert kept == [("unknown", "ungraded", None)]
    else:
        assert kept == [("base", "ok", 1.0)]
        assert con.execute("SELECT count(*) FROM messages WHERE rollout_id = 'r1'").fetchone() == (1,)
        assert con.execute("SELECT count(*) FROM grades WHERE rollout_id = 'r1'").fetchone() == (1,)
        assert rl.ingest(con, native).action.tolist() == ["unchanged"]
    assert con.execute("SELECT count(*) FROM rollouts WHERE rollout_id = 'r2'").fetchone() == (1,)


@pytest.mark.parametrize("failure", [{"http_status": 503, "error": "grader unavailable"},
                                     {"http_status": 504, "error": "timed out"}, {"error": "connection reset"}])
@pytest.mark.parametrize("same_file", [True, False])
def test_a_retried_grade_supersedes_the_failed_attempt(con, tmp_path, failure, same_file):
    failed = {"event": "grade", "rollout_id": "g1", "run": "train", "sample_id": "q1", "ts": "2025-12-09T10:00:05Z",
              **failure}
    retry = {"event": "grade", "rollout_id": "g1", "run": "train", "sample_id": "q1", "score": 0.75,
             "ts": "2025-12-09T10:00:09Z"}
    if same_file:
        result = rl.ingest(con, write_events(tmp_path / "e.jsonl", [tool_event("g1"), failed, retry]))
        assert result.rejected.tolist() == [0]
    else:
        rl.ingest(con, write_events(tmp_path / "a.jsonl", [tool_event("g1"), failed]))
        assert con.execute("SELECT status FROM rollouts").fetchone() == ("infra_error",)
        assert rl.ingest(con, write_events(tmp_path / "b.jsonl", [retry])).rejected.tolist() == [0]
    assert con.execute("SELECT status, score, error FROM rollouts").fetchone() == ("ok", 0.75, None)
    grader, score, details = con.execute("SELECT grader, score, details FROM grades").fetchone()
    attempts = json.loads(details)["failed_attempts"]  # the failed attempt stays visible
    assert (grader, score, len(attempts)) == ("grader", 0.75, 1)
    assert attempts[0]["error"] == failure["error"] and attempts[0].get("http_status") == failure.get("http_status")


def test_two_different_scores_still_conflict(con, tmp_path):
    graded = {"event": "grade", "rollout_id": "g1", "run": "train", "sample_id": "q1", "score": 0.75}
    result = rl.ingest(con, write_events(tmp_path / "e.jsonl", [graded, {**graded, "score": 0.25}]))
    assert "conflicting grade event for rollout 'g1': score 0.25 here, 0.75" in result.reasons[0][0]
    assert con.execute("SELECT score FROM rollouts").fetchone() == (0.75,)


@pytest.mark.parametrize("status", [401, 403])
def test_an_unauthenticated_call_never_counts(con, tmp_path, status):
    events = [tool_event("r1", http_status=status, error="missing or wrong bearer token"),
              {"event": "grade", "rollout_id": "r1", "run": "train", "sample_id": "q1", "http_status": status,
               "error": "missing or wrong bearer token"},
              {"event": "grade", "rollout_id": "r1", "run": "train", "sample_id": "q1", "score": 1.0}]
    result = rl.ingest(con, write_events(tmp_path / "e.jsonl", events))
    assert result.rejected.tolist() == [2]
    assert all(f"an unauthenticated call (HTTP {status})" in r for r in result.reasons[0])
    assert con.execute("SELECT status, score, n_tool_calls FROM rollouts").fetchall() == [("ok", 1.0, 0)]


def test_grades_that_are_not_finite_numbers_are_rejects(con, tmp_path):
    events = [{"event": "grade", "rollout_id": "a", "run": "x", "sample_id": "s", "grades": {"judge": 1.0, "exact": "HUGE"}},
              {"event": "grade", "rollout_id": "b", "run": "x", "sample_id": "s", "grades": {"judge": "NaN"}},
              {"event": "grade", "rollout_id": "c", "run": "x", "sample_id": "s", "grades": {"judge": None, "exact": 1}}]
    path = tmp_path / "e.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events).replace('"HUGE"', "1e400"))
    result = rl.ingest(con, path)
    assert result.reasons[0] == [
        f"{path}:1: field 'grades.exact' must be a finite number (or null for a grader that failed), got 1e400",
        f"{path}:2: field 'grades.judge' must be a finite number (or null for a grader that failed), got \"NaN\""]
    assert con.execute("SELECT rollout_id, status FROM rollouts").fetchall() == [("c", "infra_error")]


def test_a_retry_after_a_partly_failed_grade_supersedes_it(con, tmp_path):
    # one of two graders failed, the retry scored both: the retry is the grade, not a conflict
    first = {"event": "grade", "rollout_id": "g", "run": "x", "sample_id": "s", "grades": {"exact": None, "judge": 1}}
    retry = {**first, "grades": {"exact": 1, "judge": 1}}
    result = rl.ingest(con, write_events(tmp_path / "e.jsonl", [first, retry]))
    assert result.rejected.tolist() == [0]
    assert con.execute("SELECT status, score FROM rollouts").fetchone() == ("ok", 1.0)
    details = {g: d for g, d in con.execute("SELECT grader, details FROM grades").fetchall()}
    assert set(details) == {"exact", "judge"} and all(json.loads(d)["failed_attempts"] for d in details.values())


def test_endpoint_attempts_come_after_a_native_files_in_the_same_run(con, tmp_path):
    native = tmp_path / "nat.jsonl"
    native.write_text(json.dumps({"run": "live", "sample_id": "s1", "attempt": 0, "score": 1}) + "\n")
    events = [tool_event("e1"), {"event": "grade", "rollout_id": "e1", "run": "live", "sample_id": "s1",
                                 "score": 0.5, "ts": "2025-12-09T10:00:03Z"}]
    rl.ingest(con, native)
    rl.ingest(con, write_events(tmp_path / "ev.jsonl", events))
    assert con.execute("SELECT rollout_id, attempt FROM rollouts ORDER BY attempt").fetchall()[1] == ("e1", 1)
    from mutations import assert_each_attempt_once
    assert_each_attempt_once(con)


def test_a_grader_clock_behind_the_tool_endpoints_never_gives_a_negative_latency(con, tmp_path):
    """Tool and grader endpoints run on different hosts: a grade event stamped before the rollout's
    first tool call (the grader's clock 4 s behind) made a rollout end before it started (latency
    -4 s), a value the native loader rejects and a lake read-back refuses (#34 item 5). A rollout
    ends after its last call: with a clock behind, at the last call's end."""
    events = [{"event": "tool", "rollout_id": "x1", "tool": "search", "started_at": "2025-01-01T10:00:05Z",
               "ended_at": "2025-01-01T10:00:06Z"},
              {"event": "grade", "rollout_id": "x1", "run": "r", "sample_id": "s1", "score": 1,
               "ts": "2025-01-01T10:00:01Z"},
              {"event": "tool", "rollout_id": "x2", "tool": "search", "started_at": "2025-01-01T10:00:05Z",
               "ended_at": "2025-01-01T10:00:06Z"},
              {"event": "grade", "rollout_id": "x2", "run": "r", "sample_id": "s2", "score": 1,
               "ts": "2025-01-01T10:00:09Z"}]
    assert rl.ingest(con, write_events(tmp_path / "e.jsonl", events)).rejected.tolist() == [0]
    rows = con.execute("SELECT rollout_id, started_at, ended_at, latency_s FROM rollouts ORDER BY 1").fetchall()
    assert rows == [("x1", datetime(2025, 1, 1, 10, 0, 5), datetime(2025, 1, 1, 10, 0, 6), 1.0),
                    ("x2", datetime(2025, 1, 1, 10, 0, 5), datetime(2025, 1, 1, 10, 0, 9), 4.0)]

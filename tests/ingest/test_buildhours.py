"""Build-hour results.jsonl: trace events to tool calls, metrics to grades, errored rollouts."""
from __future__ import annotations

import pytest

import rolloutlab as rl
from hypothesis import given
from mutations import SETTINGS, assert_ingest_survives, mutated_jsonl, read_jsonl
from conftest import FIXTURES

PATH = FIXTURES / "buildhours" / "run-1" / "results.jsonl"


def test_records_map_field_by_field(con):
    assert rl.detect_format(PATH) == "buildhours"
    result = rl.ingest(con, PATH)
    assert result.loc[0, ["format", "records", "loaded", "rejected"]].tolist() == ["buildhours", 6, 3, 3]
    assert "run label 'run-1'" in result.reasons[0][0]
    rows = {r[0]: r[1:] for r in con.execute(
        "SELECT sample_id, status, score, latency_s, n_tool_calls, n_turns, input_tokens, reasoning_tokens, "
        "final_answer, error, run_id FROM rollouts").fetchall()}
    # the declared reward is the score, not the mean of the metrics
    assert rows["0"] == ("ok", 0.8, 12.5, 3, 2, 3000, 900, "$32M", None, "run-1")
    calls = con.execute("SELECT tool, turn_idx, output_chars, arguments FROM tool_calls t JOIN rollouts r "
                        "USING (rollout_id) WHERE r.sample_id = '0' ORDER BY call_idx").fetchall()
    assert [c[:3] for c in calls] == [("search", 0, 5), ("list", 0, 3), ("cat", 1, 10)]
    assert calls[0][3] == '{"q":"acme 2021"}'
    grades = con.execute("SELECT grader, score FROM grades ORDER BY grader").fetchall()
    assert grades == [("answer", 1.0), ("format", 0.0), ("reward", 0.8)]
    # reward -1 with an error: an errored rollout, never a score of -1 or 0
    assert rows["1"][:2] == ("infra_error", None)
    assert rows["1"][8] == "Tool search failed: HTTP 503 Service Unavailable"
    assert rows["2"][:2] == ("model_error", None) and rows["2"][8] == "Unknown tool: grep"
    err = con.execute("SELECT t.status, t.error FROM tool_calls t JOIN rollouts r USING (rollout_id) "
                      "WHERE r.sample_id = '1'").fetchall()
    assert err == [("error", "HTTP 503 Service Unavailable")]
    assert con.execute("SELECT min(score) FROM rollouts").fetchone()[0] >= 0


def test_rejects_name_the_line(con):
    rl.ingest(con, PATH)
    reasons = dict(con.execute("SELECT line_no, reason FROM rejects").fetchall())
    assert reasons[4].startswith("line 4: invalid JSON")
    assert reasons[6] == "line 6: missing required field 'sample_index'"
    assert reasons[7] == ("line 7: field 'metrics.reward' must be a number (or null for a grader that failed), "
                          'got "high"')


def test_summary_excludes_the_errored_rollouts(con):
    rl.ingest(con, PATH, run="gpt-x")
    s = rl.summary(con, "gpt-x").iloc[0]
    assert (s.rollouts, s.n_infra_error, s.n_model_error, s.n_excluded) == (3, 1, 1, 1)
    assert s.mean_score == pytest.approx((0.8 + 0.0) / 2)  # the model error counts as 0


def test_a_grader_that_returned_nothing(con, tmp_path):
    import json

    line = {"sample_index": 7, "trace": [], "final_message_text": "$1", "metrics": {"answer": 1.0, "judge": None},
            "grader_durations": {"answer": 0.25, "judge": 30.0}, "error": None, "duration_seconds": 4.0}
    never = {"sample_index": 8, "trace": [], "final_message_text": None, "metrics": {}, "error": None}
    path = tmp_path / "run-2" / "results.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps(line) + "\n" + json.dumps(never) + "\n")
    assert rl.ingest(con, path).loc[0, ["loaded", "rejected"]].tolist() == [2, 0]
    rows = con.execute("SELECT sample_id, status, score FROM rollouts ORDER BY 1").fetchall()
    assert rows == [("7", "infra_error", 1.0), ("8", "ungraded", None)]
    grades = con.execute("SELECT grader, score, latency_s, error FROM grades ORDER BY 1").fetchall()
    assert grades == [("answer", 1.0, 0.25, None), ("judge", None, 30.0, "the grader returned no value")]


@given(mutated_jsonl(read_jsonl(PATH)))
@SETTINGS
def test_mutated_results_never_crash(data):
    assert_ingest_survives(data, "results.jsonl", "buildhours")


def test_a_harness_exception_is_never_the_models_zero(con, tmp_path):
    # The notebook's loop raised for a reason that names no network failure: still the harness's,
    # unknown (infra_error), not a model failure counted as 0. Only the model's own output is.
    import json

    lines = [{"sample_index": 1, "trace": [], "metrics": {"reward": -1}, "error": "KeyError: 'output'"},
             {"sample_index": 2, "trace": [], "metrics": {"reward": -1},
              "error": "ValueError: unknown tool 'search_web' called"},
             {"sample_index": 3, "trace": [], "final_message_text": "$1", "metrics": {"reward": 1.0}, "error": None}]
    path = tmp_path / "run-3" / "results.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rl.ingest(con, path, run="r")
    assert con.execute("SELECT sample_id, status FROM rollouts ORDER BY 1").fetchall() == [
        ("1", "infra_error"), ("2", "model_error"), ("3", "ok")]
    assert rl.summary(con, "r").iloc[0].mean_score == pytest.approx(0.5)


def test_token_counts_are_checked_never_dropped(con, tmp_path):
    """#34: usage counts that were not Python ints (1e30, "12", a float) were dropped without a
    word; now the native loader checks them: a reject naming the field, a whole float loads."""
    import json

    def line(i, usage):
        return {"sample_index": i, "trace": [], "final_message_text": "$1", "metrics": {"reward": 1.0},
                "error": None, "usage_cumulative": usage}

    usages = [{"input_tokens": 1e30}, {"output_tokens": 2 ** 63}, {"reasoning_tokens": "12"},
              {"input_tokens": 10 ** 400}, {"input_tokens": 3000.0, "output_tokens": 120, "reasoning_tokens": 7}]
    path = tmp_path / "run-3" / "results.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(line(i, u)) + "\n" for i, u in enumerate(usages)))
    assert rl.ingest(con, path).loc[0, ["records", "loaded", "rejected"]].tolist() == [5, 1, 4]
    reasons = [r for (r,) in con.execute("SELECT reason FROM rejects ORDER BY line_no").fetchall()]
    assert reasons == [
        "line 1: field 'usage.input_tokens' must be an integer from 0 to 9223372036854775807, got number "
        "1000000000000000019884624838656",
        "line 2: field 'usage.output_tokens' must be an integer from 0 to 9223372036854775807, got number "
        "9223372036854775808",
        "line 3: field 'usage.reasoning_tokens' must be an integer, got string \"12\"",
        f"line 4: field 'usage.input_tokens' must be an integer from 0 to 9223372036854775807, got number 1{'0' * 59}"]
    assert con.execute("SELECT input_tokens, output_tokens, reasoning_tokens FROM rollouts").fetchall() == \
        [(3000, 120, 7)]

"""OpenAI Evals run output items, hand-written after openai-python's OutputItemListResponse and
RunRetrieveResponse types (tests/fixtures/README.md)."""
from __future__ import annotations

import json

from hypothesis import given

import rolloutlab as rl
from conftest import FIXTURES
from mutations import SETTINGS, assert_ingest_survives, mutated_document, mutated_jsonl, read_jsonl

EV = FIXTURES / "openai-evals"


def test_output_items_of_two_runs(con):
    result = rl.ingest(con, EV)
    assert set(result.format) == {"openai-evals"}
    assert result[["records", "loaded", "rejected"]].sum().tolist() == [7, 6, 1]
    assert con.execute("SELECT reason FROM rejects").fetchone()[0] == \
        "line 6: field 'results' must be a JSON array, got string \"exact: 1\""
    runs = rl.runs(con).set_index("run")
    # the eval.run object names its run; without one, the run id does
    assert runs[["model", "rollouts", "samples", "infra_errors"]].to_dict("index") == {
        "evalrun_def": {"model": "o4-mini-2025-04-16", "rollouts": 2, "samples": 2, "infra_errors": 0},
        "o4-mini-baseline": {"model": "o4-mini-2025-04-16", "rollouts": 4, "samples": 4, "infra_errors": 1}}
    rows = {r[0]: r[1:] for r in con.execute(
        """SELECT sample_id, score, status, n_tool_calls, n_turns, input_tokens, output_tokens, final_answer
           FROM rollouts WHERE run_id = 'o4-mini-baseline'""").fetchall()}
    assert rows["7"] == ((1.0 + 0.8) / 2, "ok", 2, 1, 120, 30, "$28.9M")  # two parallel chat tool calls
    assert rows["12"] == (1.0, "ok", 1, 1, 120, 30, "$4.1M")  # a Responses function_call
    assert rows["3"] == ((0.0 + 0.2) / 2, "ok", 0, 0, 120, 30, "$17.0M")
    assert rows["5"][:2] == (None, "infra_error")  # a server error is not the model's failure
    grades = con.execute("""SELECT g.grader, g.score, g.passed, g.details->>'type' FROM grades g
                            JOIN rollouts r USING (rollout_id) WHERE r.run_id = 'o4-mini-baseline'
                            AND r.sample_id = '3' ORDER BY 1""").fetchall()
    assert grades == [("exact", 0.0, False, "string_check"), ("judge", 0.2, False, "score_model")]
    assert con.execute("SELECT DISTINCT reference FROM samples WHERE sample_id = '7'").fetchall() == [("$28.9M",)]


def test_a_run_with_more_items_than_the_file_says_so(con, tmp_path):
    lines = (EV / "evalrun_abc-output_items.jsonl").read_text().splitlines()[:3]
    path = tmp_path / "partial.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = rl.ingest(con, path)
    assert any("reports 5 items, this file holds 2" in n for n in result.reasons[0])


@given(mutated_jsonl(read_jsonl(EV / "evalrun_abc-output_items.jsonl")))
@SETTINGS
def test_mutated_items_never_crash(data):
    assert_ingest_survives(data, "items.jsonl", "openai-evals")


@given(mutated_document(json.loads((EV / "evalrun_def-page.json").read_text())))
@SETTINGS
def test_mutated_pages_never_crash(data):
    assert_ingest_survives(data, "page.json", "openai-evals")

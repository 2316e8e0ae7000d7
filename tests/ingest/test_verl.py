"""verl generation dumps ({dir}/{global_step}.jsonl), hand-written after verl's
RayPPOTrainer._dump_generations (tests/fixtures/README.md)."""
from __future__ import annotations

import hashlib

from hypothesis import given

import rolloutlab as rl
from conftest import FIXTURES
from mutations import SETTINGS, assert_ingest_survives, mutated_jsonl, read_jsonl

VERL = FIXTURES / "verl"


def test_a_dump_folder(con):
    result = rl.ingest(con, VERL)
    assert set(result.format) == {"verl"}
    assert result[["records", "loaded", "rejected"]].sum().tolist() == [10, 8, 2]
    runs = rl.runs(con).set_index("run")
    assert runs[["step", "split", "rollouts", "samples"]].to_dict("index") == {
        "rollouts-step10": {"step": 10, "split": "train", "rollouts": 4, "samples": 2},
        "rollouts-step12": {"step": 12, "split": "train", "rollouts": 3, "samples": 2},
        "val_generations-step10": {"step": 10, "split": "valid", "rollouts": 1, "samples": 1}}
    first = read_jsonl(VERL / "rollouts" / "10.jsonl")[0]
    sample = "prompt:" + hashlib.sha1(first["input"].encode()).hexdigest()[:12]
    rows = con.execute("""SELECT attempt, score, n_tool_calls, n_turns, final_answer FROM rollouts
                          WHERE run_id = 'rollouts-step10' AND sample_id = ? ORDER BY attempt""", [sample]).fetchall()
    # the prompt's example <tool_call> (from the chat template) is never counted
    assert rows == [(0, 1.0, 1, 1, "The revenue was $28.9M."), (1, 0.8, 3, 2, "$28.9M")]
    assert con.execute("SELECT DISTINCT prompt, reference FROM samples WHERE sample_id = ?", [sample]).fetchall() == \
        [(first["input"], "$28.9M")]
    grades = con.execute("""SELECT g.grader, g.score, g.weight FROM grades g JOIN rollouts r USING (rollout_id)
                            WHERE r.run_id = 'rollouts-step10' AND r.sample_id = ? AND r.attempt = 0""",
                         [sample]).fetchall()
    assert grades == [("acc", 1.0, 0.0)]  # reward extras for reference; "pred" is not a number
    reasons = sorted(r[0] for r in con.execute("SELECT reason FROM rejects").fetchall())
    assert reasons[0] == "line 2: field 'score' must be a number, got string \"high\""
    assert reasons[1].startswith("line 4: invalid JSON on the last line")


def test_run_and_split_options(con):
    rl.ingest(con, VERL / "rollouts" / "10.jsonl", run="grpo-qwen", split="valid")
    assert rl.runs(con)[["run", "split"]].values.tolist() == [["grpo-qwen-step10", "valid"]]


@given(mutated_jsonl(read_jsonl(VERL / "rollouts" / "10.jsonl")))
@SETTINGS
def test_mutated_dumps_never_crash(data):
    assert_ingest_survives(data, "10.jsonl", "verl")

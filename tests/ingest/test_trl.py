"""TRL GRPO completions ({output_dir}/completions/completions_{step:05d}.parquet), written as
GRPOTrainer.log writes them (a pandas DataFrame of step, prompt, completion, the reward columns,
advantage, saved with to_parquet; tests/fixtures/README.md)."""
from __future__ import annotations

import hashlib

from hypothesis import given

import rolloutlab as rl
from conftest import FIXTURES
from mutations import SETTINGS, assert_ingest_survives, mutated_parquet, read_parquet

TRL = FIXTURES / "trl" / "grpo-qwen" / "completions"


def test_completions_of_two_steps(con):
    result = rl.ingest(con, FIXTURES / "trl")
    assert set(result.format) == {"trl"} and result[["records", "loaded", "rejected"]].sum().tolist() == [8, 8, 0]
    runs = rl.runs(con).set_index("run")
    assert runs[["step", "split", "rollouts", "samples"]].to_dict("index") == {
        "grpo-qwen-step10": {"step": 10, "split": "train", "rollouts": 4, "samples": 2},
        "grpo-qwen-step20": {"step": 20, "split": "train", "rollouts": 4, "samples": 2}}
    rows = read_parquet(TRL / "completions_00010.parquet")
    globex = "prompt:" + hashlib.sha1(rows[2]["prompt"].encode()).hexdigest()[:12]
    got = con.execute("""SELECT attempt, score, n_tool_calls, n_turns, final_answer FROM rollouts
                         WHERE run_id = 'grpo-qwen-step10' AND sample_id = ? ORDER BY attempt""", [globex]).fetchall()
    # score = the sum of the reward columns (TRL's default weights); the NaN format reward did not apply
    assert got == [(0, 1.5, 2, 1, "$4.1M"), (1, 0.0, 0, 0, "I don't know.")]
    grades = con.execute("""SELECT g.grader, g.score FROM grades g JOIN rollouts r USING (rollout_id)
                            WHERE r.run_id = 'grpo-qwen-step10' AND r.sample_id = ? AND r.attempt = 1""",
                         [globex]).fetchall()
    assert grades == [("correctness_reward", 0.0)]
    s = rl.summary(con, "grpo-qwen-step20").iloc[0]
    assert (s.mean_score, s.samples_with_signal) == ((1.5 + 0.5 + 1.5 + 0.5) / 4, 2)


def test_a_file_that_is_not_parquet_is_one_reject(con, tmp_path):
    cut = tmp_path / "completions_00030.parquet"
    cut.write_bytes((TRL / "completions_00010.parquet").read_bytes()[:300])
    result = rl.ingest(con, cut, format="trl")
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [1, 0, 1]
    assert "not a readable Parquet file" in con.execute("SELECT reason FROM rejects").fetchone()[0]


@given(mutated_parquet(read_parquet(TRL / "completions_00010.parquet")))
@SETTINGS
def test_mutated_completions_never_crash(data):
    assert_ingest_survives(data, "completions_00010.parquet", "trl")

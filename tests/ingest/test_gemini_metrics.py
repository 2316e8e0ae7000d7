"""Gemini RL tuning jobs' step metrics: the names Google's monitoring page documents, one step per
record (no file of them is documented: the plainest JSON lines and CSV are read)."""
from __future__ import annotations

import json

import rolloutlab as rl


def test_documented_names_to_splits_and_graders(tmp_path, con):
    lines = [{"step": 1, "/train_mean_reward": -0.5, "/learnable_prompt_ratio": 0.75,
              "exact/train_mean_reward": -1.0, "judge/train_rpc_error_ratio": 0.0, "/train_p95_reward_latency": 2.5},
             {"step": 10, "/train_mean_reward": 0.25, "/eval_mean_reward": 0.5, "exact/eval_clipping_rewards_ratio": 0.125,
              "unrelated": 3.0}]
    path = tmp_path / "tuningjob-77.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = rl.ingest(con, path)
    assert (result.format[0], result.records[0], result.rejected[0]) == ("gemini-metrics", 2, 0)
    got = {(r.job, r.step, r.split, r.grader, r.metric): r.value for r in rl.training_metrics(con).itertuples()}
    assert got == {("tuningjob-77", 1, "train", "", "reward_mean"): -0.5,
                   ("tuningjob-77", 1, "train", "", "learnable_prompt_ratio"): 0.75,
                   ("tuningjob-77", 1, "train", "exact", "reward_mean"): -1.0,
                   ("tuningjob-77", 1, "train", "judge", "rpc_error_ratio"): 0.0,
                   ("tuningjob-77", 1, "train", "", "p95_reward_latency"): 2.5,
                   ("tuningjob-77", 10, "train", "", "reward_mean"): 0.25,
                   ("tuningjob-77", 10, "valid", "", "reward_mean"): 0.5,
                   ("tuningjob-77", 10, "valid", "exact", "clipping_rewards_ratio"): 0.125}


def test_a_csv_of_the_same_names_and_rejects(tmp_path, con):
    path = tmp_path / "metrics.csv"
    path.write_text("step,/train_mean_reward,/eval_mean_reward\n1,0.5,\n2,0.75,0.5\nx,0.1,\n3,bad,\n")
    result = rl.ingest(con, path, run="gemini-job")
    assert (result.format[0], result.records[0], result.rejected[0]) == ("gemini-metrics", 4, 2)
    assert "field 'step' must be an integer" in " ".join(result.reasons[0])
    got = rl.training_metrics(con)
    assert sorted(zip(got.step, got.split, got.value)) == [(1, "train", 0.5), (2, "train", 0.75), (2, "valid", 0.5)]


def test_other_step_logs_are_not_taken_for_gemini_metrics(tmp_path):
    from rolloutlab.ingest import detect_format

    art = tmp_path / "history.jsonl"
    art.write_text(json.dumps({"step": 1, "train/reward": 0.5, "recorded_at": "2025-01-01T00:00:00"}) + "\n")
    assert detect_format(art) == "art"
    native = tmp_path / "n.jsonl"
    native.write_text(json.dumps({"run": "r", "sample_id": "s", "score": 1.0, "step": 3}) + "\n")
    assert detect_format(native) == "native"

"""Bedrock customization jobs' step metrics: files laid out as the Bedrock user guide documents them
(step_wise_training_metrics.csv, validation_metrics.csv; the RFT metric names of "Monitor training")."""
from __future__ import annotations

import rolloutlab as rl


def job_folder(tmp_path, job="abc123"):
    root = tmp_path / "output" / f"model-customization-job-{job}"
    (root / "training_artifacts").mkdir(parents=True)
    (root / "validation_artifacts" / "post_fine_tuning_validation").mkdir(parents=True)
    return root


def metrics(con) -> dict:
    return {(j, s, sp, m): v for j, s, sp, g, m, v in con.execute(
        "SELECT job, step, split, grader, metric, value FROM training_metrics ORDER BY ALL").fetchall()}


def test_the_documented_files_of_a_job(tmp_path, con):
    root = job_folder(tmp_path)
    (root / "training_artifacts" / "step_wise_training_metrics.csv").write_text(
        "step_number,epoch_number,training_loss,perplexity\n0,0,2.5,12.2\n1,0,1.75,5.75\n")
    (root / "validation_artifacts" / "post_fine_tuning_validation" / "validation_metrics.csv").write_text(
        "step_number,validation_loss\n1,1.9\n")
    result = rl.ingest(con, tmp_path / "output")
    assert set(result.format) == {"bedrock-metrics"} and result.rejected.sum() == 0 and result.records.sum() == 3
    job = "model-customization-job-abc123"
    assert metrics(con) == {(job, 0, "train", "loss"): 2.5, (job, 0, "train", "perplexity"): 12.2,
                            (job, 1, "train", "loss"): 1.75, (job, 1, "train", "perplexity"): 5.75,
                            (job, 1, "valid", "loss"): 1.9}


def test_rft_metric_names_meet_the_other_trainers(tmp_path, con):
    """The reward statistics of the guide's "Monitor training" (critic/rewards/*, val-score/...)
    and of AWS's Nova samples (train_reward_mean) are reward_mean / _max / _min, as OpenAI's job
    events and ART's history name them, so one curve shows them all."""
    root = job_folder(tmp_path, "rft9")
    (root / "training_artifacts" / "step_wise_training_metrics.csv").write_text(
        "step_number,epoch_number,critic/rewards/mean,critic/rewards/max,val-score/rewards/mean@1,actor/entropy,"
        "train_reward_mean\n"
        "5,0,-0.25,1.0,,0.62,-0.25\n"
        "10,1,0.4,1.0,0.35,0.51,0.4\n")
    assert rl.ingest(con, root).rejected.sum() == 0
    got = rl.training_metrics(con)
    rows = {(r.step, r.split, r.metric): r.value for r in got.itertuples()}
    assert rows[(5, "train", "reward_mean")] == -0.25 and rows[(10, "valid", "reward_mean")] == 0.35
    assert rows[(10, "train", "reward_max")] == 1.0 and rows[(5, "train", "actor/entropy")] == 0.62
    assert (5, "valid", "reward_mean") not in rows  # an empty cell: not measured at that step


def test_a_row_it_cannot_read_is_a_reject(tmp_path, con):
    path = tmp_path / "step_wise_training_metrics.csv"
    path.write_text("step_number,training_loss\n0,1.0\nlast,0.5\n2,high\n3,0.25,9\n4,0.125\n")
    result = rl.ingest(con, path, run="job")
    assert (result.records[0], result.rejected[0]) == (5, 3)
    reasons = " ".join(result.reasons[0])
    assert "line 3: field 'step_number' must be an integer" in reasons
    assert "line 4: field 'training_loss' must be a number" in reasons and "line 5: 1 cells more" in reasons
    assert sorted(metrics(con)) == [("job", 0, "train", "loss"), ("job", 4, "train", "loss")]

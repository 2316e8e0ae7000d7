"""OpenAI fine-tuning jobs: events (JSONL and list pages), the job object, checkpoints.

Fixtures are hand-written after the metrics event of a real RFT job shown in OpenAI's
reinforcement fine-tuning guide (appendix "Training metrics") and the API reference's job,
event and checkpoint objects (tests/fixtures/README.md)."""
from __future__ import annotations

import json

import pytest
from hypothesis import given

import rolloutlab as rl
from conftest import FIXTURES
from mutations import SETTINGS, assert_ingest_survives, mutated_document, mutated_jsonl, read_jsonl
from rolloutlab.ingest.formats.openai_finetune import event_metrics, split_metric

FT = FIXTURES / "openai-finetune"


def metric(df, step, split, grader, name):
    rows = df[(df.step == step) & (df.split == split) & (df.grader == grader) & (df.metric == name)]
    assert len(rows) == 1, (step, split, grader, name, len(rows))
    return rows.value.iloc[0]


def test_split_and_name_of_a_key():
    # the full validation set and one validation batch are two measurements: two splits
    assert split_metric("full_valid_mean_reward") == ("full_valid", "reward_mean")
    assert split_metric("full_valid_loss") == ("full_valid", "loss") and split_metric("valid_loss") == ("valid", "loss")
    assert split_metric("train_mean_reward") == ("train", "reward_mean")
    assert split_metric("valid_reward_mean") == ("valid", "reward_mean")
    assert split_metric("eval_prompt_tokens") == ("valid", "prompt_tokens")
    assert split_metric("reasoning_tokens_mean") == ("train", "reasoning_tokens_mean")


def test_the_guide_event_field_by_field():
    data = json.loads((FT / "ftjob-abc123-events.jsonl").read_text().splitlines()[1])["data"]
    got = event_metrics(data)
    g = "basic_model_grader"
    assert got[("train", "", "reward_mean")] == pytest.approx(0.4215686274509804)
    assert got[("valid", "", "reward_mean")] == 0.675
    assert got[("train", g, "reward_mean")] == pytest.approx(0.4471057884231537)
    assert got[("train", g, "model_grader_server_error_mean")] == 0.02
    assert got[("valid", g, "execution_latency_mean")] == pytest.approx(4.141402995586395)
    assert got[("train", "", "step_full_iteration_seconds")] == pytest.approx(731.5038568973541)
    assert got[("valid", "", "reasoning_tokens_mean")] == 1948.9
    assert got[("full_valid", "", "parse_error_mean")] == 0.0
    assert got[("full_valid", "", "reward_mean")] == 0.675
    assert got[("valid", "gpt-4o-2024-08-06", "model_grader_prompt_tokens")] == 4820
    assert ("train", "", "step") not in got and ("train", "", "total_steps") not in got
    # flat keys that repeat a structured one add nothing: one reward_mean per split
    assert sum(1 for k in got if k[2] == "reward_mean" and k[1] == "") == 3


def test_a_job_folder(con):
    result = rl.ingest(con, FT)
    assert set(result.format) == {"openai-finetune"}
    by_file = result.set_index(result.path.map(lambda p: p.rsplit("/", 1)[-1]))
    assert by_file.loc["ftjob-abc123-events.jsonl", ["records", "loaded", "rejected"]].tolist() == [5, 3, 2]
    reasons = dict(con.execute("SELECT line_no, reason FROM rejects").fetchall())
    assert reasons[4] == "line 4: field 'data.step' must be an integer, got string \"ten\""
    assert reasons[5].startswith("line 5: invalid JSON at line 1, column 41")
    df = rl.training_metrics(con)
    assert df.columns.tolist() == ["job", "step", "split", "grader", "metric", "value"]
    assert set(df.job) == {"ftjob-abc123"}
    # step 9 is in the JSONL and in the list page: one row per metric, not two
    assert df.duplicated(["job", "step", "split", "grader", "metric"]).sum() == 0
    rewards = df[(df.metric == "reward_mean") & (df.grader == "")]
    assert rewards[rewards.split == "train"][["step", "value"]].values.tolist() == [
        [8, 0.37], [9, 0.39], [10, pytest.approx(0.4215686274509804)]]
    assert rewards[rewards.split == "valid"][["step", "value"]].values.tolist() == [[10, 0.675]]  # validation steps only
    assert metric(df, 10, "full_valid", "", "loss") == 0.134  # from the checkpoint (full_valid_loss)
    assert metric(df, 9, "train", "basic_model_grader", "model_grader_server_error_mean") == 0.05
    job = rl.training_jobs(con).iloc[0]
    assert (job.job, job.model, job.method, job.status) == ("ftjob-abc123", "o4-mini-2025-04-16", "reinforcement",
                                                            "succeeded")
    hyper = json.loads(job.hyperparameters)
    assert (hyper["compute_multiplier"], hyper["eval_interval"], hyper["eval_samples"], hyper["batch_size"]) == \
        (1.0, 5, 2, 8)
    assert rl.runs(con).empty  # step metrics are not rollouts


def test_job_from_run_option_and_reingest(con, tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text((FT / "ftjob-abc123-events.jsonl").read_text().splitlines()[2] + "\n")
    rl.ingest(con, path, run="my-job")
    assert set(rl.training_metrics(con).job) == {"my-job"}
    path.write_text((FT / "ftjob-abc123-events.jsonl").read_text().splitlines()[1] + "\n")
    rl.ingest(con, path, run="my-job")  # replaced: step 9 gone, step 10 in
    assert sorted(set(rl.training_metrics(con, job="my-job").step)) == [10]
    assert rl.training_metrics(con, job="other").empty


def test_not_an_api_object_is_rejected(con, tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps({"object": "fine_tuning.job.event", "type": "message", "data": {}}) + "\n"
                    + json.dumps({"object": "something.else"}) + "\n")
    result = rl.ingest(con, path, format="openai-finetune")
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [2, 1, 1]
    assert con.execute("SELECT reason FROM rejects").fetchone()[0].startswith(
        "line 2: field 'object' must be one of fine_tuning.job.event")


@given(mutated_jsonl(read_jsonl(FT / "ftjob-abc123-events.jsonl")))
@SETTINGS
def test_mutated_events_never_crash(data):
    assert_ingest_survives(data, "events.jsonl", "openai-finetune")


@given(mutated_document(json.loads((FT / "ftjob-abc123-events-page.json").read_text())))
@SETTINGS
def test_mutated_pages_never_crash(data):
    assert_ingest_survives(data, "page.json", "openai-finetune")


def test_validation_batch_and_full_validation_are_both_kept(con, tmp_path):
    # An SFT job's events (as Azure OpenAI's pages show them): every step a validation batch
    # (valid_*), some steps the full validation set too (full_valid_*). Two measurements, never one.
    page = {"object": "list", "has_more": True, "data": [
        {"object": "fine_tuning.job.event", "id": "ftevent-2", "type": "metrics", "level": "info",
         "data": {"step": 100, "train_loss": 0.0008, "valid_loss": 1.25, "full_valid_loss": 2.5,
                  "valid_mean_token_accuracy": 0.75, "full_valid_mean_token_accuracy": 0.5}},
        {"object": "fine_tuning.job.event", "id": "ftevent-1", "type": "metrics", "level": "info",
         "data": {"step": 90, "train_loss": 0.01, "valid_loss": 1.5}}]}
    path = tmp_path / "ftjob-sft1-events.json"
    path.write_text(json.dumps(page))
    result = rl.ingest(con, path)
    df = rl.training_metrics(con)
    assert metric(df, 100, "valid", "", "loss") == 1.25 and metric(df, 100, "full_valid", "", "loss") == 2.5
    assert metric(df, 100, "full_valid", "", "token_accuracy_mean") == 0.5
    assert df[(df.split == "full_valid")].step.unique().tolist() == [100]  # only where the job measured it
    note = next(r for r in result.reasons[0] if "has_more" in r)
    assert "more events than this file holds" in note and "after=ftevent-1" in note


def test_an_events_page_takes_its_job_from_the_folder(con, tmp_path):
    # Event objects name no job: a folder saved for one job names it in the job or checkpoint files.
    folder = tmp_path / "my-sft-run"
    folder.mkdir()
    (folder / "events.json").write_text(json.dumps({"object": "list", "has_more": False, "data": [
        {"object": "fine_tuning.job.event", "id": "e1", "type": "metrics", "data": {"step": 10, "train_loss": 0.5}}]}))
    (folder / "job.json").write_text(json.dumps({"object": "fine_tuning.job", "id": "ftjob-Q1w2E3r4T5y6",
                                                 "model": "gpt-4.1", "status": "succeeded"}))
    rl.ingest(con, folder)
    assert set(rl.training_metrics(con).job) == {"ftjob-Q1w2E3r4T5y6"}

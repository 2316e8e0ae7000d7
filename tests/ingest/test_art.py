"""OpenPipe ART trajectories (Parquet) and history.jsonl. The email-agent-001 files were written
by openpipe-art 0.5.18 itself (Model.log); email-agent-002 follows the newer format-version-2
writer (tests/fixtures/README.md)."""
from __future__ import annotations

from hypothesis import given

import rolloutlab as rl
from conftest import FIXTURES
from mutations import SETTINGS, assert_ingest_survives, mutated_jsonl, mutated_parquet, read_jsonl, read_parquet

ART = FIXTURES / "art" / "email" / "models"


def test_trajectories_of_two_steps_and_a_validation(con):
    result = rl.ingest(con, ART / "email-agent-001" / "trajectories")
    assert set(result.format) == {"art"} and result[["records", "loaded", "rejected"]].sum().tolist() == [9, 9, 0]
    runs = rl.runs(con).set_index("run")
    assert runs[["step", "split", "rollouts", "samples"]].to_dict("index") == {
        "email-agent-001-step1": {"step": 1, "split": "train", "rollouts": 4, "samples": 2},
        "email-agent-001-step2": {"step": 2, "split": "train", "rollouts": 4, "samples": 2},
        "email-agent-001-val-step2": {"step": 2, "split": "valid", "rollouts": 1, "samples": 1}}
    # values from the script that wrote them: scenario s-17, attempt 1 made two calls, took 6 s
    got = con.execute("""SELECT attempt, score, n_tool_calls, n_turns, latency_s, final_answer FROM rollouts
                         WHERE run_id = 'email-agent-001-step2' AND sample_id = 's-17' ORDER BY attempt""").fetchall()
    assert got == [(0, 1.0, 1, 1, 3.5, "$28.9M"), (1, 0.5, 2, 2, 6.0, "$28.9M")]
    calls = con.execute("""SELECT t.tool, t.arguments::VARCHAR, t.output_chars FROM tool_calls t JOIN rollouts r
                           USING (rollout_id) WHERE r.run_id = 'email-agent-001-step2' AND r.sample_id = 's-17'
                           AND r.attempt = 1 ORDER BY t.call_idx""").fetchall()
    assert calls == [("search", '{"q":"acme"}', len("result 0 for s-17")), ("read", '{"id":4}', len("result 1 for s-17"))]
    grades = dict(con.execute("""SELECT g.grader, g.score FROM grades g JOIN rollouts r USING (rollout_id)
                                 WHERE r.run_id = 'email-agent-001-step1' AND r.sample_id = 's-42'
                                 AND r.attempt = 0""").fetchall())
    assert grades == {"correct": 0.0, "num_turns": 1.0}  # the metrics, for reference; duration is the latency


def test_format_version_2_choices_and_exceptions(con):
    rl.ingest(con, ART / "email-agent-001" / "trajectories" / "train" / "0002.parquet")
    rl.ingest(con, ART / "email-agent-002")
    cols = "sample_id, attempt, score, n_tool_calls, n_turns, latency_s, final_answer"
    v1 = con.execute(f"SELECT {cols} FROM rollouts WHERE run_id = 'email-agent-001-step2' ORDER BY 1, 2").fetchall()
    v2 = con.execute(f"SELECT {cols} FROM rollouts WHERE run_id = 'email-agent-002-step2' AND status = 'ok' "
                     "ORDER BY 1, 2").fetchall()
    assert v2 == v1  # the same trajectories, read from trajectory_json where the flat messages are absent
    failed = con.execute("""SELECT sample_id, status, score, error FROM rollouts
                            WHERE run_id = 'email-agent-002-step2' AND status <> 'ok' ORDER BY error""").fetchall()
    assert failed == [("s-77", "infra_error", None, "TimeoutError: tool endpoint timed out after 60s"),
                      ("s-77", "model_error", None, "ValueError: model returned invalid JSON for the tool call")]


def test_history_is_training_metrics(con):
    rl.ingest(con, ART / "email-agent-001" / "history.jsonl")
    df = rl.training_metrics(con)
    assert set(df.job) == {"email-agent-001"}
    reward = df[df.metric == "reward_mean"][["split", "step", "value"]].values.tolist()
    assert reward == [["train", 1, 0.5], ["train", 2, 0.625], ["valid", 2, 1.0]]
    lines = read_jsonl(ART / "email-agent-001" / "history.jsonl")
    assert df[(df.metric == "exception_rate") & (df.split == "valid")].value.tolist() == [lines[2]["val/exception_rate"]]
    # a section key belongs to its line's split
    assert df[(df.metric == "data/step_num_trajectories")][["split", "value"]].values.tolist() == [
        ["train", 4.0], ["train", 4.0], ["valid", 1.0]]
    assert not (df.metric.isin(["step", "training_step", "recorded_at"])).any()


@given(mutated_parquet(read_parquet(ART / "email-agent-002" / "trajectories" / "train" / "0002.parquet")))
@SETTINGS
def test_mutated_trajectories_never_crash(data):
    assert_ingest_survives(data, "0002.parquet", "art")


@given(mutated_jsonl(read_jsonl(ART / "email-agent-001" / "history.jsonl")))
@SETTINGS
def test_mutated_history_never_crash(data):
    assert_ingest_survives(data, "history.jsonl", "art")


def test_a_broken_history_line_and_a_cut_off_trajectories_file(con, tmp_path):
    history = tmp_path / "email-agent-003" / "history.jsonl"
    history.parent.mkdir()
    good = (ART / "email-agent-001" / "history.jsonl").read_text().splitlines()
    history.write_text(good[0] + "\n" + '{"train/reward": 0.7, "step": "two"}\n' + good[1][:60])
    result = rl.ingest(con, history)
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [3, 1, 2]
    reasons = [r[0] for r in con.execute("SELECT reason FROM rejects ORDER BY line_no").fetchall()]
    assert reasons[0] == "line 2: field 'step' must be an integer, got string \"two\""
    assert reasons[1].startswith("line 3: invalid JSON on the last line")
    cut = tmp_path / "trajectories" / "train" / "0003.parquet"
    cut.parent.mkdir(parents=True)
    cut.write_bytes((ART / "email-agent-001" / "trajectories" / "train" / "0001.parquet").read_bytes()[:500])
    result = rl.ingest(con, cut, format="art")
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [1, 0, 1]

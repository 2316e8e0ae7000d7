"""tau-bench v1: the real gpt-4o airline file, and broken copies."""
from __future__ import annotations

import json

import pytest

import rolloutlab as rl
from hypothesis import given
from hypothesis import strategies as st
from rolloutlab import config
from mutations import SETTINGS, assert_ingest_survives, mutated_document

REAL = pytest.mark.skipif(not config.real_data_dir().is_dir(), reason="real logs not found (../shared/data/real)")


def raw(real_dir):
    return json.loads((real_dir / "tau-bench" / "gpt-4o-airline.json").read_text())


def test_real_file_counts_and_values(real_dir, con):
    data = raw(real_dir)
    result = rl.ingest(con, real_dir / "tau-bench" / "gpt-4o-airline.json")
    assert result.loc[0, ["format", "records", "loaded", "rejected"]].tolist() == ["tau-bench", 200, 200, 0]
    assert "run label 'gpt-4o-airline'" in result.reasons[0][0]
    s = rl.summary(con, "gpt-4o-airline").iloc[0]
    assert (s.samples, s.rollouts, s.attempts_min, s.attempts_max) == (50, 200, 4, 4)
    assert s.mean_score == pytest.approx(0.42)
    # per-rollout tool calls: every tool call of every assistant message in traj
    want = {(str(t["task_id"]), t["trial"]): sum(len(m.get("tool_calls") or []) for m in t["traj"]
                                               if m.get("role") == "assistant") for t in data}
    got = {(sid, att): n for sid, att, n in con.execute(
        "SELECT sample_id, attempt, n_tool_calls FROM rollouts").fetchall()}
    assert got == want
    # arguments were JSON strings: stored as objects
    args = con.execute("SELECT arguments FROM tool_calls WHERE arguments IS NOT NULL LIMIT 1").fetchone()[0]
    assert isinstance(json.loads(args), dict)
    # repeated call ids inside a trajectory still pair with their outputs
    assert con.execute("SELECT count(*) FROM tool_calls WHERE output_chars IS NULL").fetchone()[0] == sum(
        1 for t in data for m in t["traj"] if m.get("role") == "assistant" for _ in (m.get("tool_calls") or [])
    ) - sum(1 for t in data for m in t["traj"] if m.get("role") == "tool")


def test_run_override_and_detection(real_dir, con):
    path = real_dir / "tau-bench" / "gpt-4o-airline.json"
    assert rl.detect_format(path) == "tau-bench"
    result = rl.ingest(con, path, run="gpt-4o")
    assert result.reasons[0] == []
    assert rl.runs(con).run.tolist() == ["gpt-4o"]


def test_truncated_file_keeps_the_complete_records(real_dir, con, tmp_path):
    text = (real_dir / "tau-bench" / "gpt-4o-airline.json").read_text()
    broken = tmp_path / "cut.json"
    broken.write_text(text[: len(text) // 2])
    result = rl.ingest(con, broken)
    loaded = result.loc[0, "loaded"]
    whole = json.loads(text)
    assert 0 < loaded < 200
    # every complete record before the cut loaded, in order
    assert con.execute("SELECT max(source_line) FROM rollouts").fetchone()[0] == loaded
    assert result.loc[0, "rejected"] == 1
    line, reason = con.execute("SELECT line_no, reason FROM rejects").fetchone()
    assert line == loaded + 1
    assert reason.startswith(f"record {loaded}: invalid JSON at line ") and "truncated" in reason
    assert con.execute("SELECT sum(score) FROM rollouts").fetchone()[0] == pytest.approx(
        sum(t["reward"] for t in whole[:loaded]))


def test_bad_records_are_rejected_with_their_location(con, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([
        {"task_id": 1, "trial": 0, "reward": 1.0, "traj": []},
        {"task_id": 2, "trial": 0, "reward": "high", "traj": []},
        {"trial": 1, "reward": 0.0, "traj": []},
        "junk",
    ]))
    result = rl.ingest(con, path, format="tau-bench")
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [4, 1, 3]
    reasons = dict(con.execute("SELECT line_no, reason FROM rejects").fetchall())
    assert reasons == {2: "record 1 (task 2, trial 0): field 'reward' must be a number, got string \"high\"",
                       3: "record 2 (task None, trial 1): missing required field 'task_id'",
                       4: "record 3: not a JSON object"}


@REAL
@given(data=st.data())
@SETTINGS
def test_mutated_real_results_never_crash(data):
    records = json.loads((config.real_data_dir() / "tau-bench" / "gpt-4o-airline.json").read_text())[:3]
    assert_ingest_survives(data.draw(mutated_document(records)), "results.json", "tau-bench")


def test_a_crashed_task_is_an_infra_error_not_the_models_zero(real_dir, con, tmp_path):
    # tau-bench's runner, when a task raises: EnvRunResult(reward=0.0, info={"error", "traceback"}, traj=[])
    data = raw(real_dir)
    crashed = [0, 7]
    for i in crashed:
        data[i] = {"task_id": data[i]["task_id"], "trial": data[i]["trial"], "reward": 0.0, "traj": [],
                   "info": {"error": "APIConnectionError: Connection error.", "traceback": "Traceback ...\n"}}
    data[3] = {**data[3], "reward": 0.0, "traj": [], "info": {"error": "BadRequestError: This model's maximum "
                                                                       "context length is 128000 tokens"}}
    path = tmp_path / "gpt-4o-airline.json"
    path.write_text(json.dumps(data))
    rl.ingest(con, path)
    rows = dict(con.execute("SELECT source_line - 1, status FROM rollouts WHERE status <> 'ok'").fetchall())
    assert rows == {0: "infra_error", 7: "infra_error", 3: "truncated"}
    assert con.execute("SELECT score, error FROM rollouts WHERE source_line = 1").fetchone() == \
        (None, "APIConnectionError: Connection error.\nTraceback ...\n")
    s = rl.summary(con).iloc[0]
    honest = [r["reward"] for i, r in enumerate(data) if i not in crashed]  # the truncated one counts, as 0
    assert s.n_infra_error == 2 and s.mean_score == pytest.approx(sum(honest) / len(honest))


def test_two_results_files_of_one_name_are_two_runs(real_dir, con, tmp_path):
    src = real_dir / "tau-bench" / "gpt-4o-airline.json"
    for folder in ("run-a", "run-b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / src.name).write_text(src.read_text() if folder == "run-a" else json.dumps(raw(real_dir)))
    result = rl.ingest(con, [tmp_path / "run-a" / src.name, tmp_path / "run-b" / src.name])
    assert result.loaded.tolist() == [200, 200]
    assert sorted(rl.runs(con).run) == ["gpt-4o-airline", "gpt-4o-airline@run-b"]
    assert rl.summary(con).attempts_max.tolist() == [4, 4]

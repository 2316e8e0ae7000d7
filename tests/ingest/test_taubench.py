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
    assert result.runs[0] == ["gpt-4o/airline"]  # model and environment from the file's name
    assert rl.runs(con).model.tolist() == ["gpt-4o"]  # only the name says it (never NaN)
    s = rl.summary(con, "gpt-4o/airline").iloc[0]
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
    # one label, two evaluations (the files): two runs, told apart by their folders
    runs = sorted(rl.runs(con).run)
    assert len(runs) == 2 and runs[0].startswith("gpt-4o/airline@") and runs[0].endswith("/run-a")
    assert runs[1].endswith("/run-b")
    assert rl.summary(con).attempts_max.tolist() == [4, 4]


# ---- ReAct / Act agents: actions as text (issue 33) --------------------------------------------

def react_result(task_id=1, trial=0):
    """A tau-bench v1 result as ChatReActAgent writes it (quoted from a real react run: the assistant
    writes 'Thought: ... Action: {json}', the tool's result comes back as a user message 'API output: ...')."""
    action = lambda name, args: json.dumps({"name": name, "arguments": args})  # noqa: E731
    return {"task_id": task_id, "trial": trial, "reward": 0.0, "info": {"task": {"instruction": "change my flight"}},
            "traj": [
                {"role": "system", "content": "#Available tools ..."},
                {"role": "user", "content": "Hi, I want to change my return flight."},
                {"role": "assistant", "tool_calls": [],
                 "content": "Thought:\nI need her user id.\nAction:\n" + action("get_user_details", {"user_id": "olivia_123"})},
                {"role": "user", "content": "API output: Error: user not found"},
                {"role": "assistant", "tool_calls": [],
                 "content": "Action:\n" + action("search_direct_flight", {"origin": "JFK", "destination": "SEA"})},
                {"role": "user", "content": "API output: [{\"flight_number\": \"HAT069\"}]"},
                {"role": "assistant", "tool_calls": [],
                 "content": "Thought:\nAnswer.\nAction:\n" + action("respond", {"content": "I found flight HAT069."})},
                {"role": "user", "content": "<think>ok</think> Thanks!"},
                {"role": "assistant", "content": "Action:\n{not json"},  # tau-bench makes this a 'respond'
            ]}


def test_text_actions_are_tool_calls_with_their_results(con, tmp_path):
    path = tmp_path / "react" / "num_trials-1.json"
    path.parent.mkdir()
    path.write_text(json.dumps([react_result()]))
    rl.ingest(con, path, format="tau-bench")
    calls = con.execute("SELECT tool, arguments, status, error, output_chars, turn_idx FROM tool_calls "
                        "ORDER BY call_idx").fetchall()
    assert [(c[0], json.loads(c[1]), c[2], c[3], c[4], c[5]) for c in calls] == [
        ("get_user_details", {"user_id": "olivia_123"}, "error", "Error: user not found", 21, 0),
        ("search_direct_flight", {"origin": "JFK", "destination": "SEA"}, "ok", None, 29, 1)]
    rollout = con.execute("SELECT n_tool_calls, n_turns, final_answer FROM rollouts").fetchone()
    assert rollout[:2] == (2, 2) and rollout[2] == "Action:\n{not json"  # the last thing it said
    roles = [r[0] for r in con.execute("SELECT role FROM messages ORDER BY msg_idx").fetchall()]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "user", "assistant"]


def test_react_and_act_files_of_one_name_are_two_runs(con, tmp_path):
    for strategy in ("react", "act"):
        (tmp_path / "results" / strategy / "4B").mkdir(parents=True)
        (tmp_path / "results" / strategy / "4B" / "num_trials-1.json").write_text(
            json.dumps([{**react_result(t), "reward": float(strategy == "act")} for t in (1, 2)]))
    result = rl.ingest(con, tmp_path / "results")
    assert result.loaded.tolist() == [2, 2] and result.rejected.tolist() == [0, 0]
    assert sorted(rl.runs(con).run) == ["num_trials-1@act/4B", "num_trials-1@react/4B"]


def test_real_react_and_act_runs(con):
    """Real ReAct / Act results ($ROLLOUTLAB_CORPUS, see /work/notes of issue 33: tau-bench-react):
    every text action a call, each with the 'API output:' after it."""
    import os
    from pathlib import Path

    roots = [Path(p) / "tau-bench-react" for p in os.environ.get("ROLLOUTLAB_CORPUS", "").split(":") if p]
    folder = next((r for r in roots if r.is_dir()), None)
    if folder is None:
        pytest.skip("no tau-bench-react folder in $ROLLOUTLAB_CORPUS (real ReAct results from other repositories)")
    files = sorted(folder.rglob("*.json"))
    result = rl.ingest(con, files)
    assert result.rejected.sum() == 0 and result.loaded.sum() == 302
    calls = con.execute("SELECT s.path, count(*) FROM tool_calls JOIN rollouts USING (rollout_id) "
                        "JOIN sources s USING (source_id) GROUP BY 1").fetchall()
    got = {"/".join(Path(path).parts[-3:]): n for path, n in calls}
    assert got == {"react/4B/num_trials-1.json": 913, "react/4B/num_trials-2.json": 1913,
                   "act/4B/num_trials-1.json": 565, "act/4B/num_trials-2.json": 1313,
                   "tau-bench-react/zen-wang-CSE-598-Tau-Bench-Phase-3/template_result.json": 18}


def test_the_task_s_expected_actions_and_outputs_reach_the_sample(real_dir, con):
    """What the explorer shows of what the agent was expected to do: tau-bench's info.task
    actions (name, kwargs) and outputs; an output is the reference only where it is the one."""
    data = raw(real_dir)
    rl.ingest(con, real_dir / "tau-bench" / "gpt-4o-airline.json")
    tasks = {str(t["task_id"]): t["info"]["task"] for t in data}
    got = {sid: (prompt, ref, json.loads(meta) if meta else None) for sid, prompt, ref, meta in
           con.execute("SELECT sample_id, prompt, reference, meta FROM samples").fetchall()}
    assert set(got) == set(tasks)
    for sid, task in tasks.items():
        prompt, ref, meta = got[sid]
        want = {"expected_actions": [{"tool": a["name"], "arguments": a["kwargs"]} for a in task["actions"]],
                "expected_outputs": [str(o) for o in task.get("outputs") or []]}
        want = {k: v for k, v in want.items() if v} or None
        assert (prompt, meta) == (task["instruction"], want), sid
        assert ref == (str(task["outputs"][0]) if len(task.get("outputs") or []) == 1 else None), sid
    assert got["1"][2] == {"expected_actions": [{"tool": "cancel_reservation", "arguments": {"reservation_id": "Z7GOZK"}}]}

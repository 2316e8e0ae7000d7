"""tau2-bench: the real base vs fine-tuned files, and broken copies."""
from __future__ import annotations

import json

import pytest

import rolloutlab as rl
from hypothesis import given
from hypothesis import strategies as st
from rolloutlab import config
from mutations import SETTINGS, assert_ingest_survives, mutated_document

AIRLINE = "gpt-4.1_airline_default_gpt-4.1_1trials.json"

REAL = pytest.mark.skipif(not config.real_data_dir().is_dir(), reason="real logs not found (../shared/data/real)")


def test_real_airline_base(real_dir, con):
    path = real_dir / "tau2-sft" / AIRLINE
    raw = json.loads(path.read_text())
    assert rl.detect_format(path) == "tau2"
    result = rl.ingest(con, path)
    assert result.loc[0, ["format", "records", "loaded", "rejected"]].tolist() == ["tau2", 20, 20, 0]
    assert result.runs[0] == ["gpt-4.1/airline"]
    s = rl.summary(con, "gpt-4.1/airline").iloc[0]
    assert (s.rollouts, s.samples) == (20, 20)
    assert s.mean_score == pytest.approx(0.5)
    rows = {r[0]: r[1:] for r in con.execute(
        "SELECT rollout_id, sample_id, n_tool_calls, latency_s, stop_reason, input_tokens, output_tokens, cost_usd "
        "FROM rollouts").fetchall()}
    for sim in raw["simulations"]:
        sid, n_calls, latency, stop, tokens_in, tokens_out, cost = rows[sim["id"]]
        assistant = [m for m in sim["messages"] if m["role"] == "assistant"]
        assert sid == f"airline:{sim['task_id']}"
        assert n_calls == sum(len(m.get("tool_calls") or []) for m in assistant)
        assert latency == pytest.approx(sim["duration"]) and stop == sim["termination_reason"]
        assert tokens_in == sum((m.get("usage") or {}).get("prompt_tokens", 0) for m in assistant)
        assert tokens_out == sum((m.get("usage") or {}).get("completion_tokens", 0) for m in assistant)
        assert cost == pytest.approx(sim["agent_cost"])


def test_fine_tuned_cost_zero_is_unknown_and_user_tool_calls_are_left_out(real_dir, con):
    ft = "ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm"
    path = real_dir / "tau2-sft" / f"{ft}_telecom_default_gpt-4.1_1trials.json"
    raw = json.loads(path.read_text())
    rl.ingest(con, path)
    assert con.execute("SELECT count(cost_usd) FROM rollouts").fetchone()[0] == 0
    want = sum(1 for s in raw["simulations"] for m in s["messages"] for c in (m.get("tool_calls") or [])
               if c.get("requestor") == "assistant")
    assert con.execute("SELECT count(*) FROM tool_calls").fetchone()[0] == want
    errors = sum(1 for s in raw["simulations"] for m in s["messages"] if m["role"] == "tool" and m.get("error")
                 and any(c.get("id") == m.get("id") and c.get("requestor") == "assistant"
                         for mm in s["messages"] for c in (mm.get("tool_calls") or [])))
    assert con.execute("SELECT count(*) FROM tool_calls WHERE status = 'error'").fetchone()[0] == errors


def test_every_real_file_loads(real_dir, con):
    result = rl.ingest(con, sorted((real_dir / "tau2-sft").glob("*.json")))
    assert (result.rejected == 0).all() and (result.format == "tau2").all()
    counts = dict(con.execute("SELECT run_id, count(*) FROM rollouts GROUP BY run_id").fetchall())
    ft = "ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm"
    # one run per results file: checkpoint x domain (x the no-user setting); --run merges on purpose
    assert counts == {f"{m}/{d}": n for m in ("gpt-4.1", ft)
                      for d, n in (("airline", 20), ("retail", 40), ("telecom", 40), ("telecom/llm_agent_solo", 40))}


def _tiny(tmp_path, sims, name="tiny.json"):
    doc = {"timestamp": "t", "info": {"agent_info": {"llm": "m", "implementation": "llm_agent"},
                                      "user_info": {"implementation": "user_simulator"},
                                      "environment_info": {"domain_name": "air"}},
           "tasks": [], "simulations": sims}
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=1))
    return path


def sim(task, reward=1.0, termination="user_stop", **extra):
    s = {"id": f"sim-{task}", "task_id": task, "trial": 0, "duration": 3.0, "termination_reason": termination,
         "reward_info": {"reward": reward} if reward is not None else None, "messages": []}
    s.update(extra)
    return s


def test_statuses_and_a_simulation_without_reward_info(con, tmp_path):
    path = _tiny(tmp_path, [sim("1"), sim("2", reward=None), sim("3", 0.0, "max_steps"),
                            sim("4", 0.0, "too_many_errors"), sim("5", 0.0, "infrastructure_error"),
                            sim("6", None, "user_error"), sim("7", 0.0, "agent_error")])
    result = rl.ingest(con, path)
    # a simulation that was never graded is loaded and counted (ungraded), never rejected
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [7, 7, 0]
    rows = {s: (st, score, stop) for s, st, score, stop in
            con.execute("SELECT sample_id, status, score, stop_reason_raw FROM rollouts").fetchall()}
    assert rows == {"air:1": ("ok", 1.0, "user_stop"), "air:2": ("ungraded", None, "user_stop"),
                    "air:3": ("truncated", 0.0, "max_steps"), "air:4": ("truncated", 0.0, "too_many_errors"),
                    "air:5": ("infra_error", 0.0, "infrastructure_error"),
                    "air:6": ("infra_error", None, "user_error"), "air:7": ("model_error", 0.0, "agent_error")}
    stops = dict(con.execute("SELECT stop_reason_raw, stop_reason FROM rollouts").fetchall())
    assert stops == {"user_stop": "user_stop", "max_steps": "turn_limit", "too_many_errors": "error",
                     "infrastructure_error": "error", "user_error": "error", "agent_error": "error"}
    s = rl.summary(con).iloc[0]
    assert (s.n_infra_error, s.n_ungraded, s.n_excluded, s.rollouts_used) == (2, 1, 3, 4)


def test_no_simulations_is_not_an_error(con, tmp_path):
    from rolloutlab.cli import main

    path = _tiny(tmp_path, [])
    result = rl.ingest(con, path)
    assert result.loc[0, ["action", "records", "loaded"]].tolist() == ["empty", 0, 0]  # never called loaded
    assert any("no simulations in the file" in r for r in result.reasons[0])
    con.close()
    assert main(["ingest", str(_tiny(tmp_path, [], "other.json")), "--db", str(tmp_path / "x.duckdb")]) == 0


def test_truncated_file_keeps_whole_simulations(con, tmp_path):
    text = _tiny(tmp_path, [sim(str(i)) for i in range(6)]).read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: int(len(text) * 0.8)])
    result = rl.ingest(con, cut, format="tau2")
    loaded = result.loc[0, "loaded"]
    assert 3 <= loaded < 6 and result.loc[0, "rejected"] == 1
    assert con.execute("SELECT reason FROM rejects").fetchone()[0].startswith(f"simulation {loaded}: invalid JSON at line")


@REAL
@given(data=st.data())
@SETTINGS
def test_mutated_real_results_never_crash(data):
    doc = json.loads((config.real_data_dir() / "tau2-sft" / "gpt-4.1_airline_default_gpt-4.1_1trials.json").read_text())
    doc = {**doc, "tasks": doc["tasks"][:2], "simulations": doc["simulations"][:2]}
    assert_ingest_survives(data.draw(mutated_document(doc)), "results.json", "tau2")


def _dir_layout(src, folder, names=lambda sim: f"{sim['id']}.json"):
    """tau2's dir layout of a results file: results.json without simulations, one file each."""
    data = json.loads(src.read_text())
    sims = data.pop("simulations")
    data["simulation_index"] = [{"id": s["id"], "task_id": s["task_id"], "trial": s["trial"]} for s in sims]
    (folder / "simulations").mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(data, indent=2))
    for sim in sims:
        (folder / "simulations" / names(sim)).write_text(json.dumps(sim, indent=2))
    return sims


def test_per_simulation_files_give_the_results_file_numbers(real_dir, tmp_path):
    src = real_dir / "tau2-sft" / AIRLINE
    whole, split = rl.connect(tmp_path / "whole.duckdb"), rl.connect(tmp_path / "split.duckdb")
    rl.ingest(whole, src)
    sims = _dir_layout(src, tmp_path / "gpt-4.1-run")
    result = rl.ingest(split, tmp_path / "gpt-4.1-run")
    assert set(result.format) == {"tau2"}
    assert result.loaded.sum() == len(sims) == 20 and result.rejected.sum() == 0
    assert any("dir layout" in r for r in result.reasons[result.path.str.endswith("results.json")].iloc[0])
    cols = ("rollout_id, run_id, sample_id, attempt, started_at, ended_at, latency_s, status, stop_reason, final_answer, "
            "score, n_turns, n_tool_calls, input_tokens, output_tokens, cost_usd")
    query = f"SELECT {cols} FROM rollouts ORDER BY rollout_id"
    assert split.execute(query).fetchall() == whole.execute(query).fetchall()
    calls = "SELECT rollout_id, call_idx, turn_idx, tool, arguments, status, output_chars FROM tool_calls ORDER BY 1, 2"
    assert split.execute(calls).fetchall() == whole.execute(calls).fetchall()
    assert rl.summary(split).equals(rl.summary(whole))
    whole.close(), split.close()


def test_task_trial_files_without_metadata(real_dir, con, tmp_path):
    folder = tmp_path / "verified-run"
    folder.mkdir()
    sims = json.loads((real_dir / "tau2-sft" / AIRLINE).read_text())["simulations"][:3]
    for sim in sims:
        (folder / f"task_{sim['task_id']}_trial_{sim['trial']}.json").write_text(json.dumps(sim))
    (folder / "task_x_trial_0.json").write_text(json.dumps(sims[0])[:500])  # cut off mid-write
    result = rl.ingest(con, folder, format="tau2")
    assert result[["records", "loaded", "rejected"]].sum().tolist() == [4, 3, 1]
    assert rl.runs(con).run.tolist() == ["verified-run"]
    got = dict(con.execute("SELECT sample_id, score FROM rollouts").fetchall())
    assert got == {f"unknown:{s['task_id']}": s["reward_info"]["reward"] for s in sims}


# ---- one run per experiment; full-duplex simulations (issue 24, points 2 and 5) ---------------

def test_each_results_file_is_its_own_experiment(real_dir, con, tmp_path):
    # Two runs of the same setting at different times (tau2 forks commit many): they share every
    # (task, trial 0), so the second is a run of its own, never a second attempt 0 in the first.
    src = json.loads((real_dir / "tau2-sft" / AIRLINE).read_text())
    again = tmp_path / "again.json"
    fresh = [{**sim, "id": f"rerun-{sim['id']}"} for sim in src["simulations"]]  # tau2 ids are uuid4s
    again.write_text(json.dumps({**src, "timestamp": "2025-09-01T10:00:00.000000", "simulations": fresh}))
    result = rl.ingest(con, [real_dir / "tau2-sft" / AIRLINE, again])
    assert result.loaded.tolist() == [20, 20] and result.rejected.tolist() == [0, 0]
    # one experiment (label), two evaluations: two runs named by their timestamps, grouped
    assert sorted(rl.runs(con).run) == ["gpt-4.1/airline@2025-08-01T16:20:43", "gpt-4.1/airline@2025-09-01T10:00:00"]
    assert rl.runs(con, group=True)[["label", "runs", "rollouts"]].values.tolist() == [["gpt-4.1/airline", 2, 40]]
    assert rl.summary(con).attempts_max.tolist() == [1, 1]
    # the same evaluation in another file: its simulations are duplicates, loaded once
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(src, indent=1))  # same content, other bytes
    result = rl.ingest(con, copy)
    assert result[["loaded", "duplicates", "rejected"]].values.tolist() == [[0, 20, 0]]
    assert result.runs[0] == ["gpt-4.1/airline@2025-08-01T16:20:43"]


def test_domains_are_separate_runs_and_run_merges_them_on_purpose(real_dir, con):
    files = [real_dir / "tau2-sft" / AIRLINE, real_dir / "tau2-sft" / "gpt-4.1_retail_defautl_gpt-4.1_1trials.json"]
    rl.ingest(con, files)
    assert sorted(rl.runs(con).run) == ["gpt-4.1/airline", "gpt-4.1/retail"]
    rl.ingest(con, files, run="gpt-4.1")  # unchanged files: say so, add nothing
    assert sorted(rl.runs(con).run) == ["gpt-4.1/airline", "gpt-4.1/retail"]


def test_a_full_duplex_simulation_is_ungraded_with_what_it_has(con, tmp_path):
    # tau2's voice mode stores ticks (data_model/message.py Tick), no messages, no reward_info
    def tick(i, agent=None, user=None, calls=(), results=()):
        return {"tick_id": i, "timestamp": f"2026-06-30T11:40:{i:02d}.000000",
                "agent_chunk": {"role": "assistant", "content": agent, "contains_speech": bool(agent)},
                "user_chunk": {"role": "user", "content": user, "contains_speech": bool(user)},
                "agent_tool_calls": list(calls), "agent_tool_results": list(results)}
    ticks = [tick(0), tick(1, user="Hi, I need to"), tick(2, user="change my flight."), tick(3),
             tick(4, agent="Sure,"), tick(5, agent="one moment.",
                                          calls=[{"id": "c1", "name": "get_reservation", "arguments": {"id": "X"}}]),
             tick(6, results=[{"id": "c1", "role": "tool", "content": "{...}", "requestor": "assistant"}]),
             tick(7, agent="Done.")]
    sims = [{"id": "v1", "task_id": "40", "trial": 0, "start_time": "2026-06-30T11:40:00",
             "end_time": "2026-06-30T11:46:16", "duration": 376.0, "termination_reason": "user_stop",
             "mode": "full_duplex", "ticks": ticks},
            {"id": "v2", "task_id": "41", "trial": 0, "duration": 12.5, "termination_reason": "infrastructure_error",
             "mode": "full_duplex", "ticks": []}]
    path = _tiny(tmp_path, sims)
    result = rl.ingest(con, path)
    assert result.loc[0, ["records", "loaded", "rejected"]].tolist() == [2, 2, 0]
    rows = con.execute("SELECT sample_id, attempt, status, stop_reason_raw, latency_s, score, n_tool_calls, n_turns "
                       "FROM rollouts ORDER BY 1").fetchall()
    assert rows == [("air:40", 0, "ungraded", "user_stop", 376.0, None, 1, 1),
                    ("air:41", 0, "infra_error", "infrastructure_error", 12.5, None, 0, 0)]
    msgs = con.execute("SELECT role, content FROM messages WHERE rollout_id = 'v1' ORDER BY msg_idx").fetchall()
    assert msgs == [("user", "Hi, I need to change my flight."), ("assistant", "Sure,"),
                    ("assistant", "one moment."), ("tool", "{...}"), ("assistant", "Done.")]


def test_a_trial_too_large_is_one_reject_when_the_label_is_taken(con, tmp_path):
    rl.ingest(con, _tiny(tmp_path, [sim("1"), sim("2")], name="first.json"))
    big = _tiny(tmp_path, [sim("1", trial=10**40), sim("3")], name="second.json")
    result = rl.ingest(con, big)
    assert result.action.tolist() == ["loaded"] and result.rejected.tolist() == [1]
    assert "field 'attempt' must be an integer" in " ".join(result.reasons[0])


def test_a_task_s_instructions_and_expected_actions_reach_the_samples(real_dir, con):
    path = real_dir / "tau2-sft" / "gpt-4.1_retail_defautl_gpt-4.1_1trials.json"
    data = json.loads(path.read_text())
    rl.ingest(con, path)
    task = next(t for t in data["tasks"] if t["id"] == "5")
    prompt, meta = con.execute("SELECT prompt, meta FROM samples WHERE sample_id = 'retail:5'").fetchone()
    assert prompt.startswith("domain: retail\nreason_for_call: " + task["user_scenario"]["instructions"]["reason_for_call"])
    assert "task_instructions" not in prompt  # "." says nothing
    criteria = task["evaluation_criteria"]
    assert json.loads(meta)["expected_actions"] == [{"tool": a["name"], "arguments": a["arguments"]}
                                                    for a in criteria["actions"]]
    # every simulated task of the file has what its evaluation expects
    simulated = {s["task_id"] for s in data["simulations"]}
    assert con.execute("SELECT count(*) FILTER (WHERE meta IS NULL), count(*) FROM samples").fetchone() == (
        0, len(simulated))

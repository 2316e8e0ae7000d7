"""The synthetic generator's stated properties, measured from its output with plain Python."""
from __future__ import annotations

import json
import statistics
from collections import defaultdict

import jsonschema
import pytest

from rolloutlab import config
from rolloutlab.demo import synth


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth")
    paths = synth.write_native(out, samples=600, attempts=3, checkpoints="base,step10", seed=7)
    assert [p.name for p in paths] == ["base.jsonl", "step10.jsonl"]
    by_run = {}
    for p in paths:
        by_run[p.stem] = [json.loads(line) for line in p.read_text().splitlines()]
    return by_run


def scored(rs):
    return [r for r in rs if r["status"] != "infra_error"]


def test_counts_and_shape(records):
    assert len(records["base"]) == len(records["step10"]) == 600 * 3
    assert {r["run"] for r in records["base"]} == {"base"} and records["step10"][0]["step"] == 10
    assert {c["tool"] for r in records["base"] for c in r["tool_calls"]} == {"search", "list", "cat"}


def test_every_record_matches_the_published_schema(records):
    schema = json.loads(config.NATIVE_SCHEMA.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    for r in records["base"][:300] + records["step10"][:300]:
        validator.validate(r)


def test_base_uses_8_to_9_calls_with_a_tail_beyond_15(records):
    calls = [len(r["tool_calls"]) for r in records["base"] if r["status"] != "infra_error"]
    assert 8.0 <= statistics.mean(calls) <= 9.0
    tail = sum(c > 15 for c in calls) / len(calls)
    assert 0.01 <= tail <= 0.10


def test_tuned_uses_2_to_4_calls_partly_in_parallel(records):
    rs = [r for r in records["step10"] if r["status"] != "infra_error"]
    calls = [len(r["tool_calls"]) for r in rs]
    assert 2.0 <= statistics.mean(calls) <= 4.0 and max(calls) <= 4
    widths = [n for r in rs for n in _turn_widths(r)]
    parallel_share = sum(w > 1 for w in widths) / len(widths)
    assert 0.2 <= parallel_share <= 0.8
    assert all(w == 1 for r in records["base"] for w in _turn_widths(r))


def _turn_widths(r):
    per_turn = defaultdict(int)
    for c in r["tool_calls"]:
        per_turn[c["turn"]] += 1
    return list(per_turn.values())


def test_accuracy_rises_from_about_06_to_about_075(records):
    acc = {run: statistics.mean(r["score"] >= 1.0 for r in scored(rs)) for run, rs in records.items()}
    assert 0.55 <= acc["base"] <= 0.66
    assert 0.70 <= acc["step10"] <= 0.80


def test_most_samples_constant_about_15_percent_vary(records):
    for run in ("base", "step10"):
        by_sample = defaultdict(list)
        for r in scored(records[run]):
            by_sample[r["sample_id"]].append(r["score"])
        multi = [s for s in by_sample.values() if len(s) >= 2]
        share = sum(max(s) > min(s) for s in multi) / len(multi)
        assert 0.08 <= share <= 0.25, (run, share)


def test_partial_credit_and_infra_errors(records):
    allr = records["base"] + records["step10"]
    assert any(0 < r["score"] < 1 for r in scored(allr))
    infra = [r for r in allr if r["status"] == "infra_error"]
    assert 0.003 <= len(infra) / len(allr) <= 0.025
    assert all(r["score"] is None and r["error"] and r["tool_calls"][-1]["status"] == "error" for r in infra)


def test_latency_is_consistent_and_tools_differ(records):
    r = records["base"][0]
    assert r["latency_s"] >= sum(c["latency_s"] for c in r["tool_calls"])
    med = {t: statistics.median(c["latency_s"] for rr in records["base"] for c in rr["tool_calls"]
                                if c["tool"] == t and c["status"] == "ok") for t in synth.TOOLS}
    assert med["list"] < med["cat"] < med["search"]


def test_seeded_and_deterministic(tmp_path):
    a = synth.write_native(tmp_path / "a", samples=20, seed=3)
    b = synth.write_native(tmp_path / "b", samples=20, seed=3)
    c = synth.write_native(tmp_path / "c", samples=20, seed=4)
    assert a[0].read_bytes() == b[0].read_bytes()
    assert a[0].read_bytes() != c[0].read_bytes()


def test_checkpoint_labels():
    cks = synth.parse_checkpoints("base,step5,step10")
    assert [(c.label, c.step, c.progress) for c in cks] == [("base", None, 0.0), ("step5", 5, 0.5),
                                                          ("step10", 10, 1.0)]
    with pytest.raises(ValueError, match="use 'base' or 'stepN'"):
        synth.parse_checkpoints("tuned")


def test_rollout_ids_are_unique_across_checkpoints_written_separately(tmp_path):
    a = synth.write_native(tmp_path / "a", samples=30, checkpoints="base", seed=1)
    b = synth.write_native(tmp_path / "b", samples=30, checkpoints="step10", seed=1)
    ids = [json.loads(line)["rollout_id"] for p in a + b for line in p.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 2 * 30 * 3


def test_endpoint_logs_tell_the_training_story(tmp_path):
    paths = synth.write_endpoint(tmp_path, samples=300, attempts=3, steps=(0, 10), seed=4)
    grades = [json.loads(line) for line in (tmp_path / "grade-events.jsonl").read_text().splitlines()]
    tools = [json.loads(line) for p in paths[:2] for line in p.read_text().splitlines()]
    by_step = defaultdict(list)
    for g in grades:
        by_step[g["step"]].append(g["score"] >= 1.0)
    assert statistics.mean(by_step[10]) > statistics.mean(by_step[0]) + 0.08
    calls = defaultdict(int)
    for t in tools:
        calls[t["rollout_id"]] += 1
    step_of = {g["rollout_id"]: g["step"] for g in grades}
    mean_calls = {s: statistics.mean(n for r, n in calls.items() if step_of.get(r) == s) for s in (0, 10)}
    assert mean_calls[0] > 7 and mean_calls[10] < 4
    failed = [t for t in tools if t["http_status"] >= 500]
    assert 0 < len({t["rollout_id"] for t in failed}) < 0.03 * len(grades)
    assert len(grades) < 2 * 300 * 3  # a few rollouts never graded
    assert {t["rollout_id"] for t in tools} - set(step_of)  # ... and those have tool events


def test_job_events_come_from_the_training_rollouts(tmp_path, con):
    """The synthetic job's train reward per step is the mean score of that step's rollouts as the
    platform scores them (a failed rollout 0): checked against the grade events."""
    import rolloutlab as rl

    paths = synth.write_endpoint(tmp_path, samples=6, attempts=2)
    events = [json.loads(line) for line in paths[-1].read_text().splitlines()]
    assert [e["data"]["step"] for e in events] == [10, 8, 6, 4, 2, 0]  # newest first, as the API lists them
    assert {e["data"]["step"] for e in events if "full_valid_mean_reward" in e["data"]} == {0, 10}
    rl.ingest(con, paths)
    tm = rl.training_metrics(con)
    train = tm[(tm.metric == "reward_mean") & (tm.grader == "") & (tm.split == "train")]
    # grade events carry the platform's score; never-graded rollouts (0.5%) have none, so allow for them
    by_step = dict(con.execute("""SELECT step, avg(score) FROM endpoint_events WHERE kind = 'grade'
                                  GROUP BY step""").fetchall())
    n_graded = dict(con.execute("SELECT step, count(*) FROM endpoint_events WHERE kind = 'grade' GROUP BY step").fetchall())
    compared = [(value, by_step[step]) for step, value in zip(train.step, train.value) if n_graded[step] == 12]
    assert len(compared) >= 4 and all(v == pytest.approx(want) for v, want in compared)


def test_judged_runs_plant_every_hack():
    records, planted = synth.generate_judged(samples=100, attempts=2, seed=4, hack_rate=0.05)
    assert len(records) == 400 and set(planted.values()) == set(synth.HACKS)
    assert all(r["run"] == "step10" for r in records if r["rollout_id"] in planted)
    for r in records:
        if r["grades"]:
            weights = {g["grader"]: g["weight"] for g in r["grades"]}
            assert weights == synth.JUDGED_WEIGHTS
            assert r["score"] == pytest.approx(sum(g["score"] * g["weight"] for g in r["grades"]), abs=1e-3)
    by_id = {r["rollout_id"]: r for r in records}
    for rid, kind in planted.items():
        r = by_id[rid]
        if kind == "few_tool_calls":
            assert r["tool_calls"] == [] and r["score"] == 1.0
        if kind == "grader_injection":
            assert r["final_answer"].endswith(synth.INJECTION)
        if kind == "generic_answer":
            assert r["final_answer"] == synth.GENERIC_ANSWER


LIMIT_WORDS = {"max_steps", "context_length_exceeded", "max_output_tokens"}


def test_models_and_stop_reasons(records):
    assert {r["model"] for r in records["base"]} == {synth.BASE_MODEL}
    assert {r["model"] for r in records["step10"]} == {synth.TUNED_MODEL.format(label="step10")}
    for run, rs in records.items():
        assert {r["stop_reason"] for r in rs} <= {"final_answer", "tool_error"} | LIMIT_WORDS
        assert all((r["stop_reason"] == "tool_error") == (r["status"] == "infra_error") for r in rs)
        assert all((r["stop_reason"] in LIMIT_WORDS) == (r["status"] == "truncated") for r in rs)
    assert LIMIT_WORDS <= {r["stop_reason"] for r in records["base"]}  # every kind of cut in the base
    share = {run: statistics.mean(r["status"] == "truncated" for r in scored(rs)) for run, rs in records.items()}
    assert 0.02 < share["base"] < 0.06 and share["step10"] < 0.015


def test_truncated_rollouts_carry_tokens_and_no_answer(records):
    cut = [r for rs in records.values() for r in rs if r["status"] == "truncated"]
    assert all(r["score"] == 0.0 and r["final_answer"] is None and r["usage"]["input_tokens"] > 0
               and r["usage"]["output_tokens"] > 0 for r in cut)
    base_context = 900  # what every request starts with, before the prompt
    for r in cut:
        calls = r["tool_calls"]
        tool_tokens = sum(c["output_chars"] // 4 for c in calls)
        if r["stop_reason"] == "context_length_exceeded":  # its next request would pass the window
            most = base_context + len(r["prompt"]) // 4 + tool_tokens + 160 * len(calls)
            assert most > synth.CONTEXT_WINDOW
        if r["stop_reason"] == "max_output_tokens":  # its last response used every output token
            assert r["usage"]["reasoning_tokens"] >= synth.MAX_OUTPUT_TOKENS - 90
    for r in records["base"]:  # an answered rollout's last request fit the window
        if r["stop_reason"] == "final_answer":
            least = base_context + len(r["prompt"]) // 4 + sum(c["output_chars"] // 4 + 40 for c in r["tool_calls"])
            assert least <= synth.CONTEXT_WINDOW


def test_costs_logged_for_the_base_model_only_at_the_price_tables_list_price(records):
    import tomllib

    from rolloutlab.analysis.metrics import costs as cost

    listed = tomllib.loads(cost.PRICES_FILE.read_text())["models"]["o4-mini"]
    assert synth.BASE_MODEL in listed["aliases"]
    assert synth.BASE_PRICE == {k: listed[k] for k in ("input", "output", "reasoning")}
    for r in records["base"]:
        u = r["usage"]
        assert r["cost_usd"] == pytest.approx((u["input_tokens"] * 1.10 + u["output_tokens"] * 4.40
                                               + u["reasoning_tokens"] * 4.40) / 1e6, rel=1e-12)
    assert all(r["cost_usd"] is None for r in records["step10"])  # the platform logs none for a fine-tuned model


def test_two_platforms_on_the_same_samples():
    """Issue 36 (SYNTHETIC): one agent fine-tuned on Bedrock (rewards in [0, 1]) and on Gemini
    (rewards in [-1, 1]): the same samples and attempts, each run declaring its range, costs logged."""
    from rolloutlab.demo import synth

    records = list(synth.generate_platforms(samples=20, attempts=2, seed=3, messages=False))
    by_run = {}
    for r in records:
        by_run.setdefault(r["run"], []).append(r)
    assert sorted(by_run) == ["gemini-rl", "nova-rft"]
    assert {(r["sample_id"], r["attempt"]) for r in by_run["nova-rft"]} == \
        {(r["sample_id"], r["attempt"]) for r in by_run["gemini-rl"]} and len(by_run["nova-rft"]) == 40
    for run, (low, high) in (("nova-rft", (0.0, 1.0)), ("gemini-rl", (-1.0, 1.0))):
        scored = [r for r in by_run[run] if r["score"] is not None]
        assert all(r["run_meta"]["reward_range"] == [low, high] for r in by_run[run])
        assert all(low <= r["score"] <= high for r in scored) and max(r["score"] for r in scored) == high
        assert all(g["score"] is None or low <= g["score"] <= high for r in scored for g in r["grades"])
        assert all(r["cost_usd"] > 0 for r in by_run[run])
    assert min(r["score"] for r in by_run["gemini-rl"] if r["score"] is not None) < 0  # a wrong answer below 0

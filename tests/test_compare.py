"""compare, sample_deltas, distribution_shift, shift_test, by_step: statistics with known answers."""
from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict

import numpy as np
import pytest

import rolloutlab as rl

from conftest import rollout


def two_runs(base_scores: dict, cand_scores: dict, base_calls=3, cand_calls=2):
    """{sample: [scores per attempt]} for each run -> records."""
    out = []
    for run, table, calls in (("base", base_scores, base_calls), ("cand", cand_scores, cand_calls)):
        for sid, scores in table.items():
            for j, s in enumerate(scores):
                out.append(rollout(run, sid, s, ["search"] * calls, latency=10.0 + j + (5 if run == "base" else 0),
                                   step=None if run == "base" else 10))
    return out


def test_identical_candidate_gives_zero_difference(load, con):
    table = {f"s{i}": [float(i % 2), 0.5, 1.0] for i in range(30)}
    load(two_runs(table, table, base_calls=3, cand_calls=3))
    df = rl.compare(con, "base", "cand", n_boot=500).set_index("metric")
    for metric in ("score", "pass@1", "best_of_n", "tool_calls_per_rollout"):
        row = df.loc[metric]
        assert row["diff"] == 0
        assert row.ci_low <= 0 <= row.ci_high
        assert row.p_value == 1.0
        assert not row.significant
    assert df.attrs["wins"] == 0 and df.attrs["losses"] == 0 and df.attrs["ties"] == 30


def test_constructed_improvement_is_detected(load, con):
    base = {f"s{i}": [0.0, 0.0, 1.0 if i % 3 == 0 else 0.0] for i in range(40)}
    cand = {f"s{i}": [1.0, 1.0, 0.0 if i % 10 == 0 else 1.0] for i in range(40)}
    load(two_runs(base, cand))
    df = rl.compare(con, "base", "cand", n_boot=1000)
    row = df.set_index("metric").loc["score"]
    d = [np.mean(cand[s]) - np.mean(base[s]) for s in base]
    assert row["diff"] == pytest.approx(np.mean(d))
    assert row.ci_low > 0 and row.significant and row.p_value < 0.01
    assert row.se == pytest.approx(np.std(d, ddof=1) / math.sqrt(40))
    assert (df.attrs["wins"], df.attrs["ties"], df.attrs["losses"]) == (40, 0, 0)
    calls = df.set_index("metric").loc["tool_calls_per_rollout"]
    assert (calls.base, calls.candidate, calls["diff"]) == (3.0, 2.0, -1.0)
    assert calls.rel_change == pytest.approx(-1 / 3)
    lat = df.set_index("metric").loc["latency_p50"]
    assert (lat.base, lat.candidate) == (16.0, 11.0)  # base attempts 15,16,17; candidate 10,11,12
    assert lat.ci_low <= -5 <= lat.ci_high


def test_permutation_p_matches_exhaustive_enumeration(load, con):
    base = {"a": [0.0], "b": [0.5], "c": [1.0], "d": [0.0], "e": [0.25]}
    cand = {"a": [1.0], "b": [0.5], "c": [0.5], "d": [1.0], "e": [1.0]}
    load(two_runs(base, cand))
    d = [cand[s][0] - base[s][0] for s in base]
    observed = abs(np.mean(d))
    flips = [abs(np.mean([sign * x for sign, x in zip(signs, d)]))
             for signs in itertools.product((1, -1), repeat=len(d))]
    expected = sum(f >= observed - 1e-12 for f in flips) / len(flips)
    row = rl.compare(con, "base", "cand", n_boot=2000).set_index("metric").loc["score"]
    assert row.p_value == pytest.approx(expected)
    # d = 1, 0, -0.5, 1, 0.75: |sum| >= 2.25 only for +-(1 + 1 + 0.75 +- 0.5): 4 of 16 signs, x2 for the 0
    assert row.p_value == pytest.approx(8 / 32)


def test_samples_in_one_run_are_counted_not_dropped(load, con):
    base = {"a": [1.0], "b": [0.0], "only-base": [1.0]}
    cand = {"a": [1.0], "b": [1.0], "only-cand-1": [0.0], "only-cand-2": [0.0]}
    load(two_runs(base, cand))
    df = rl.compare(con, "base", "cand", n_boot=100)
    assert (df.attrs["shared_samples"], df.attrs["base_only"], df.attrs["candidate_only"]) == (2, 1, 2)
    assert (df.n_samples == 2).all()
    assert df.set_index("metric").loc["score", "diff"] == pytest.approx(0.5)


def test_infra_errors_are_excluded_but_their_rate_is_compared(load, con):
    records = two_runs({f"s{i}": [1.0, 1.0] for i in range(10)}, {f"s{i}": [1.0, 1.0] for i in range(10)})
    records.append(rollout("cand", "s0", None, ["search"], status="infra_error"))
    load(records)
    df = rl.compare(con, "base", "cand", n_boot=200).set_index("metric")
    assert df.loc["score", "diff"] == 0
    assert df.loc["infra_error_rate", "candidate"] == pytest.approx(1 / 21)
    inc = rl.compare(con, "base", "cand", n_boot=200, include_errors=True).set_index("metric")
    assert inc.loc["score", "candidate"] == pytest.approx((9 * 1.0 + 2 / 3) / 10)


def test_sample_deltas_quadrants(load, con):
    records = [
        rollout("base", "better-fewer", 0.0, ["s"] * 3), rollout("cand", "better-fewer", 1.0, ["s"]),
        rollout("base", "better-more", 0.0, ["s"]), rollout("cand", "better-more", 1.0, ["s"] * 2),
        rollout("base", "better-same", 0.0, ["s"]), rollout("cand", "better-same", 1.0, ["s"]),
        rollout("base", "worse-fewer", 1.0, ["s"] * 2), rollout("cand", "worse-fewer", 0.0, ["s"]),
        rollout("base", "worse-more", 1.0, ["s"]), rollout("cand", "worse-more", 0.5, ["s"] * 4),
        rollout("base", "same", 1.0, ["s"]), rollout("cand", "same", 1.0, ["s"] * 5),
        rollout("base", "base-only", 1.0),
    ]
    load(records)
    df = rl.sample_deltas(con, "base", "cand").set_index("sample_id")
    assert df.quadrant.to_dict() == {
        "better-fewer": "better and fewer tools", "better-more": "better and more tools",
        "better-same": "better, same tools", "worse-fewer": "worse and fewer tools",
        "worse-more": "worse and more tools", "same": "no change"}
    assert df.loc["worse-more", ["score_diff", "tool_calls_diff", "outcome"]].tolist() == [-0.5, 3.0, "loss"]
    assert df.outcome.value_counts().to_dict() == {"win": 3, "loss": 2, "tie": 1}


def test_distribution_shift_and_test(load, con):
    base = {f"s{i}": [1.0] for i in range(6)}
    records = two_runs(base, base, base_calls=3, cand_calls=1)
    records[0]["tool_calls"] = records[0]["tool_calls"] * 6  # one base rollout with 18 calls
    load(records)
    dist = rl.distribution_shift(con, "base", "cand", "tool_calls")
    assert dist[["value", "base_count", "candidate_count"]].values.tolist() == [[1, 0, 6], [3, 5, 0], [18, 1, 0]]
    assert dist.base_share.sum() == pytest.approx(1) and (dist.value_high == dist.value + 1).all()
    lat = rl.distribution_shift(con, "base", "cand", "latency", bins=5)
    assert lat.base_count.sum() == 6 and lat.candidate_count.sum() == 6 and len(lat) <= 5
    test = rl.shift_test(con, "base", "cand", "tool_calls").iloc[0]
    assert test.ks_statistic == 1.0  # the samples do not overlap: max ECDF gap 1
    assert (test.base_mean, test.candidate_mean) == (pytest.approx((5 * 3 + 18) / 6), 1.0)
    with pytest.raises(ValueError, match="use one of tool_calls, turns, latency"):
        rl.distribution_shift(con, "base", "cand", "tokens")


def test_by_step_orders_runs(load, con):
    records = [rollout("step20", "a", 1.0, step=20), rollout("base", "a", 0.0), rollout("step5", "a", 0.5, step=5)]
    load(records)
    df = rl.by_step(con)
    assert df[["run", "split", "step", "step_known", "mean_score"]].values.tolist() == [
        ["base", "(no split)", 0, False, 0.0], ["step5", "(no split)", 5, True, 0.5],
        ["step20", "(no split)", 20, True, 1.0]]


def test_by_step_keeps_train_and_valid_apart(load, con):
    load([rollout("base", "v1", 0.0, split="valid"), rollout("step10", "v1", 1.0, step=10, split="valid"),
          rollout("train-step0", "t1", 0.25, step=0, split="train"),
          rollout("train-step10", "t1", 0.75, step=10, split="train")])
    df = rl.by_step(con)
    assert df[["split", "step", "run", "step_known", "mean_score"]].values.tolist() == [
        ["train", 0, "train-step0", True, 0.25], ["train", 10, "train-step10", True, 0.75],
        ["valid", 0, "base", False, 0.0], ["valid", 10, "step10", True, 1.0]]
    assert not df.duplicated(["split", "step"]).any()


def test_real_tau2_sft_win_tie_loss(real_dir, load, con):
    """gpt-4.1 vs its SFT checkpoint on airline + retail + telecom (default), rewards taken straight
    from the raw simulations; samples are domain:task_id."""
    folder = real_dir / "tau2-sft"
    ft = "ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm"
    files = {"base": ["gpt-4.1_airline_default_gpt-4.1_1trials.json", "gpt-4.1_retail_defautl_gpt-4.1_1trials.json",
                      "gpt-4.1_telecom_default_gpt-4.1_1trials.json"],
             "ft": [f"{ft}_{d}_default_gpt-4.1_1trials.json" for d in ("airline", "retail", "telecom")]}
    rewards = defaultdict(dict)
    records = []
    for run, names in files.items():
        for name in names:
            data = json.loads((folder / name).read_text())
            domain = data["info"]["environment_info"]["domain_name"]
            for sim in data["simulations"]:
                sid = f"{domain}:{sim['task_id']}"
                reward = sim["reward_info"]["reward"]
                rewards[run][sid] = reward
                records.append({"run": run, "sample_id": sid, "attempt": sim["trial"], "score": reward})
    load(records)
    shared = sorted(set(rewards["base"]) & set(rewards["ft"]))
    d = [rewards["ft"][s] - rewards["base"][s] for s in shared]
    df = rl.compare(con, "base", "ft", n_boot=500)
    assert df.attrs["shared_samples"] == len(shared) == 100
    assert (df.attrs["wins"], df.attrs["ties"], df.attrs["losses"]) == \
        (sum(x > 0 for x in d), sum(x == 0 for x in d), sum(x < 0 for x in d))
    assert df.set_index("metric").loc["score", "diff"] == pytest.approx(np.mean(d))


def test_per_grader_rows_pair_samples(load, con):
    """The candidate gains on the judge and loses on the tests; the blended score does not move."""
    def graded(run, sample, answer, judge):
        return rollout(run, sample, None, ["search"], grades=[{"grader": "answer", "score": answer, "weight": 0.5},
                                                             {"grader": "judge", "score": judge, "weight": 0.5}])
    load([graded("b", "s1", 1.0, 0.0), graded("b", "s2", 1.0, 0.5),
          graded("c", "s1", 0.0, 1.0), graded("c", "s2", 0.5, 1.0), graded("c", "s3", 1.0, 1.0)])
    df = rl.compare(con, "b", "c", n_boot=500).set_index("metric")
    assert df.loc["score", "diff"] == pytest.approx(0.0)
    a, j = df.loc["grader:answer"], df.loc["grader:judge"]
    assert (a.base, a.candidate, a["diff"], a.n_samples) == (1.0, 0.25, -0.75, 2)  # s3 is not in the base
    assert (j.base, j.candidate, j["diff"]) == (0.25, 1.0, 0.75)
    # per-sample differences -1 and -0.5: every resample's mean lies between them
    assert -1.0 <= a.ci_low <= a.ci_high <= -0.5 and a.significant
    assert a.se == pytest.approx(np.std([-1.0, -0.5], ddof=1) / np.sqrt(2))
    assert df.index[-2:].tolist() == ["grader:answer", "grader:judge"]

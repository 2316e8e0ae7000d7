"""compare, sample_deltas, distribution_shift, shift_test, by_step: statistics with known answers."""
from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
import pytest

import rolloutlab as rl
from rolloutlab.demo import synth
from rolloutlab.analysis.compare import per_sample_table

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
        assert not row.significant
    assert df.loc["score", "p_value"] == 1.0 and df.loc["pass@1", "p_value"] == 1.0
    # best of n is 1 and 3 tool calls every time, in both runs: shown, not tested
    for metric in ("best_of_n", "tool_calls_per_rollout"):
        assert df.loc[metric, "family"] == "constant" and np.isnan(df.loc[metric, "p_value"])
    assert df.attrs["constant"] == ["best_of_n", "signal_share", "tool_calls_per_rollout", "long_tail_share",
                                    "turns_per_rollout", "parallel_width", "infra_error_rate"]
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


def test_score_p_and_ci_are_the_paired_t_test(load, con):
    """The score's p-value and CI: the one-sample t-test of the per-sample differences (scipy's, an
    independent path), one test for both."""
    from scipy import stats as sps

    base = {"a": [0.0], "b": [0.5], "c": [1.0], "d": [0.0], "e": [0.25]}
    cand = {"a": [1.0], "b": [0.5], "c": [0.5], "d": [1.0], "e": [1.0]}
    load(two_runs(base, cand))
    d = [cand[s][0] - base[s][0] for s in base]
    ref = sps.ttest_1samp(d, 0.0)
    row = rl.compare(con, "base", "cand", n_boot=200).set_index("metric").loc["score"]
    assert row.p_value == pytest.approx(ref.pvalue) and row.method == "clustered t"
    ci = ref.confidence_interval(0.95)
    assert (row.ci_low, row.ci_high) == pytest.approx((ci.low, ci.high))
    # d = 1, 0, -0.5, 1, 0.75: mean 0.45, squared deviations summing to 1.8, se = sqrt(1.8 / 4 / 5) = 0.3,
    # t = 1.5 on 4 degrees of freedom
    assert row.se == pytest.approx(0.3) and row.p_value == pytest.approx(0.2080, abs=1e-4) and not row.significant


def test_samples_in_one_run_are_counted_not_dropped(load, con):
    base = {"a": [1.0], "b": [0.0], "only-base": [1.0]}
    cand = {"a": [1.0], "b": [1.0], "only-cand-1": [0.0], "only-cand-2": [0.0]}
    load(two_runs(base, cand))
    df = rl.compare(con, "base", "cand", n_boot=100)
    assert (df.attrs["shared_samples"], df.attrs["base_only"], df.attrs["candidate_only"]) == (2, 1, 2)
    assert (df.n_samples == 2).all()
    # one attempt per sample: no sample can show signal, so signal_share is not tested
    assert df.set_index("metric").loc["signal_share", "family"] == "untested"
    assert df.set_index("metric").loc["score", "diff"] == pytest.approx(0.5)


def test_infra_errors_are_excluded_but_their_rate_is_compared(load, con):
    records = two_runs({f"s{i}": [1.0, 1.0] for i in range(10)}, {f"s{i}": [1.0, 1.0] for i in range(10)})
    records.append(rollout("cand", "s0", None, ["search"], status="infra_error", step=10))  # the candidate's step
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


def priced_runs():
    """Per (run, sample): (score, logged cost or None, stop reason) of each attempt; hand-computed:

    base, counted: costs 0.1 + 0.2 + 0.3 + 0.4 + 0.1 + 0.2 + 0.3 = 1.6 over 7 rollouts with a cost;
    passes with a cost 3 (s1's second pass has no cost; the infra error is not counted):
    cost_per_solved 1.6 / 3; cut at a limit 3 of 8 (max_tokens, context_length_exceeded, max_turns).
    cand: 0.05 + 0.05 + 0.05 + 0.15 + 0.10 + 0.10 + 0.05 + 0.05 = 0.6 over 6 passes = 0.1; cut 1 of 8."""
    ok = "final_answer"
    return {
        "base": {"s0": [(1.0, 0.10, ok), (0.0, 0.20, "max_tokens")], "s1": [(1.0, 0.30, ok), (1.0, None, ok)],
                 "s2": [(0.0, 0.40, "context_length_exceeded"), (0.0, 0.10, ok)],
                 "s3": [(1.0, 0.20, ok), (0.0, 0.30, "max_turns")]},
        "cand": {"s0": [(1.0, 0.05, ok), (1.0, 0.05, ok)], "s1": [(1.0, 0.05, ok), (0.0, 0.15, "model_length")],
                 "s2": [(1.0, 0.10, ok), (0.0, 0.10, ok)], "s3": [(1.0, 0.05, ok), (1.0, 0.05, ok)]}}


def load_priced(load):
    records = []
    for run, table in priced_runs().items():
        for sid, attempts in table.items():
            for score, cost, stop in attempts:
                extra = {} if cost is None else {"cost_usd": cost}
                records.append(rollout(run, sid, score, ["search"], stop_reason=stop,
                                       step=10 if run == "cand" else None,
                                       status="ok" if stop == "final_answer" else "truncated", **extra))
    records.append(rollout("base", "s3", 0.0, status="infra_error", stop_reason="error", cost_usd=5.0))
    return load(records)


def test_cost_per_solved_and_truncated_share(load, con):
    load_priced(load)
    df = rl.compare(con, "base", "cand", n_boot=500).set_index("metric")
    solved, cut, per_rollout = df.loc["cost_per_solved"], df.loc["truncated_share"], df.loc["cost_per_rollout"]
    assert (solved.base, solved.candidate) == (pytest.approx(1.6 / 3), pytest.approx(0.6 / 6))
    assert solved["diff"] == pytest.approx(0.1 - 1.6 / 3) and solved.unit == "USD"
    assert solved.ci_low <= solved["diff"] <= solved.ci_high and not math.isnan(solved.p_value)
    assert (per_rollout.base, per_rollout.candidate) == (pytest.approx(1.6 / 7), pytest.approx(0.6 / 8))
    assert (cut.base, cut.candidate, cut["diff"]) == (3 / 8, 1 / 8, pytest.approx(-0.25)) and cut.unit == "share"
    assert cut.ci_low <= cut["diff"] <= cut.ci_high
    # the same numbers as the cost and truncation tables (every cost here is in the logs)
    costs = rl.cost(con, ["base", "cand"]).set_index("run")
    assert costs.cost_per_solved.tolist() == pytest.approx(df.loc["cost_per_solved", ["base", "candidate"]].tolist())
    assert rl.truncation(con, ["base", "cand"]).truncated_share.tolist() == [3 / 8, 1 / 8]
    ps = per_sample_table(con, "base", "cand").set_index("sample_id")
    assert ps.b_passes_costed.tolist() == [1, 1, 0, 1] and ps.b_truncated.tolist() == [1, 0, 1, 1]
    assert ps.c_passes_costed.tolist() == [2, 1, 1, 2] and ps.c_truncated.tolist() == [0, 1, 0, 0]


def test_cost_per_solved_without_passes_or_costs_is_nan(load, con):
    load([rollout("base", f"s{i}", 0.0, cost_usd=0.1, stop_reason="final_answer") for i in range(3)]
         + [rollout("cand", f"s{i}", 1.0) for i in range(3)])  # cand: no cost and no stop reason in its logs
    df = rl.compare(con, "base", "cand", n_boot=200).set_index("metric")
    assert math.isnan(df.loc["cost_per_solved", "base"]) and math.isnan(df.loc["cost_per_solved", "candidate"])
    assert df.loc["truncated_share", "base"] == 0.0 and math.isnan(df.loc["truncated_share", "candidate"])


def test_by_step_truncated_share(load, con):
    load_priced(load)
    load([rollout("nostop", "s0", 1.0, step=20)])  # no stop reason logged: cannot tell, NaN
    df = rl.by_step(con).set_index("run")
    assert df.loc["base", "truncated_share"] == 3 / 8 and df.loc["cand", "truncated_share"] == 1 / 8
    assert math.isnan(df.loc["nostop", "truncated_share"])
    assert rl.by_step(con, include_errors=True).set_index("run").loc["base", "truncated_share"] == 3 / 9


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
    # two samples: t = -0.75 / 0.25 = -3 on 1 degree of freedom, p = 0.205; the interval is
    # -0.75 ± 12.71 x 0.25, where a percentile bootstrap would claim [-1, -0.5]
    from scipy import stats as sps

    assert a.p_value == pytest.approx(2 * sps.t.sf(3, 1)) and a.p_holm >= a.p_value and not a.significant
    assert (a.ci_low, a.ci_high) == pytest.approx((-0.75 - sps.t.ppf(0.975, 1) * 0.25, -0.75 + sps.t.ppf(0.975, 1) * 0.25))
    assert a.se == pytest.approx(np.std([-1.0, -0.5], ddof=1) / np.sqrt(2))
    assert df.index[-2:].tolist() == ["grader:answer", "grader:judge"]


# --- multiplicity: p_holm, q_bh, and what marks a change significant ------------------------

def test_primary_alone_secondary_family_adjusted(load, con):
    """The score is tested alone (its p_holm and q_bh are its own p); the secondary rows are one
    family, Holm / BH over exactly their p-values; significant follows each rule."""
    from test_stats import bh_by_definition, holm_by_definition

    base = {f"s{i}": [0.0, 0.0, 1.0 if i % 3 == 0 else 0.0] for i in range(40)}
    cand = {f"s{i}": [1.0, 1.0, 0.0 if i % 10 == 0 else 1.0] for i in range(40)}
    load(two_runs(base, cand))
    df = rl.compare(con, "base", "cand", n_boot=500)
    rows = df.set_index("metric")
    score = rows.loc["score"]
    assert score.family == "primary" and score.p_holm == score.q_bh == score.p_value
    # the score's own p (the paired t-test of 40 differences), not multiplied by the family's size
    from scipy import stats as sps

    d = [np.mean(cand[s]) - np.mean(base[s]) for s in base]
    assert score.p_value == pytest.approx(sps.ttest_1samp(d, 0.0).pvalue) and score.significant
    # pass@1 of 0/1 scores at threshold 1 is the score, sample by sample: the same test, not tested twice
    assert rows.loc["pass@1", "family"] == "duplicate" and df.attrs["duplicates"] == ["pass@1"]
    assert rows.loc["pass@1", "p_value"] == score.p_value and rows.loc["pass@1", "significant"]
    sec = df[df.family == "secondary"]
    assert df.attrs["tests"] == len(sec) and set(sec.metric) >= {"best_of_n", "tool_calls_per_rollout", "latency_p50"}
    p = sec.p_value.tolist()
    assert np.allclose(sec.p_holm, holm_by_definition(p)) and np.allclose(sec.q_bh, bh_by_definition(p))
    assert sec.significant.tolist() == (sec.p_holm <= 0.05).tolist()
    # no infra error in either run: constant, shown without a p-value and outside the family
    assert rows.loc["infra_error_rate", "family"] == "constant" and np.isnan(rows.loc["infra_error_rate", "p_holm"])
    assert df.attrs["adjustment"] == "holm" and df.attrs["significant_from"] == "p_holm"
    assert df.attrs["alpha"] == 0.05 and df.attrs["primary"] == "score"
    lat = rows.loc["latency_p50"]  # latency percentiles get a bootstrap p-value and join the family
    assert lat.p_value == pytest.approx(2 / 501) and lat.significant and lat.method == "percentile bootstrap"
    bh = rl.compare(con, "base", "cand", n_boot=500, adjust="bh")
    sec = bh[bh.family == "secondary"]
    assert sec.significant.tolist() == (sec.q_bh <= 0.05).tolist() and bh.attrs["adjustment"] == "bh"
    with pytest.raises(ValueError, match="use one of holm, bh, none"):
        rl.compare(con, "base", "cand", adjust="bonferroni")


def test_another_primary_and_the_score_becomes_secondary(load, con):
    base = {f"s{i}": [0.0, 0.5, 1.0 if i % 3 == 0 else 0.0] for i in range(30)}
    cand = {f"s{i}": [1.0, 0.5, 0.0 if i % 10 == 0 else 1.0] for i in range(30)}
    load(two_runs(base, cand))
    df = rl.compare(con, "base", "cand", n_boot=300, primary="tool_calls_per_rollout").set_index("metric")
    assert df.loc["tool_calls_per_rollout", "family"] == "primary"
    assert df.loc["score", "family"] == "secondary" and df.loc["score", "p_holm"] >= df.loc["score", "p_value"]
    assert df.attrs["primary"] == "tool_calls_per_rollout" and df.attrs["primary_method"] == "clustered t"
    with pytest.raises(ValueError, match="primary='accuracy' is not a metric of this comparison; use one of score"):
        rl.compare(con, "base", "cand", n_boot=100, primary="accuracy")


def test_a_grader_that_is_the_score_is_a_duplicate(load, con):
    """A grader whose per-sample scores are the rollout's score is the same test as the primary."""
    def graded(run, sample, s, judge):
        return rollout(run, sample, None, ["search"], grades=[{"grader": "reward", "score": s, "weight": 1.0},
                                                             {"grader": "judge", "score": judge, "weight": 0.0}])
    rng = np.random.default_rng(3)
    records = [graded(run, f"s{i}", float(rng.random() < q), float(rng.random() < 0.5))
               for i in range(25) for run, q in (("b", 0.4), ("c", 0.6)) for _ in range(2)]
    load(records)
    df = rl.compare(con, "b", "c", n_boot=300).set_index("metric")
    assert df.loc["grader:reward", "family"] == "duplicate" and df.loc["grader:judge", "family"] == "secondary"
    assert df.loc["grader:reward", "p_value"] == df.loc["score", "p_value"]
    assert df.loc["grader:reward", "significant"] == df.loc["score", "significant"]


def test_the_verdict_and_the_interval_never_disagree(load, con):
    """The primary's CI inverts the test behind its p-value: it excludes 0 exactly when p <= alpha,
    across seeds and effects near the edge (the old percentile CI disagreed on ~1.5% of nulls)."""
    rng = np.random.default_rng(12)
    for trial in range(6):
        effect = [0.0, 0.1, 0.15, 0.2, 0.25, 0.3][trial]
        base = {f"s{i}": [float(rng.random() < 0.5) for _ in range(2)] for i in range(30)}
        cand = {f"s{i}": [float(rng.random() < 0.5 + effect) for _ in range(2)] for i in range(30)}
        load(two_runs(base, cand), )
        df = rl.compare(con, "base", "cand", n_boot=500, seed=trial).set_index("metric")
        row = df.loc["score"]
        assert row.significant == (row.p_value <= 0.05) == (row.ci_low > 0 or row.ci_high < 0)
        con.execute("DELETE FROM rollouts; DELETE FROM runs; DELETE FROM sources")


def test_null_pairs_rarely_show_an_adjusted_change():
    """The issue's simulation: 200 pairs of runs drawn from one checkpoint (100 samples x 3 attempts,
    13 run metrics, 2 latency percentiles, 2 graders: 16 secondary tests beside the primary).
    Unadjusted, about half of the pairs show some "significant" secondary change; after Holm (and
    BH: under a complete null the FDR is the FWER) at most 5% do, up to simulation error (2 standard
    errors of a share of 200)."""
    from rolloutlab.analysis.compare import paired_table

    rng = np.random.default_rng(2024)
    n, k, pairs = 100, 3, 200
    any_raw = any_holm = any_bh = 0
    for i in range(pairs):
        p, rate = rng.beta(1.2, 1.2, n), rng.gamma(3, 1.5, n)  # the checkpoint, as the samples see it
        nb, db, sb = synth.compare_arrays(rng, p, rate, k)
        nc, dc, sc = synth.compare_arrays(rng, p, rate, k)
        # 700 resamples: the latency p-values (bootstrap, floor 2 / 701) can pass Holm's first step, 0.05 / 17
        df = paired_table(nb, db, nc, dc, sb, sc, ["answer", "judge"], n_boot=700, seed=i)
        # the 17 rows with a p-value but the primary (tested alone) and any constant in both runs
        assert df.attrs["tests"] == (df.family == "secondary").sum() >= 14
        sec = df.family == "secondary"
        any_raw += bool((df.p_value[sec] <= 0.05).any())
        any_holm += bool(df.significant[sec].any())
        any_bh += bool((df.q_bh[sec] <= 0.05).any())
    limit = 0.05 + 2 * np.sqrt(0.05 * 0.95 / pairs)
    assert any_holm / pairs <= limit and any_bh / pairs <= limit
    print(f"null pairs: any raw {any_raw / pairs:.3f}, any Holm {any_holm / pairs:.3f}, any BH {any_bh / pairs:.3f}")
    assert any_raw / pairs >= 0.3  # far above 5%


def test_an_interval_holds_its_estimate_when_unsolved_samples_cost(load, con):
    """cost_per_solved = all cost / passes: a sample no run solves adds cost and no pass. Its test
    must see that sample too, or the interval sits beside the estimate (the platforms notebook's
    forest plot failed on it)."""
    records = []
    for run, cost, solved in (("base", 0.2, {"s0"}), ("cand", 0.1, {"s0", "s1"})):
        for i in range(4):
            for a in range(2):
                records.append(rollout(run, f"s{i}", 1.0 if f"s{i}" in solved else 0.0, cost_usd=cost * (1 + i + a),
                                       attempt=a))
    load(records)
    row = rl.compare(con, "base", "cand", n_boot=200).set_index("metric").loc["cost_per_solved"]
    # base: costs 0.2 × (1+2+2+3+3+4+4+5) = 4.8 over 2 passes; cand: 0.1 × 24 = 2.4 over 4 passes
    assert (row.base, row.candidate) == (pytest.approx(2.4), pytest.approx(0.6))
    assert row.n_samples == 4 and row.ci_low <= row["diff"] <= row.ci_high



def test_compare_without_leaves_out_or_fails_the_given_rollouts(load, con):
    from rolloutlab.analysis.compare import compare_without

    base = {"s0": [0, 0], "s1": [1, 0], "s2": [0, 0], "s3": [1, 1]}
    cand = {"s0": [1, 0], "s1": [1, 1], "s2": [1, 1], "s3": [1, 1]}
    records = [rollout(run, s, float(v), rollout_id=f"{run}-{s}-{a}", attempt=a)
               for run, table in (("base", base), ("cand", cand)) for s, scores in table.items()
               for a, v in enumerate(scores)]
    load(records)
    suspects = ["cand-s0-0", "cand-s2-0", "cand-s2-1", "not-a-rollout"]
    df = compare_without(con, "base", "cand", suspects).set_index("treated_as")
    left, failed = df.loc["left out"], df.loc["counted as failures"]
    # left out: s2 has no rollout left and drops out; s0 keeps its 0 -> base 0, .5, 1; cand 0, 1, 1
    assert (left.base, left.candidate, left["diff"], left.n_samples) == (
        pytest.approx(0.5), pytest.approx(2 / 3), pytest.approx(1 / 6), 3)
    # as failures: cand's s0 -> 0, 0 and s2 -> 0, 0: cand 0, 1, 0, 1 against base 0, .5, 0, 1
    assert (failed.base, failed.candidate, failed["diff"], failed.n_samples) == (
        pytest.approx(0.375), pytest.approx(0.5), pytest.approx(0.125), 4)
    d = np.array([0, 0.5, 0, 0])  # the paired t of the per-sample differences
    from scipy.stats import t

    half = t.ppf(0.975, 3) * d.std(ddof=1) / 2
    assert (failed.ci_low, failed.ci_high) == (pytest.approx(0.125 - half), pytest.approx(0.125 + half))
    assert set(df.rollouts) == {3}
    # nothing given: compare's own primary row
    row = rl.compare(con, "base", "cand", n_boot=100).set_index("metric").loc["score"]
    none = compare_without(con, "base", "cand", []).iloc[0]
    assert (none["diff"], none.ci_low, none.p_value) == pytest.approx((row["diff"], row.ci_low, row.p_value))

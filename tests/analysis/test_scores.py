"""summary, sample_stats, signal_plan: values computed by hand or in plain Python."""
from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

import rolloutlab as rl
from conftest import rollout

# sample a: 1, 0, 1 (+ an infra error); b: 0, 0 (+ an ungraded); c: 0.5; d: 1, 1, 1, 1 (one with 16 calls)
RECORDS = [
    rollout("r", "a", 1.0, ["search", "search", "cat"], turns=[0, 0, 1], latency=10),
    rollout("r", "a", 0.0, ["search"], latency=20),
    rollout("r", "a", 1.0, ["search", "cat"], latency=30),
    rollout("r", "a", None, ["search"], status="infra_error", latency=99),
    rollout("r", "b", 0.0, ["list", "cat"], turns=[0, 0], latency=5),
    rollout("r", "b", 0.0, [], latency=6),
    rollout("r", "b", None, ["list"], status="ungraded", latency=50),
    rollout("r", "c", 0.5, ["cat", "list", "cat"], latency=7),
    rollout("r", "d", 1.0, ["search"], latency=8),
    rollout("r", "d", 1.0, ["search"], latency=9),
    rollout("r", "d", 1.0, ["search"], latency=11),
    rollout("r", "d", 1.0, ["search"] * 16, latency=12),
]
COUNTED = [r for r in RECORDS if r["status"] not in ("infra_error", "ungraded")]


@pytest.fixture
def con_r(load):
    return load(RECORDS)


def test_score_and_signal_by_hand(con_r):
    s = rl.summary(con_r).iloc[0]
    assert (s.run, s.rollouts, s.rollouts_used, s.samples, s.n_excluded) == ("r", 12, 10, 4, 2)
    assert (s.n_ok, s.n_infra_error, s.n_ungraded) == (10, 1, 1)
    assert (s.attempts_min, s.attempts_median, s.attempts_max) == (1, 2.5, 4)
    assert s.mean_score == pytest.approx(6.5 / 10)
    assert s.mean_of_sample_means == pytest.approx((2 / 3 + 0 + 0.5 + 1) / 4)
    assert s.best_of_n == pytest.approx((1 + 0 + 0.5 + 1) / 4)
    assert (s.samples_multi, s.samples_with_signal) == (3, 1)
    assert s.signal_share == pytest.approx(1 / 3)


def test_pass_at_k_and_pass_hat_k_by_hand(con_r):
    s = rl.summary(con_r, ks=(1, 2, 4, 8)).iloc[0]
    assert s.pass_at_1 == pytest.approx((2 / 3 + 0 + 0 + 1) / 4)
    assert s.pass_hat_1 == pytest.approx((2 / 3 + 0 + 0 + 1) / 4)
    # k=2: sample c (1 attempt) is excluded. a: 1 - C(1,2)/C(3,2) = 1; b: 0; d: 1
    assert (s.pass_at_2, s.pass_k_samples_2) == (pytest.approx(2 / 3), 3)
    # pass^2: a: C(2,2)/C(3,2) = 1/3; b: 0; d: 1
    assert s.pass_hat_2 == pytest.approx((1 / 3 + 0 + 1) / 3)
    assert (s.pass_at_4, s.pass_hat_4, s.pass_k_samples_4) == (1.0, 1.0, 1)
    assert math.isnan(s.pass_at_8) and s.pass_k_samples_8 == 0


def test_pass_threshold_and_include_errors(con_r):
    s = rl.summary(con_r, pass_threshold=0.5).iloc[0]
    assert s.pass_at_1 == pytest.approx((2 / 3 + 0 + 1 + 1) / 4)  # c's 0.5 now passes
    e = rl.summary(con_r, include_errors=True).iloc[0]
    assert (e.rollouts_used, e.n_excluded) == (12, 0)
    assert e.mean_score == pytest.approx(6.5 / 12)
    assert e.pass_at_1 == pytest.approx((2 / 4 + 0 + 0 + 1) / 4)


def test_tool_use_and_latency_columns_independently(con_r):
    s = rl.summary(con_r).iloc[0]
    calls = [len(r["tool_calls"]) for r in COUNTED]
    assert s.tool_calls_mean == pytest.approx(statistics.mean(calls))
    assert s.tool_calls_p50 == pytest.approx(np.percentile(calls, 50))
    assert s.tool_calls_p95 == pytest.approx(np.percentile(calls, 95))
    assert s.tool_calls_max == 16
    assert s.long_tail_share == pytest.approx(1 / 10)
    turns = [len({c["turn"] for c in r["tool_calls"]}) for r in COUNTED]
    assert s.turns_mean == pytest.approx(statistics.mean(turns))
    assert s.parallel_width_mean == pytest.approx(sum(calls) / sum(turns))
    pairs = [(a["tool"], b["tool"]) for r in COUNTED for a, b in zip(r["tool_calls"], r["tool_calls"][1:])]
    assert s.repeat_rate == pytest.approx(sum(a == b for a, b in pairs) / len(pairs))
    lat = [r["latency_s"] for r in COUNTED]
    for p in (50, 95, 99):
        assert s[f"latency_p{p}"] == pytest.approx(np.percentile(lat, p))


def test_runs_selection(load, con):
    load(RECORDS + [rollout("q", "a", 1.0)])
    assert rl.summary(con).run.tolist() == ["q", "r"]
    assert rl.summary(con, ["r", "q"]).run.tolist() == ["r", "q"]
    with pytest.raises(rl.UnknownRunError, match="run 'x' not found; loaded runs: q, r"):
        rl.summary(con, "x")


def test_sample_stats(con_r):
    df = rl.sample_stats(con_r, "r").set_index("sample_id")
    assert df.loc["a", ["attempts", "successes"]].tolist() == [3, 2]
    assert df.loc["a", "mean"] == pytest.approx(2 / 3)
    assert df.loc["a", "std"] == pytest.approx(np.std([1, 0, 1]))  # population std
    assert df.has_signal.to_dict() == {"a": True, "b": False, "c": False, "d": False}
    assert df.loc["c", "success_rate"] == 0 and df.loc["d", "success_rate"] == 1
    assert list(df.index) == ["b", "c", "a", "d"]  # sorted by mean


def _expected_signal(samples: list[tuple[int, int]], k: int) -> tuple[float, float, float]:
    """Independent path: method-of-moments Beta prior (the variance of the true rates: the observed
    variance less the binomial noise p(1-p)/(n-1) of each sample), posterior expectations via lgamma."""
    rates = [c / n for n, c in samples]
    m = statistics.mean(rates)
    v = statistics.pvariance(rates) - statistics.mean(r * (1 - r) / (n - 1) if n > 1 else 0 for r, (n, _) in
                                                      zip(rates, samples))
    strength = max(m * (1 - m) / v - 1, 0.0) if v > 0 else 50.0
    a = min(max(m * strength, 0.05), 50.0)
    b = min(max((1 - m) * strength, 0.05), 50.0)

    def e_pow(x, y):  # E[p^k] for p ~ Beta(x, y)
        return math.exp(math.lgamma(x + k) - math.lgamma(x) + math.lgamma(x + y) - math.lgamma(x + y + k))

    vals = [1 - e_pow(a + c, b + n - c) - e_pow(b + n - c, a + c) for n, c in samples]
    return statistics.mean(vals), a, b


def test_signal_plan_matches_an_independent_computation(con_r):
    plan = rl.signal_plan(con_r, "r", ks=(1, 2, 4, 16), target=0.3)
    samples = [(3, 2), (2, 0), (1, 0), (4, 4)]  # (n, c) of a, b, c, d
    for k, got in zip(plan.k, plan.expected_signal_share):
        want, a, b = _expected_signal(samples, k)
        assert got == pytest.approx(want, abs=1e-9)
    assert plan.prior_a.iloc[0] == pytest.approx(a) and plan.prior_b.iloc[0] == pytest.approx(b)
    assert plan.expected_signal_share.iloc[0] == pytest.approx(0, abs=1e-12)  # one attempt never varies
    assert plan.expected_signal_share.is_monotonic_increasing
    rec = plan[plan.recommended]
    assert len(rec) <= 1
    if len(rec):
        assert rec.k.iloc[0] == plan[plan.reaches_target].k.min()


def test_signal_plan_starts_from_what_the_run_shows(con_r):
    """The plan's own definition (a pass and a fail among the attempts), seen at the run's median
    attempts, beside its forecast there; and the score-variation share summary calls signal_share."""
    plan = rl.signal_plan(con_r, "r", ks=(2, 8))
    samples = [(3, 2), (2, 0), (1, 0), (4, 4)]  # (n, c) of a, b, c, d
    multi = [(n, c) for n, c in samples if n >= 2]
    assert plan.attrs["observed_k"] == 3 and 3 in plan.k.tolist()  # median of 3, 2, 4
    assert plan.attrs["observed_signal_share"] == pytest.approx(sum(0 < c < n for n, c in multi) / len(multi))
    seen = plan.set_index("k").observed_signal_share
    assert seen[3] == pytest.approx(1 / 3) and seen[[2, 8]].isna().all()
    assert plan.attrs["observed_score_varies"] == rl.summary(con_r, "r").signal_share.iloc[0]
    assert "both a pass and a fail" in plan.attrs["definition"]


def test_on_the_demo_the_plan_meets_what_was_seen(tmp_path):
    from rolloutlab.demo import synth

    con = rl.connect(tmp_path / "demo.duckdb")
    rl.ingest(con, synth.write_native(tmp_path / "native", samples=200, attempts=3, checkpoints="base", seed=1))
    plan = rl.signal_plan(con, "base").set_index("k")
    k = plan.attrs["observed_k"]
    assert k == 3 and abs(plan.expected_signal_share[k] - plan.attrs["observed_signal_share"]) < 0.03
    # partial credit: more samples vary in score than hold both a pass and a fail; both are named
    assert plan.attrs["observed_score_varies"] > plan.attrs["observed_signal_share"]
    advice = rl.check(con, "base").set_index("check").loc["signal_share", "advice"]
    assert f"have both a pass and a fail at the median {k} attempts" in advice


def test_signal_plan_falls_back_to_jeffreys_when_rates_do_not_vary(load, con):
    load([rollout("z", s, 1.0) for s in "abc" for _ in range(2)])
    plan = rl.signal_plan(con, "z", ks=(2,))
    assert (plan.prior_a.iloc[0], plan.prior_b.iloc[0]) == (0.5, 0.5)
    # n=2, c=2 under Beta(2.5, 0.5): 1 - E[p^2] - E[(1-p)^2]
    e_p2 = (2.5 * 3.5) / (3 * 4)
    e_q2 = (0.5 * 1.5) / (3 * 4)
    assert plan.expected_signal_share.iloc[0] == pytest.approx(1 - e_p2 - e_q2)


def test_empty_run_list(con):
    assert rl.summary(con).empty


def test_real_tau_bench_pass_k_matches_the_formulas(real_dir, load, con):
    """gpt-4o on tau-bench airline: 50 tasks x 4 trials. Rewards are taken straight from the raw file
    (converted here to native records) and pass@k / pass^k computed by hand with math.comb."""
    import json
    from collections import defaultdict

    raw = json.loads((real_dir / "tau-bench" / "gpt-4o-airline.json").read_text())
    load([{"run": "gpt-4o", "sample_id": str(t["task_id"]), "attempt": t["trial"], "score": t["reward"]}
          for t in raw])
    by_task = defaultdict(list)
    for t in raw:
        by_task[t["task_id"]].append(t["reward"])
    assert len(by_task) == 50 and {len(v) for v in by_task.values()} == {4}
    s = rl.summary(con, "gpt-4o", ks=(1, 2, 3, 4)).iloc[0]
    assert (s.samples, s.rollouts_used) == (50, 200)
    assert s.mean_score == pytest.approx(0.42)
    for k in (1, 2, 3, 4):
        pass_at = statistics.mean(1 - math.comb(4 - sum(r >= 1 for r in v), k) / math.comb(4, k)
                                  for v in by_task.values())
        pass_hat = statistics.mean(math.comb(sum(r >= 1 for r in v), k) / math.comb(4, k) for v in by_task.values())
        assert s[f"pass_at_{k}"] == pytest.approx(pass_at, abs=1e-12)
        assert s[f"pass_hat_{k}"] == pytest.approx(pass_hat, abs=1e-12)
    assert s.pass_hat_4 < s.pass_hat_1 < s.pass_at_4  # consistency is harder than one success


def test_rewards_in_minus_one_to_one_by_hand(load, con):
    """Issue 36: a run whose rewards span [-1, 1] (Gemini clips to it): signal, pass@k and the
    means with a broken rollout counted at -1, never at 0."""
    meta = {"run_meta": {"reward_range": [-1, 1]}}
    scores = {"s1": [1, -1, -1], "s2": [-1, -1, -1, None], "s3": [1, 1, 1], "s4": [0.5, -1, 1]}
    load([rollout("g", s, v, status="model_error" if v is None else "ok", **meta)
          for s, vs in scores.items() for v in vs])
    row = rl.summary(con, "g", ks=(1, 2)).iloc[0]
    counted = {s: [-1.0 if v is None else v for v in vs] for s, vs in scores.items()}
    flat = [v for vs in counted.values() for v in vs]
    assert row.mean_score == pytest.approx(sum(flat) / len(flat))
    assert row.best_of_n == pytest.approx((1 - 1 + 1 + 1) / 4)
    assert (row.samples_with_signal, row.samples_multi, row.signal_share) == (2, 4, 0.5)  # s1 and s4 vary
    # passing at 1.0: c = 1, 0, 3, 1 of n = 3, 4, 3, 3
    assert row.pass_at_1 == pytest.approx((1 / 3 + 0 + 1 + 1 / 3) / 4)
    assert row.pass_at_2 == pytest.approx(((1 - 1 / 3) + 0 + 1 + (1 - 1 / 3)) / 4)
    assert (row.reward_floor, row.score_min, row.score_max) == (-1.0, -1.0, 1.0)
    stats = rl.sample_stats(con, "g").set_index("sample_id")
    assert stats.loc["s2", "mean"] == -1.0 and not stats.loc["s2", "has_signal"]  # the broken attempt is no signal
    assert stats.reward_floor.tolist() == [-1.0] * 4

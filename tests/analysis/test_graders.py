"""Per-grader statistics and grader pairs on a hand-made run (numbers by hand or by numpy)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import rolloutlab as rl
from conftest import rollout


def graded(sample, answer, judge, rid, judge_error=None):
    judge_grade = {"grader": "judge", "score": judge, "weight": 0.5}
    if judge_error:
        judge_grade["error"] = judge_error
    return rollout("g", sample, None, ["search"], rollout_id=rid, status=None,  # status from the grades
                   grades=[{"grader": "answer", "score": answer, "weight": 0.5}, judge_grade])


@pytest.fixture
def con_g(load):
    return load([graded("s1", 1.0, 1.0, "r1"), graded("s1", 0.0, 1.0, "r2"),
                 graded("s2", 0.0, 0.0, "r3"), graded("s2", 0.0, 0.5, "r4"),
                 graded("s2", 0.0, None, "r5", judge_error="timeout after 30s")])  # a failed judge: infra_error


def test_grader_stats(con_g):
    df = rl.grader_stats(con_g, "g").set_index("grader")
    a, j = df.loc["answer"], df.loc["judge"]
    # r5 is an infra error (its judge failed): left out of the scores, counted in the failures
    assert a.rollouts == 4 and a.scored_share == 1.0
    assert a["mean"] == pytest.approx(0.25) and a.pass_rate == pytest.approx(0.25)
    assert a["std"] == pytest.approx(np.std([1, 0, 0, 0]))
    assert a.signal_share == 0.5 and a.samples_with_signal == 1 and a.samples_multi == 2  # s1 varies, s2 not
    assert a.n_failed == 0 and a.failed_share == 0
    assert j["mean"] == pytest.approx(0.625) and j.pass_rate == 0.5
    assert j.signal_share == 0.5  # s1 (1, 1) does not vary, s2 (0, 0.5) does
    assert j.n_failed == 1 and j.failed_share == pytest.approx(1 / 5)
    assert np.isnan(j.latency_p50)  # no grader latency logged


def test_grader_pairs(con_g):
    pairs = rl.grader_pairs(con_g, "g")
    assert len(pairs) == 1
    p = pairs.iloc[0]
    assert (p.grader_a, p.grader_b, p.rollouts) == ("answer", "judge", 4)
    assert p.correlation == pytest.approx(np.corrcoef([1, 0, 0, 0], [1, 1, 0, 0.5])[0, 1])
    # r2: the answer fails, the judge passes (full marks against zero)
    assert p.disagree_share == 0.25 and p.n_disagree == 1 and p.a_pass_b_fail == 0 and p.a_fail_b_pass == 1
    assert p.full_vs_zero == 1 and list(p.examples) == ["r2"]
    again = rl.grader_stats(con_g, "g").attrs["pairs"]
    # equal up to float summation order (DuckDB aggregates in parallel)
    pd.testing.assert_frame_equal(again.drop(columns="examples"), pairs.drop(columns="examples"), check_exact=False)
    assert [list(x) for x in again.examples] == [["r2"]]


def test_grader_pairs_without_variance_have_no_correlation(load, con):
    load([rollout("c", f"s{i}", None, grades=[{"grader": "a", "score": 1.0}, {"grader": "b", "score": float(i % 2)}])
          for i in range(4)])
    p = rl.grader_pairs(con, "c").iloc[0]
    assert np.isnan(p.correlation) and p.disagree_share == 0.5


def test_real_multi_grader_sources(real_dir, tmp_path):
    """tau2 logs one grade per reward component (DB, COMMUNICATE, ACTION, ENV_ASSERTION)."""
    con = rl.connect(tmp_path / "real.duckdb")
    rl.ingest(con, [real_dir / "tau2-sft" / "gpt-4.1_airline_default_gpt-4.1_1trials.json",
                    real_dir / "tau2-sft" / "gpt-4.1_retail_defautl_gpt-4.1_1trials.json"], run="gpt-4.1", progress=False)
    df = rl.grader_stats(con, "gpt-4.1").set_index("grader")
    # an independent path: the grades table itself
    raw = con.execute("SELECT grader, count(*), avg(score) FROM grades GROUP BY grader").fetchall()
    for grader, n, mean in raw:
        assert df.loc[grader, "rollouts"] == n and df.loc[grader, "mean"] == pytest.approx(mean)
    assert df.loc["COMMUNICATE", "std"] == 0  # always 1 in these files: the graders check warns
    checks = rl.check(con, "gpt-4.1").set_index("check")
    assert checks.loc["graders", "status"] == "warn" and "COMMUNICATE always gave 1" in checks.loc["graders", "details"]

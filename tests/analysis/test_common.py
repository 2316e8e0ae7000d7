"""metrics.common: run resolution, the counted-rollouts rule, parameter passing."""
from __future__ import annotations

import pytest

from rolloutlab.analysis.metrics import common
from conftest import rollout


def test_resolve_runs(load, con):
    load([rollout("b", "s", 1.0, step=2), rollout("a", "s", 1.0), rollout("c", "s", 1.0, step=1)])
    assert common.resolve_runs(con, None) == ["a", "c", "b"]  # step-less first, then by step
    assert common.resolve_runs(con, "b") == ["b"]
    with pytest.raises(common.UnknownRunError, match="run 'z', 'y' not found; loaded runs: a, c, b"):
        common.resolve_runs(con, ["z", "a", "y"])


def test_counted_rollouts_and_scores(load, con):
    load([rollout("r", "s", 1.0), rollout("r", "s", None, status="infra_error"),
          rollout("r", "s", None, status="model_error"), rollout("r", "s", None, status="ungraded"),
          rollout("r", "s", 0.0, status="truncated")])
    sql = f"SELECT status, s FROM ({common.included_sql()}) ORDER BY status"
    got = common.run_sql(con, sql, common.params(["r"])).fetchall()
    assert got == [("model_error", 0.0), ("ok", 1.0), ("truncated", 0.0)]
    got = common.run_sql(con, sql, common.params(["r"], include_errors=True)).fetchall()
    assert got == [("infra_error", 0.0), ("model_error", 0.0), ("ok", 1.0), ("truncated", 0.0), ("ungraded", 0.0)]


def test_run_sql_passes_only_used_parameters(con):
    assert common.run_sql(con, "SELECT $a + 1", {"a": 1, "unused": 2}).fetchone() == (2,)


# ---- a run's reward scale (issue 36: rewards in [-1, 1]) --------------------------------------

def test_a_broken_rollout_counts_as_the_runs_lowest_reward(load, con):
    # rewards in [-1, 1] (Gemini clips to it): a model_error without a score must not count as 0,
    # which would rank it above a wrong answer (-1)
    meta = {"run_meta": {"reward_range": [-1, 1]}}
    load([rollout("g", "s", 1.0, **meta), rollout("g", "s", -1.0, **meta),
          rollout("g", "s", None, status="model_error", **meta), rollout("g", "s", None, status="infra_error", **meta)])
    sql = f"SELECT status, s, floor, pass_at FROM ({common.included_sql()}) ORDER BY status, s"
    assert common.run_sql(con, sql, common.params(["g"])).fetchall() == [
        ("model_error", -1.0, -1.0, 1.0), ("ok", -1.0, -1.0, 1.0), ("ok", 1.0, -1.0, 1.0)]
    got = common.run_sql(con, sql, common.params(["g"], include_errors=True)).fetchall()
    assert ("infra_error", -1.0, -1.0, 1.0) in got


def test_the_floor_is_the_lowest_score_seen_when_none_is_declared(load, con):
    load([rollout("neg", "s", -0.5), rollout("neg", "s", None, status="model_error"), rollout("pos", "s", 0.25),
          rollout("pos", "s", None, status="model_error")])
    got = dict(common.run_sql(con, f"SELECT run_id, any_value(floor) FROM ({common.selected_sql()}) GROUP BY 1",
                              common.params(["neg", "pos"])).fetchall())
    assert got == {"neg": -0.5, "pos": 0.0}  # a run whose rewards are >= 0 keeps 0: as before


def test_each_run_has_its_own_pass_threshold_and_a_call_overrides_it(load, con):
    load([rollout("vf", "s", 0.5, run_meta={"pass_threshold": 0.5}), rollout("plain", "s", 0.5)])
    sql = f"SELECT run_id, s >= pass_at FROM ({common.included_sql()}) ORDER BY run_id"
    assert common.run_sql(con, sql, common.params(["plain", "vf"])).fetchall() == [("plain", False), ("vf", True)]
    assert common.run_sql(con, sql, common.params(["plain", "vf"], threshold=0.4)).fetchall() == [
        ("plain", True), ("vf", True)]
    assert common.common_threshold(con, ["plain", "vf"]) is None  # they differ: each its own
    assert common.common_threshold(con, ["vf"]) == 0.5 and common.common_threshold(con, ["plain", "vf"], 0.7) == 0.7


def test_a_declared_scale_that_is_not_a_number_is_ignored(load, con):
    load([rollout("x", "s", 0.5, run_meta={"pass_threshold": "high", "reward_range": ["a", 1e400]})])
    scale = common.reward_scale(con, "x")
    assert scale[["reward_floor", "pass_threshold"]].values.tolist() == [[0.0, 1.0]]
    assert scale.reward_range_declared.isna().all()


def test_set_reward_scale_records_it_and_every_metric_uses_it(load, con):
    import rolloutlab as rl

    load([rollout("r", "s", 0.0), rollout("r", "s", None, status="model_error"), rollout("r", "t", 0.6)])
    before = rl.summary(con, "r", ks=(1,)).iloc[0]
    assert (before.reward_floor, before.pass_threshold, before.pass_at_1) == (0.0, 1.0, 0.0)
    meta = rl.set_reward_scale(con, "r", reward_range=(-1, 1), pass_threshold=0.5)
    assert meta == {"reward_range": [-1.0, 1.0], "pass_threshold": 0.5}
    after = rl.summary(con, "r", ks=(1,)).iloc[0]
    # the broken rollout now counts -1: mean of (0, -1, 0.6); t passes at 0.5
    assert after.mean_score == pytest.approx((0 - 1 + 0.6) / 3) and after.pass_at_1 == pytest.approx(0.5)
    assert (after.reward_floor, after.pass_threshold, after.score_min, after.score_max) == (-1.0, 0.5, -1.0, 0.6)
    runs = rl.runs(con).set_index("run")
    assert list(runs.loc["r", "reward_range"]) == [-1.0, 1.0] and runs.loc["r", "pass_threshold"] == 0.5
    with pytest.raises(ValueError, match="low < high"):
        rl.set_reward_scale(con, "r", reward_range=(1, -1))

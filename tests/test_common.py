"""metrics.common: run resolution, the counted-rollouts rule, parameter passing."""
from __future__ import annotations

import pytest

from rolloutlab.metrics import common
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

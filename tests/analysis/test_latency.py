"""latency(): point estimates equal numpy's linear percentiles; CIs are seeded and bracket them."""
from __future__ import annotations

import numpy as np
import pytest

import rolloutlab as rl
from conftest import rollout


@pytest.fixture
def records():
    rng = np.random.default_rng(0)
    out = []
    for s in range(40):
        for _ in range(3):
            out.append(rollout("r", f"s{s}", 1.0, ["search", "cat"], latency=float(rng.lognormal(2, 0.5))))
    out.append(rollout("r", "s0", None, ["search"], status="infra_error", latency=1000.0))
    return out


def test_points_and_cis(load, con, records):
    load(records)
    df = rl.latency(con, "r", n_boot=300, tool_n_boot=100)
    assert df.scope.tolist() == ["rollout"] * 3 + ["cat"] * 3 + ["search"] * 3
    counted = [r["latency_s"] for r in records if r["status"] == "ok"]
    roll = df[df.scope == "rollout"].set_index("percentile")
    for p in (50, 95, 99):
        assert roll.loc[p, "value"] == pytest.approx(np.percentile(counted, p))
        assert roll.loc[p, "ci_low"] <= roll.loc[p, "value"] <= roll.loc[p, "ci_high"]
    assert roll.n.tolist() == [120] * 3  # the infra error (1000 s) is excluded
    cat = df[df.scope == "cat"].set_index("percentile")
    assert cat.loc[50, "value"] == pytest.approx(0.2)  # every cat call is the 2nd: latency 0.2
    again = rl.latency(con, "r", n_boot=300, tool_n_boot=100)
    assert again.equals(df)


def test_include_errors_and_custom_percentiles(load, con, records):
    load(records)
    df = rl.latency(con, "r", percentiles=(100,), n_boot=50, tool_n_boot=10, include_errors=True)
    assert df.loc[df.scope == "rollout", "value"].item() == 1000.0

"""tool_stats and tool_pairs against plain-Python counts of the fixture."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import rolloutlab as rl
from conftest import rollout

RECORDS = [
    rollout("r", "a", 1.0, ["search", "cat", "cat"]),
    rollout("r", "a", 0.0, ["search", "list", "cat"]),
    rollout("r", "b", 1.0, ["list", "search"]),
    rollout("r", "b", 0.0, []),
    rollout("r", "c", None, ["search"], status="infra_error"),  # excluded by default
]
COUNTED = [r for r in RECORDS if r["status"] == "ok"]


@pytest.fixture
def stats(load, con):
    load(RECORDS)
    return rl.tool_stats(con, "r").set_index("tool")


def test_counts_shares_and_order(stats):
    calls = Counter(c["tool"] for r in COUNTED for c in r["tool_calls"])
    assert stats.calls.to_dict() == dict(calls)
    assert list(stats.index) == ["cat", "search", "list"]  # by calls, then name
    assert stats.loc["cat", "calls_per_rollout"] == pytest.approx(3 / 4)
    assert stats.loc["search", "share_of_rollouts"] == pytest.approx(3 / 4)
    assert stats.loc["list", "share_of_rollouts"] == pytest.approx(2 / 4)
    # of the 3 rollouts with calls: first tools search, search, list; last cat, cat, search
    assert stats.loc["search", "first_share"] == pytest.approx(2 / 3)
    assert stats.loc["cat", "last_share"] == pytest.approx(2 / 3)
    # list -> cat once, list -> search once: ties break to the later name; search -> cat, list once each
    assert stats.loc["list", ["top_next_tool", "top_next_share"]].tolist() == ["search", 0.5]
    assert stats.loc["search", ["top_next_tool", "top_next_share"]].tolist() == ["list", 0.5]
    assert stats.loc["cat", ["top_next_tool", "top_next_share"]].tolist() == ["cat", 1.0]


def test_latency_and_output_percentiles(stats):
    cat = [c for r in COUNTED for c in r["tool_calls"] if c["tool"] == "cat"]
    assert stats.loc["cat", "latency_p50"] == pytest.approx(np.percentile([c["latency_s"] for c in cat], 50))
    assert stats.loc["cat", "output_chars_p95"] == pytest.approx(
        np.percentile([c["output_chars"] for c in cat], 95))
    assert stats.errors.sum() == 0 and stats.error_rate.max() == 0


def test_errors_by_status(load, con):
    rec = rollout("e", "a", 0.0, ["search", "search"])
    rec["tool_calls"][1]["error"] = "HTTP 404"
    load([rec])
    s = rl.tool_stats(con, "e").set_index("tool")
    assert (s.loc["search", "errors"], s.loc["search", "error_rate"]) == (1, 0.5)


def test_pairs(load, con):
    load(RECORDS)
    pairs = rl.tool_pairs(con, "r")
    want = Counter((a["tool"], b["tool"]) for r in COUNTED for a, b in zip(r["tool_calls"], r["tool_calls"][1:]))
    got = {(t, n): p for t, n, p in pairs[["tool", "next_tool", "pairs"]].itertuples(index=False)}
    assert got == dict(want)
    assert pairs.share.sum() == pytest.approx(1.0)
    assert rl.tool_pairs(con, "r", limit=2).shape[0] == 2


def test_include_errors_counts_the_infra_rollout(load, con):
    load(RECORDS)
    s = rl.tool_stats(con, "r", include_errors=True).set_index("tool")
    assert s.loc["search", "calls"] == 4

"""Capacity plan: hand-made runs whose overlaps are known (every number below worked out by hand)."""
from datetime import datetime, timedelta, timezone

import pytest

import rolloutlab as rl
from conftest import rollout

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def timed(run, sample, start, end, calls):
    """A rollout from start to end (seconds after T0) with calls [(tool, start, end), ...]."""
    record = rollout(run, sample, 1.0, started_at=at(start), ended_at=at(end))
    record["tool_calls"] = [{"tool": tool, "turn": i, "started_at": at(a), "ended_at": at(b)}
                            for i, (tool, a, b) in enumerate(calls)]
    return record


# A [0,10]: search [1,3], cat [4,5]; B [2,8]: search [2.5,4], search [4.5,6]; C [9,12]: cat [9,9.5]
OBSERVED = [timed("obs", "a", 0, 10, [("search", 1, 3), ("cat", 4, 5)]),
            timed("obs", "b", 2, 8, [("search", 2.5, 4), ("search", 4.5, 6)]),
            timed("obs", "c", 9, 12, [("cat", 9, 9.5)])]


def test_observed_load(con, load):
    load(OBSERVED)
    df = rl.capacity(con, "obs").set_index("tool")
    assert list(df.index) == ["(all)", "search", "cat"]
    assert df.calls.tolist() == [5, 3, 2]
    assert df.calls_per_rollout.tolist() == pytest.approx([5 / 3, 1, 2 / 3])
    # search: A's [1,3] and B's [2.5,4] overlap; (all): a call ending at 4 as another starts does not
    assert df.peak_calls_in_flight.tolist() == [2, 2, 1]
    assert df.loc["search", "peak_at"] == T0.replace(tzinfo=None) + timedelta(seconds=2.5)
    assert set(df.peak_rollouts_in_flight) == {2}  # A with B, then A with C
    # starts within one second (a sliding, half-open window): (all) has 4 and 4.5, not 5
    assert df.peak_calls_per_s.tolist() == [2, 1, 1]
    assert df.loc["search", "latency_p50"] == pytest.approx(1.5)
    assert df.loc["search", "latency_p95"] == pytest.approx(1.5 + 0.9 * 0.5)
    assert "projected_peak_calls_in_flight" not in df


def test_projection_aligns_rollouts_on_their_start(con, load):
    load(OBSERVED)
    df = rl.capacity(con, "obs", batch_size=30, compute_multiplier=2).set_index("tool")
    # offsets from each rollout's start: search [1,3], [0.5,2], [2.5,4] -> 2 of 3 rollouts at once
    assert df.peak_share.tolist() == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    assert df.projected_peak_calls_in_flight.tolist() == [40, 40, 20]
    # starts at offsets 0 (C's cat) and 0.5 (B's search) within one second; search: 0.5 and 1
    assert df.rate_share.tolist() == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    assert df.projected_peak_calls_per_s.tolist() == pytest.approx([40, 40, 20])
    assert set(df.projected_sandboxes) == {60} and set(df.rollouts_per_step) == {60}
    assert df.attrs["rollouts_per_step"] == 60


def burst(run, n, stagger=0.0):
    """n rollouts, the i-th starting at i * stagger, each one search [0.5, 1.5] after its start."""
    return [timed(run, f"s{i}", i * stagger, i * stagger + 2, [("search", i * stagger + 0.5, i * stagger + 1.5)])
            for i in range(n)]


def test_projection_error_against_observed_steps(con, load):
    load(burst("step-a", 4) + burst("step-b", 8) + burst("step-c", 8, stagger=1.0))
    same = rl.projection_error(con, "step-a", "step-b").set_index("tool")
    assert same.loc["search", "peak_calls_in_flight"] == 8
    assert same.loc["search", "projected_peak_calls_in_flight"] == 8
    assert same.loc["search", "in_flight_error"] == 0
    # starts spread one second apart: one call at a time, the projection (all at once) is an upper bound
    spread = rl.projection_error(con, "step-a", "step-c").set_index("tool")
    assert spread.loc["search", "peak_calls_in_flight"] == 1
    assert spread.loc["search", "in_flight_error"] == 7


def test_multiplier_needs_batch_size_and_run_must_exist(con, load):
    load(OBSERVED)
    with pytest.raises(ValueError, match="batch_size"):
        rl.capacity(con, "obs", compute_multiplier=4)
    with pytest.raises(rl.UnknownRunError):
        rl.capacity(con, "nope")


def test_in_flight_over_time(con, load):
    load(OBSERVED)
    df = rl.in_flight(con, "obs", points=12)  # one window per second of the run's 12 s
    peak = df.groupby("scope").in_flight.max().to_dict()
    assert peak == {"(all)": 2, "search": 2, "cat": 1, "rollouts": 2}
    search = df[df.scope == "search"].set_index("t").in_flight
    start = T0.replace(tzinfo=None)
    assert search[start + timedelta(seconds=2)] == 2  # A's and B's searches at 2.5
    assert search[start + timedelta(seconds=6)] == 0  # B's second search ended at 6


def test_projection_is_never_below_what_the_run_showed(con, load):
    # two rollouts far apart in their own time whose calls still met: C's call at 9.2 s into C,
    # D's at 0.2 s into D, both at 10 s on the clock
    records = [timed("meet", "c", 0, 12, [("search", 10, 11)]), timed("meet", "d", 9.8, 12, [("search", 10, 11)])]
    load(records)
    df = rl.capacity(con, "meet", batch_size=2).set_index("tool")
    assert df.loc["search", "peak_share"] == 0.5 and df.loc["search", "peak_calls_in_flight"] == 2
    assert df.loc["search", "projected_peak_calls_in_flight"] == 2  # not 2 x 0.5
    # a step of one rollout: the observed peak scaled down to its size
    assert rl.capacity(con, "meet", batch_size=1).set_index("tool").loc["search", "projected_peak_calls_in_flight"] == 1


def test_real_logs_projection_covers_the_observed_peaks(con, real_dir):
    rl.ingest(con, real_dir / "tau2-sft")
    for run in rl.runs(con).run:
        df = rl.capacity(con, run, batch_size=64).dropna(subset=["peak_calls_in_flight"])
        assert len(df) and (df.peak_rollouts_in_flight <= 64).all()
        assert (df.projected_peak_calls_in_flight >= df.peak_calls_in_flight).all()
        assert (df.projected_peak_calls_per_s >= df.peak_calls_per_s - 1e-9).all()


def test_fewer_calls_can_peak_higher_and_the_change_says_why(con, load):
    """#35.6: the fine-tuned checkpoint calls less in all, yet a step peaks higher, because its
    calls come together right after the start."""
    # base: 3 rollouts, 4 calls each, one at a time at offsets 0, 10, 20, 30 (each 2 s), staggered
    # by 2 s per rollout -> never two in a call at the same offset
    base = [timed("base", f"s{i}", 0, 40, [("search", 2 * i + 10 * j, 2 * i + 10 * j + 2) for j in range(4)])
            for i in range(3)]
    # cand: 3 rollouts, 2 calls each, all at offsets 0 and 3 (each 2 s)
    cand = [timed("cand", f"s{i}", 100, 110, [("search", 100, 102), ("search", 103, 105)]) for i in range(3)]
    load(base + cand)
    change = rl.capacity_change(con, "base", "cand", batch_size=10, compute_multiplier=3)
    b, c = change.set_index("run").loc["base"], change.set_index("run").loc["cand"]
    assert (b.calls_per_step, c.calls_per_step) == (4 * 30, 2 * 30)
    assert (b.peak_share, c.peak_share) == (pytest.approx(1 / 3), 1.0)
    assert (b.projected_peak_calls_in_flight, c.projected_peak_calls_in_flight) == (10, 30)
    sentence = change.attrs["sentence"]
    assert sentence.startswith("cand makes fewer tool calls per step than base (60 against 120), yet its peak is "
                               "higher: 30 against 10 calls in flight")
    assert "100% of its rollouts are in a call, against 33.3%" in sentence
    # the report's Endpoint load section says the same sentence
    from rolloutlab.views.report import capacity_html
    import html

    assert html.escape(sentence, quote=False) in capacity_html(con, "base", "cand", 10, 3).replace("&#x27;", "'")

"""Numbers for people: the cases the issue listed (3.3e-16, 4.004e+04 tokens, p 0.0004998, 0.008333)."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from rolloutlab.text import fmt


@pytest.mark.parametrize("x, want", [(3.323036e-16, "0"), (4.004e04, "40,040"), (0.008333, "0.00833"),
                                     (12.345, "12.3"), (1.2345, "1.23"), (0.5, "0.5"), (100.0, "100"),
                                     (-0.0123, "-0.0123"), (2_500_000.4, "2,500,000"), (float("nan"), "—"),
                                     (None, "—"), (float("inf"), "∞"), (7, "7")])
def test_number(x, want):
    assert fmt.number(x) == want


def test_shares_pvalues_signs_intervals():
    assert [fmt.share(v) for v in (0.008333, 0.1234, 1.0, 0.0, 0.0004)] == ["0.8%", "12.3%", "100%", "0%", "<0.1%"]
    assert [fmt.pvalue(p) for p in (0.0004998, 0.012, 0.4321, 1.0)] == ["p < 0.001", "p = 0.012", "p = 0.43",
                                                                       "p = 1.00"]
    assert (fmt.signed(0.102), fmt.signed(-0.102), fmt.signed(0.0)) == ("+0.102", "-0.102", "0")
    assert fmt.interval(0.05, 0.153) == "[+0.05, +0.153]"
    assert (fmt.seconds(0.042), fmt.seconds(245), fmt.seconds(7380)) == ("0.042 s", "4 min 05 s", "2 h 03 min")
    assert (fmt.dollars(0.0123), fmt.dollars(12.3), fmt.dollars(1234.5)) == ("$0.0123", "$12.30", "$1,234")


def test_a_table_for_people_leaves_the_frame_alone():
    df = pd.DataFrame({"run": ["a"], "share": [0.25], "p": [0.0004], "tokens": [40040.0], "n": [3]})
    shown = fmt.table(df, shares=["share"], pvalues=["p"])
    assert shown.iloc[0].tolist() == ["a", "25%", "p < 0.001", "40,040", "3"]
    assert df.p.iloc[0] == 0.0004 and not math.isnan(df.share.iloc[0])


def test_pandas_missing_values_and_nullable_integers():
    df = pd.DataFrame({"n": pd.array([3, None], dtype="Int64"), "t": [pd.NaT, pd.Timestamp("2025-01-01")]})
    assert fmt.table(df).n.tolist() == ["3", "—"] and fmt.value(pd.NA) == "—" and fmt.number(pd.NA) == "—"


def test_a_column_reads_by_its_name():
    kinds = {name: fmt.formatter(name) for name in ("p_holm", "signal_share", "pass_at_4", "pass@1", "rate_diff",
                                                      "cost_per_solved", "logged_cost_usd", "latency_p95", "latency_s",
                                                      "diff", "tool_calls_mean", "rel_change")}
    assert kinds == {"p_holm": fmt.pvalue, "signal_share": fmt.share, "pass_at_4": fmt.share, "pass@1": fmt.share,
                     "rate_diff": fmt.share, "cost_per_solved": fmt.dollars, "logged_cost_usd": fmt.dollars,
                     "latency_p95": fmt.seconds, "latency_s": fmt.seconds, "diff": fmt.signed,
                     "tool_calls_mean": fmt.value, "rel_change": fmt.share}
    # a kind applies to numbers: a column named cost_source holds words
    assert (fmt.dollars("logs+prices"), fmt.share("—")) == ("logs+prices", "—")
    assert (fmt.number(7.65e-9), fmt.share(5.03e-16)) == ("7.65e-09", "0%")


def cells(styler) -> list[list[str]]:
    """What a Styler shows, cell by cell (its display_value), from the table it renders."""
    body = styler._translate(False, False)["body"]
    return [[c["display_value"] for c in row if c["type"] == "td"] for row in body]


def test_a_styled_frame_keeps_its_numbers_and_shows_them_for_people():
    df = pd.DataFrame({"run": ["a", "b"], "signal_share": [0.355, float("nan")], "ci_low": [0.2, None],
                       "ci_high": [0.5, None], "cost_source": ["logs", "prices"], "cost_mean": [0.06243, 0.04261],
                       "latency_p95": [30.8, 245.0], "rollouts": [600, 48], "meta": [{"a": 0.050000000000000044}, None],
                       "peak_at": [pd.Timestamp("2025-12-09 10:06:57.583"), pd.NaT]})
    shown = cells(fmt.styled(df))
    assert shown[0] == ["a", "35.5%", "20%", "50%", "logs", "$0.0624", "30.8 s", "600", "a: 0.05", "2025-12-09 10:06:57"]
    assert shown[1] == ["b", "—", "—", "—", "prices", "$0.0426", "4 min 05 s", "48", "—", "—"]
    assert df.signal_share.iloc[0] == 0.355  # the frame is untouched


def test_metrics_as_rows_and_compare_rows_by_unit():
    summary = pd.DataFrame({"run": ["base", "step10"], "mean_score": [0.697815, 0.804013],
                            "signal_share": [0.355, 0.4], "pass_at_8": [float("nan")] * 2}).set_index("run").T
    assert cells(fmt.styled(summary)) == [["0.698", "0.804"], ["35.5%", "40%"], ["—", "—"]]
    cmp = pd.DataFrame({"metric": ["pass@1", "cost_per_solved", "tool_calls_per_rollout"],
                        "base": [0.559, 0.112, 8.32], "candidate": [0.672, 0.0634, 2.85],
                        "diff": [0.113, -0.0486, -5.47], "ci_low": [0.06, -0.06, -5.9], "ci_high": [0.17, -0.037, -5.0],
                        "p_value": [0.0001, 0.002, 0.0], "unit": ["share", "USD", "calls"]})
    assert cells(fmt.styled(cmp)) == [
        ["pass@1", "55.9%", "67.2%", "+11.3 pp", "+6 pp", "+17 pp", "p < 0.001", "share"],
        ["cost_per_solved", "$0.112", "$0.0634", "-$0.0486", "-$0.06", "-$0.037", "p = 0.002", "USD"],
        ["tool_calls_per_rollout", "8.32", "2.85", "-5.47", "-5.9", "-5", "p < 0.001", "calls"]]
    # the report and the CLI write a change the same way
    assert (fmt.unit_diff(0.113, "share"), fmt.unit_diff(-4.1, "seconds")) == ("+11.3 pp", "-4.1 s")


def test_facts_of_a_frames_attrs():
    shown = cells(fmt.facts({"shared_samples": 200, "alpha": 0.050000000000000044, "frame": pd.DataFrame(),
                             "runs": ["base", "step10"]}))
    assert shown == [["200"], ["0.05"], ["base, step10"]]

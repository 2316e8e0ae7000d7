"""Numbers for people: the cases the issue listed (3.3e-16, 4.004e+04 tokens, p 0.0004998, 0.008333)."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from rolloutlab import fmt


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

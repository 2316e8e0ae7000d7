"""Numbers as people read them: in tables, figures, the CLI and the report. DataFrames keep full
values; only what is shown goes through here.

``3.323036e-16`` is ``0``, ``4.004e+04`` tokens are ``40,040``, ``0.0004998`` is ``p < 0.001``, a
share of ``0.008333`` is ``0.8%``: two to three significant digits, thousands separators, shares
as percentages, p-values as statisticians write them. A missing value is an em dash.
"""
from __future__ import annotations

import datetime
import functools
import math

MISSING = "—"
TINY = 1e-12  # below this a value is a rounding residue, shown as 0


def _missing(x) -> bool:
    """None, NaN, NaT and pandas' NA (whose comparisons raise)."""
    if x is None:
        return True
    try:
        import pandas as pd

        missing = pd.isna(x)
        return bool(missing) if isinstance(missing, bool) or getattr(missing, "ndim", 1) == 0 else False
    except (TypeError, ValueError):
        return False


def _cell(kind):
    """A kind of number as a cell shows it: a missing value as MISSING, a text cell (in a column of
    numbers) as it is, else ``kind``'s rendering."""
    @functools.wraps(kind)
    def shown(x, *args, **kwargs):
        if _missing(x):
            return MISSING
        if isinstance(x, str):
            return x
        return kind(x, *args, **kwargs)
    return shown


@_cell
def number(x, sig: int = 3) -> str:
    """``sig`` significant digits (whole numbers from 1,000 on, with separators); 0 for residues."""
    x = float(x)
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if abs(x) < TINY:
        return "0"
    if abs(x) >= 10 ** (sig - 1) or float(x).is_integer() and abs(x) >= 1:
        return f"{x:,.0f}"
    if abs(x) < 1e-4:  # 0.0000000765 is unreadable; 7.65e-08 is not
        return f"{x:.{sig - 1}e}"
    digits = max(0, sig - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


@_cell
def signed(x, sig: int = 3) -> str:
    """A difference: always with its sign."""
    text = number(x, sig)
    return text if text.startswith(("-", "−")) or text == "0" else "+" + text


@_cell
def share(x, digits: int = 1) -> str:
    """A share of 0..1 as a percentage: 0.1234 -> 12.3%; under 0.1% but above 0: <0.1%."""
    if abs(float(x)) < TINY:
        return "0%"
    pct = float(x) * 100
    if 0 < abs(pct) < 10 ** -digits:
        return f"<{10 ** -digits:g}%"
    return f"{pct:.{digits}f}%".replace(".0%", "%") if digits else f"{pct:.0f}%"


@_cell
def pvalue(p) -> str:
    """``p < 0.001``, ``p = 0.012``, ``p = 0.43``."""
    p = float(p)
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.2g}" if p < 0.1 else f"p = {p:.2f}"


@_cell
def points(x) -> str:
    """A difference of two shares, in percentage points: +10.8 pp."""
    return f"{signed(float(x) * 100)} pp"


def unit_value(x, unit: str | None) -> str:
    """A metric's value by its unit (``compare``'s ``unit`` column: share, USD, seconds, else a number)."""
    x = _plain(x)
    if unit == "share":
        return share(x)
    if unit == "USD":
        return dollars(x)
    if unit == "seconds":
        return seconds(x)
    return number(x)


@_cell
def unit_diff(x, unit: str | None) -> str:
    """A difference of a metric by its unit, always signed: +10.8 pp, -$0.0486, +4.1 s."""
    x = _plain(x)
    if unit == "share":
        return points(x)
    if unit == "USD":
        return ("-" if x < 0 else "+") + dollars(abs(x))
    if unit == "seconds":
        return signed(x) + " s"
    return signed(x)


def unit_interval(lo, hi, unit: str | None) -> str:
    if _missing(lo) or _missing(hi):
        return MISSING
    return f"[{unit_diff(lo, unit)}, {unit_diff(hi, unit)}]"


def interval(lo, hi, sig: int = 3, signs: bool = True) -> str:
    """A confidence interval: ``[+0.05, +0.15]``."""
    if _missing(lo) or _missing(hi):
        return MISSING
    f = signed if signs else number
    return f"[{f(lo, sig)}, {f(hi, sig)}]"


@_cell
def seconds(x) -> str:
    """A duration: 0.042 s, 12.3 s, 4 min 05 s, 2 h 03 min."""
    x = float(x)
    if x < 60:
        return f"{number(x)} s"
    if x < 3600:
        return f"{int(x // 60)} min {int(x % 60):02d} s"
    return f"{int(x // 3600)} h {int(x % 3600 // 60):02d} min"


@_cell
def dollars(x) -> str:
    """$0.0123, $12.30, $1,234."""
    x = float(x)
    if x < 0:
        return "-" + dollars(-x)
    if abs(x) >= 100:
        return f"${x:,.0f}"
    if abs(x) >= 1:
        return f"${x:,.2f}"
    return "$" + number(x)


@_cell
def count(x) -> str:
    """A count: 40,040."""
    return f"{int(x):,}"


def value(x) -> str:
    """Any cell: numbers by ``number``, counts with separators, text as it is."""
    if _missing(x):
        return MISSING
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return number(x)
    if isinstance(x, (list, tuple)) or type(x).__module__ == "numpy":
        return ", ".join(value(_plain(i)) for i in (x.tolist() if hasattr(x, "tolist") else x))
    if isinstance(x, dict):
        return ", ".join(f"{k}: {value(_plain(v))}" for k, v in x.items())
    if isinstance(x, datetime.datetime):  # pandas' Timestamp too: to the second, as logs are read
        return x.strftime("%Y-%m-%d %H:%M:%S")
    return str(x)


def table(df, shares=(), pvalues=(), signed_cols=(), counts=(), seconds_cols=(), dollar_cols=()):
    """A copy of ``df`` with every cell as text for people (the frame itself is untouched): the
    named columns by their kind, every other by ``formatter`` of its name."""
    out = df.copy()
    kinds = {**{c: share for c in shares}, **{c: pvalue for c in pvalues}, **{c: signed for c in signed_cols},
             **{c: count for c in counts}, **{c: seconds for c in seconds_cols}, **{c: dollars for c in dollar_cols}}
    for col in out.columns:
        out[col] = out[col].map(lambda v, f=kinds.get(col, formatter(col)): f(_plain(v))).astype(object)
    return out


PVALUE_COLUMNS = {"p", "p_value", "p_holm", "q_bh", "p_adjusted", "p_perm"}
UNIT_VALUE_COLUMNS = ("base", "candidate", "diff", "ci_low", "ci_high", "se")
# columns that belong to the estimate to their left (``expected_signal_share, ci_low, ci_high, se``)
ESTIMATE_COLUMNS = {"ci_low", "ci_high", "se", "lo", "hi"}


def formatter(name) -> callable:
    """How a column (or a metric) named ``name`` reads, from its name alone: p-values (``p_value``,
    ``p_holm``, ``q_bh``), shares (``*_share``, ``*_rate``, ``rate_*``, ``pass_at_*``,
    ``pass@k``, ``rel_change``, ``power``), dollars (``cost*``, ``*_usd``), seconds
    (``latency*``, ``*_s``), differences with their sign (``diff``, ``*_diff``); anything else by
    ``value``. The CLI, the notebooks and the report read a column the same way."""
    n = str(name).lower()
    if n in PVALUE_COLUMNS:
        return pvalue
    if (n.endswith(("_share", "_rate", "share", "_coverage", "_share of the distance")) or n.startswith(("rate_", "pass_at_", "pass_hat_", "pass@"))
            or n in ("rel_change", "power", "coverage")):
        return share
    if n.startswith("cost") or n.endswith("_usd") or "_cost_" in n:
        return dollars
    if n.startswith("latency") or n.endswith("_s"):
        return seconds
    if n == "diff" or n.endswith("_diff"):
        return signed
    return value


def styled(df, rows: bool | None = None, max_rows: int = 200, **kinds):
    """``df`` as people read it in a notebook: a pandas Styler whose every cell goes through this
    module (the frame keeps its numbers). Columns read by ``formatter`` of their name, or by
    ``kinds`` (``styled(df, lift=share)``); with ``rows`` (default: when the index names metrics
    and the columns runs, as ``summary().set_index("run").T``) each row by its index name. A
    frame with compare's ``unit`` column reads its values by each row's unit. A missing value is
    ``MISSING``; past ``max_rows`` rows, the first ones and a caption saying how many there are."""
    import pandas as pd

    shown = df.head(max_rows) if len(df) > max_rows else df
    if rows is None:
        rows = not isinstance(df.index, pd.RangeIndex) and any(formatter(i) is not value for i in df.index) \
            and all(formatter(c) is value for c in df.columns)

    def cell(f):  # a kind applies to numbers; text, lists and flags read as they are
        def show(v):
            v = _plain(v)
            numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
            return f(v) if numeric or _missing(v) else value(v)
        return show

    styler = shown.style.format(cell(value), na_rep=MISSING)
    if rows:
        for label in shown.index:
            styler = styler.format(cell(kinds.get(label, formatter(label))), subset=pd.IndexSlice[[label], :],
                                   na_rep=MISSING)
    else:
        previous = value
        for col in shown.columns:
            f = kinds.get(col, formatter(col))
            if f is value and str(col) in ESTIMATE_COLUMNS:  # an estimate's interval reads like it
                f = previous
            styler = styler.format(cell(f), subset=[col], na_rep=MISSING)
            previous = f
        if "unit" in shown.columns and shown.index.is_unique:
            levels = [c for c in ("base", "candidate") if c in shown.columns]
            changes = [c for c in UNIT_VALUE_COLUMNS if c in shown.columns and c not in levels]
            for label, unit in shown["unit"].items():
                styler = styler.format(lambda v, u=unit: unit_value(v, u), subset=pd.IndexSlice[[label], levels],
                                       na_rep=MISSING)
                styler = styler.format(lambda v, u=unit: unit_diff(v, u), subset=pd.IndexSlice[[label], changes],
                                       na_rep=MISSING)
    if len(df) > max_rows:
        styler = styler.set_caption(f"the first {max_rows:,} of {len(df):,} rows")
    return styler


def facts(mapping: dict, keys=None):
    """A dict of scalars (a frame's ``attrs``) as a two-column table read like ``styled``: nested
    frames and long lists left out."""
    import pandas as pd

    rows = [(k, v) for k, v in mapping.items() if (keys is None or k in keys)
            and not isinstance(v, (pd.DataFrame, pd.Series, dict)) and not (isinstance(v, (list, tuple)) and len(v) > 12)]
    text = [(k, ", ".join(value(_plain(x)) for x in v) if isinstance(v, (list, tuple)) else formatter(k)(_plain(v)))
            for k, v in rows]
    return pd.DataFrame(text, columns=["", "value"]).set_index("").style


def _plain(v):
    """numpy scalars as Python ones (so that ``value`` tells counts from measurements); arrays as
    lists."""
    import numpy as np

    if isinstance(v, np.generic):
        return v.item()
    return v.tolist() if isinstance(v, np.ndarray) else v

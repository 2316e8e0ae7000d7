"""Log text made safe for HTML. Every string from a log goes through ``esc`` before it reaches the
explorer, the report or a figure's hover; one module, so that none of them needs another's."""
from __future__ import annotations

import html

import pandas as pd


def missing(value) -> bool:
    """None, NaN, NA or NaT: a value the log did not carry."""
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value)


def esc(value, limit: int | None = None) -> str:
    """Log text made safe for HTML (missing values: empty), cut to ``limit`` characters."""
    if missing(value):
        return ""
    text = str(value)
    return html.escape(text[:limit] if limit else text)

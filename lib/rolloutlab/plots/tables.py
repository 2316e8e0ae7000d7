"""Styled tables for notebooks and the report. Cell text from logs is HTML-escaped."""
from __future__ import annotations

import pandas as pd
from pandas.io.formats.style import Styler

from .style import STATUS_COLORS, require


def readiness_table(checks: pd.DataFrame) -> Styler:
    """The readiness checks (from ``check``) with status colors, value and advice."""
    checks = require(checks, "the readiness table")
    shown = checks[["check", "status", "value", "threshold", "advice", "details"]]

    def color(status: str) -> str:
        return f"background-color: {STATUS_COLORS.get(status, '#ffffff')}; color: white; font-weight: bold"

    return (shown.style.hide(axis="index")
            .format({"value": lambda v: "" if v != v else f"{v:.4g}"}, escape="html")
            .format(escape="html", subset=["check", "status", "threshold", "advice", "details"])
            .map(color, subset=["status"])
            .set_properties(subset=["advice", "details"], **{"text-align": "left", "white-space": "normal"}))

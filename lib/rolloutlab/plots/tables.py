"""Styled tables for notebooks and the report. Cell text from logs is HTML-escaped, and tables are
marked so that JupyterLab's MathJax leaves them alone: answers are dollar amounts ("$28.9M"),
and two of them in one cell would otherwise be typeset as math."""
from __future__ import annotations

import pandas as pd
from pandas.io.formats.style import Styler

from .style import STATUS_COLORS, require

NO_MATH = 'class="tex2jax_ignore mathjax_ignore"'  # the classes MathJax 2 and 3+ skip


def readiness_table(checks: pd.DataFrame) -> Styler:
    """The readiness checks (from ``check``) with status colors, value and advice."""
    checks = require(checks, "the readiness table")
    shown = checks[["check", "status", "value", "threshold", "advice", "details"]]

    def color(status: str) -> str:
        return f"background-color: {STATUS_COLORS.get(status, '#ffffff')}; color: white; font-weight: bold"

    return (shown.style.hide(axis="index").set_table_attributes(NO_MATH)
            .format({"value": lambda v: "" if v != v else f"{v:.4g}"}, escape="html")
            .format(escape="html", subset=["check", "status", "threshold", "advice", "details"])
            .map(color, subset=["status"])
            .set_properties(subset=["advice", "details"], **{"text-align": "left", "white-space": "normal"}))

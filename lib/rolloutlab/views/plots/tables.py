"""Styled tables for notebooks and the report. Cell text from logs is HTML-escaped, and tables are
marked so that JupyterLab's MathJax leaves them alone: answers are dollar amounts ("$28.9M"),
and two of them in one cell would otherwise be typeset as math.

Text is never cut: prose columns wrap within a readable width, and text longer than
``SHORT_TEXT`` characters shows its start with the whole of it one click away (an HTML
``<details>``), so a final answer or an audit detail is always there in full. Numbers go through
``fmt``; the frames keep full values."""
from __future__ import annotations

import pandas as pd
from pandas.io.formats.style import Styler

from ...text import fmt
from ...text.htmltext import esc
from .style import STATUS_COLORS, STATUS_TEXT, require

NO_MATH = 'class="tex2jax_ignore mathjax_ignore rl-table"'  # the classes MathJax 2 and 3+ skip
SHORT_TEXT = 160  # characters shown before "show all"
PROSE = {"text-align": "left", "white-space": "pre-wrap", "overflow-wrap": "anywhere", "vertical-align": "top"}


def long_text(value, limit: int = SHORT_TEXT) -> str:
    """Log text as escaped HTML, whole: short text as it is, longer text as its start with the
    rest one click away."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        value = ", ".join(map(str, list(value)))
    text = str(value)
    if len(text) <= limit:
        return esc(text)
    return (f"<details class='rl-long'><summary>{esc(text[:limit])}… <i>(show all {fmt.count(len(text))} "
            f"characters)</i></summary>{esc(text)}</details>")


def _widths(styler: Styler, widths: dict[str, str]) -> Styler:
    for col, width in widths.items():
        styler = styler.set_properties(subset=[col], **{**PROSE, "min-width": width, "max-width": "48em"})
    return styler


def readiness_table(checks: pd.DataFrame) -> Styler:
    """The readiness checks (from ``check``) with status colors, value and advice; advice and
    details wrap in columns wide enough to read, long details expand on a click."""
    checks = require(checks, "the readiness table")
    shown = checks[["check", "status", "value", "threshold", "advice", "details"]]

    def color(status: str) -> str:
        return (f"background-color: {STATUS_COLORS.get(status, '#ffffff')}; "
                f"color: {STATUS_TEXT.get(status, 'black')}; font-weight: bold")

    styler = (shown.style.hide(axis="index").set_table_attributes(NO_MATH)
              .format({"value": lambda v: "" if v != v else fmt.number(v)})
              .format(esc, subset=["check", "status", "threshold", "advice"])
              .format(long_text, subset=["details"])
              .map(color, subset=["status"])
              .set_properties(subset=["check", "status", "value", "threshold"], **{"vertical-align": "top"}))
    return _widths(styler, {"advice": "22em", "details": "22em", "threshold": "8em"})


AUDIT_COLUMNS = ["rank", "run", "sample_id", "score", "n_tool_calls", "suspicion", "reason", "details", "checks",
                 "final_answer", "rollout_id"]


def audit_table(suspects: pd.DataFrame) -> Styler:
    """The reward-hacking suspects (from ``rl.audit``), most suspect first: reasons, details and
    the final answer wrap and are never cut (long ones expand on a click); numbers through fmt;
    the rollout id, whole, to find the rollout in the explorer. No suspects: an empty table that
    says so."""
    shown = suspects[[c for c in AUDIT_COLUMNS if c in suspects.columns]]
    numbers = {"rank": fmt.count, "n_tool_calls": fmt.count, "score": fmt.number, "suspicion": fmt.number}
    styler = (shown.style.hide(axis="index").set_table_attributes(NO_MATH)
              .format({c: f for c, f in numbers.items() if c in shown.columns})
              .format(esc, subset=[c for c in ("run", "sample_id", "rollout_id") if c in shown.columns])
              .format(long_text, subset=[c for c in ("reason", "details", "checks", "final_answer")
                                          if c in shown.columns])
              .set_properties(**{"vertical-align": "top"}))
    if shown.empty:
        styler = styler.set_caption("The audit flagged no rollout.")
    return _widths(styler, {c: w for c, w in (("reason", "14em"), ("details", "18em"), ("final_answer", "22em"),
                                              ("checks", "10em"), ("rollout_id", "10em"))
                            if c in shown.columns})

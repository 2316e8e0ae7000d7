"""The headline's power line: which differences this comparison could detect (``rl.power``), or why
there is no estimate.
"""
from __future__ import annotations

import duckdb

from ...text.htmltext import esc as _e

def _power_or_failure(con, base, candidate) -> tuple[str, bool]:
    """(the headline's power sentence, True), or (why it was not computed, False)."""
    try:
        return power_sentence(con, base, candidate), True
    except Exception as exc:  # noqa: BLE001 (the headline stands without it)
        return (f"Which differences this comparison could detect was not computed: {type(exc).__name__}: "
                f"{str(exc)[:300]}."), False


def _power_p(sentence: str, ok: bool) -> str:
    return f"<p class='note{'' if ok else ' failed'}' id='power-line'>{_e(sentence)}</p>"


def power_html(con: duckdb.DuckDBPyConnection, base: str, candidate: str) -> str:
    """The report's one statement of which differences the comparison could detect
    (``power_sentence``: the runs' own samples and attempts, their observed correlation), or why
    there is no estimate. A failure says so on the line."""
    return _power_p(*_power_or_failure(con, base, candidate))


def power_sentence(con: duckdb.DuckDBPyConnection, base: str, candidate: str) -> str:
    """The headline's power line as text: the detectable difference of this comparison for the
    decision the verdict applies, and what a smaller true difference means."""
    from ...analysis.power_analysis import detectable_sentence, power

    df = power(con, base, candidate)
    sentence = detectable_sentence(df)
    if df.attrs["no_estimate"]:
        return sentence
    return (f"{sentence} Planned for {df.attrs['decision']}. A true difference smaller than that can go unseen "
            "here: “no clear change” is not “no change”.")

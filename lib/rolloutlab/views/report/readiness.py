"""The readiness section: both runs' checks side by side, with the power line among them.
"""
from __future__ import annotations

import pandas as pd

from ...text.htmltext import esc as _e
from .page import check_value

# --- readiness, both runs --------------------------------------------------------------------------

def readiness_html(checks: dict[str, pd.DataFrame]) -> str:
    """The readiness checks of several runs side by side (run -> ``check`` frame): per check its
    status and value in each run, the threshold, and what each run's result says (examples on a
    click). Row ids ``readiness-<check>``."""
    runs = list(checks)
    frames = {run: df.set_index("check") for run, df in checks.items()}
    order = list(dict.fromkeys(c for df in checks.values() for c in df.check))
    head = "<th>check</th>" + "".join(f"<th>{_e(r)}</th>" for r in runs) + "<th>what it says</th>"
    body = []
    for name in order:
        cells, said = [], []
        for run in runs:
            if name not in frames[run].index:
                cells.append("<td></td>")
                continue
            r = frames[run].loc[name]
            value = check_value(name, r.value)
            cells.append(f"<td class='st {_e(r.status)}'>{_e(r.status)}"
                         + (f"<br><span class='thr'>{_e(value)}</span>" if value else "") + "</td>")
            said.append((run, r.advice, r.details))
        same = len({(a, d) for _, a, d in said}) == 1
        advice = "".join(
            f"<div>{'' if same else f'<b>{_e(run)}</b>: '}{_e(adv)}"
            + (f"<details><summary>examples</summary><div class='long'>{_e(det)}</div></details>" if det else "")
            + "</div>" for run, adv, det in (said[:1] if same else said))
        threshold = frames[runs[-1]].loc[name].threshold if name in frames[runs[-1]].index else ""
        body.append(f"<tr id='readiness-{_e(name)}'><td>{_e(name)}<div class='thr'>{_e(threshold)}</div></td>"
                    f"{''.join(cells)}<td>{advice}</td></tr>")
    return f"<table class='readiness'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def report_checks(checks: dict[str, pd.DataFrame], power_line: str) -> dict[str, pd.DataFrame]:
    """The readiness checks as the report shows them: each run's ``power`` row (a run alone, an
    assumed correlation, the check's default target) gives way to the headline's one statement,
    so the report states one detectable difference."""
    out = {}
    for run, df in checks.items():
        df = df.copy()
        at = df.check == "power"
        if at.any():
            df.loc[at, "status"] = "skip"
            df.loc[at, "value"] = None
            df.loc[at, "advice"] = f"For this comparison, the headline says it: {power_line}"
            df.loc[at, "details"] = ""
        out[run] = df
    return out


def _readiness(base, candidate, checks) -> str:
    return (f"<h2>Readiness of {_e(base)} and {_e(candidate)}</h2><p class='note'>The readiness checks of both "
            "runs side by side: a warning of the candidate (a full score without tool calls, a grader that "
            "scores the same answer differently) is a reason to read its rollouts before trusting its score. "
            "Thresholds under each check's name; examples on a click.</p>" + readiness_html(checks))

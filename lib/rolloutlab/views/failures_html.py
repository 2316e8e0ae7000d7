"""HTML of why it fails: an aligned trajectory diff (``trajectory_diff_html``) and the modes a
checkpoint fixed or introduced (``modes_html``); every log string goes through ``htmltext.esc``.
"""
from __future__ import annotations

import pandas as pd

from ..config import DIFF_OUTPUT_CHARS
from ..text.htmltext import esc, missing

# ---- HTML (every log string through htmltext.esc) --------------------------------------------

NO_MATH = "tex2jax_ignore mathjax_ignore"  # log text holds dollar amounts: never typeset as math
DIFF_STYLE = """<style>
.rl-diff{border-collapse:collapse;font-size:12px;width:100%;table-layout:fixed}
.rl-diff td,.rl-diff th{border-bottom:1px solid #ddd;padding:3px 6px;vertical-align:top;text-align:left}
.rl-diff th.rl-step,.rl-diff td.rl-step{width:3.5em;color:#777}
.rl-diff pre{white-space:pre-wrap;margin:2px 0;max-height:120px;overflow:auto;color:#555}
.rl-diff .rl-op-same td{color:#777}.rl-diff .rl-op-only_a td.rl-a,.rl-diff .rl-op-only_b td.rl-b{background:#fdf0e6}
.rl-diff .rl-op-arguments td.rl-a,.rl-diff .rl-op-arguments td.rl-b{background:#fff8e1}
.rl-diff .rl-op-outcome td.rl-a,.rl-diff .rl-op-outcome td.rl-b{background:#eef6fb}
.rl-diff .rl-op-differs td{background:#fdf0e6}.rl-diff .rl-first td.rl-step{color:#D55E00;font-weight:bold}
.rl-diff .rl-err{color:#D55E00}.rl-diff .rl-none{color:#bbb}
</style>"""
OP_WORDS = {"same": "same call", "outcome": "same call, other outcome", "arguments": "same tool, other arguments",
            "only_a": "only A", "only_b": "only B", "differs": "answers differ"}


def _cell(r, side: str) -> str:
    tool = getattr(r, f"{side}_tool")
    if missing(tool):
        return "<span class='rl-none'>—</span>"
    args = getattr(r, f"{side}_arguments")
    status, error, output = getattr(r, f"{side}_status"), getattr(r, f"{side}_error"), getattr(r, f"{side}_output")
    err = "" if missing(error) else f" <span class='rl-err'>{esc(error, 200)}</span>"
    out = "" if missing(output) else f"<pre>{esc(output, DIFF_OUTPUT_CHARS)}</pre>"
    return (f"<code>{esc(tool)}({esc(args, 300)})</code> · {esc(status)}{err}{out}")


def trajectory_diff_html(diff: pd.DataFrame) -> str:
    """The aligned diff side by side (A left, B right), for the explorer's compare mode and the
    report: one row per step, coloured by what differs, the first divergence marked, the final
    answers last. A frame from ``sample_diff`` without a pair renders its message."""
    at = diff.attrs
    if diff.empty:
        return (f"{DIFF_STYLE}<div class='{NO_MATH}'><p class='rl-note'>"
                f"{esc(at.get('message') or 'Nothing to compare.')}</p></div>")

    def head(side: str) -> str:
        score = at.get(f"score_{side}")
        score_text = "" if missing(score) else f"{float(score):.3g}"
        return (f"<b>{esc(at.get(f'run_{side}'))}</b> · sample {esc(at.get(f'sample_id_{side}'))} · attempt "
                f"{esc(at.get(f'attempt_{side}'))} · {esc(at.get(f'status_{side}'))} · score {esc(score_text)} · "
                f"{esc(at.get(f'n_tool_calls_{side}'))} calls<br><small>{esc(at.get(f'rollout_{side}'))}</small>")

    counts = at.get("counts", {})
    summary = ", ".join(f"{n} {OP_WORDS[op]}" for op, n in counts.items() if n)
    first = at.get("first_divergence")
    where = "the trajectories never diverge" if first is None else f"they diverge at step {first}"
    rows = []
    for r in diff.itertuples():
        cls = f"rl-op-{r.op}" + (" rl-first" if r.first_divergence else "")
        marker = " ▶" if r.first_divergence else ""
        if r.kind == "final":
            rows.append(f"<tr class='{cls}'><td class='rl-step'>answer{marker}</td>"
                        f"<td class='rl-a'><pre>{esc(r.a_output, 2000)}</pre></td>"
                        f"<td class='rl-b'><pre>{esc(r.b_output, 2000)}</pre></td></tr>")
            continue
        title = esc(OP_WORDS.get(r.op, r.op) + (" (and its outcome)" if r.op == "arguments" and r.outcome_differs else "")
                    + (" (the other side made this call at another step)" if r.moved else ""))
        marker += " ↕" if r.moved else ""
        rows.append(f"<tr class='{cls}' title='{title}'><td class='rl-step'>{int(r.step)}{marker}</td>"
                    f"<td class='rl-a'>{_cell(r, 'a')}</td><td class='rl-b'>{_cell(r, 'b')}</td></tr>")
    message = f"<p>{esc(at['message'])}</p>" if at.get("message") else ""
    if at.get("not_aligned"):
        message += f"<p class='rl-note'>{esc(at['not_aligned'])}.</p>"
    return (f"{DIFF_STYLE}<div class='{NO_MATH}'>{message}<p>{esc(summary)}; {esc(where)}.</p>"
            f"<table class='rl-diff'><tr><th class='rl-step'>step</th><th>A: {head('a')}</th>"
            f"<th>B: {head('b')}</th></tr>{''.join(rows)}</table></div>")


def modes_html(diff: pd.DataFrame, examples: dict[str, str] | None = None, top: int = 6) -> str:
    """The top modes of a ``failure_modes_diff`` (or ``failure_modes``) frame as an escaped HTML
    table: label, shares (with CIs), verdict, and one example rollout each (``examples``: mode ->
    a line of text to show, e.g. the example's call sequence; default: its rollout id)."""
    if diff is None or diff.empty:
        return f"<div class='{NO_MATH}'><p>No failures.</p></div>"
    is_diff = "verdict" in diff.columns
    rows = []
    for r in diff.head(top).itertuples():
        if is_diff:
            shares = (f"{r.base_share:.0%} [{r.base_ci_low:.0%}, {r.base_ci_high:.0%}] → {r.candidate_share:.0%} "
                      f"[{r.candidate_ci_low:.0%}, {r.candidate_ci_high:.0%}]")
            ex_ids = list(r.examples_base) + list(r.examples_candidate)
            extra = f"<td>{esc(r.verdict)}</td>"
        else:
            shares = f"{r.share_of_failures:.0%} [{r.share_ci_low:.0%}, {r.share_ci_high:.0%}]"
            ex_ids = list(r.examples)
            extra = ""
        example = (examples or {}).get(r.mode) or (ex_ids[0] if ex_ids else "")
        rows.append(f"<tr><td>{esc(r.mode)}</td><td>{esc(r.label)}</td><td>{esc(shares)}</td>{extra}"
                    f"<td><code>{esc(example, 300)}</code></td></tr>")
    heads = ["mode", "what sets it apart", "share of failures [95% CI]"] + (["verdict"] if is_diff else []) + ["example"]
    return (f"<div class='{NO_MATH}'><table class='rl-modes'><tr>{''.join(f'<th>{h}</th>' for h in heads)}</tr>"
            f"{''.join(rows)}</table></div>")

"""The page every section is written on: its CSS and print script, tables and figures for people (long
text opens on a click, numbers through ``fmt``, every log string escaped), ``fragment`` for notebooks.
"""
from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd

from ...analysis.readiness import SHARE_CHECKS, check_value  # noqa: F401  (re-exported by the report)
from ...text import fmt
from ...text.htmltext import esc as _e, missing

# Figures are drawn this wide (CSS px) for print: A4 and US Letter both hold 680 px between 12 mm
# margins (A4: 703 px, Letter: 725 px).
PRINT_WIDTH_PX = 680
# Long text (answers, audit reasons) in a table is shown whole in a row of its own; beyond this
# many characters it opens on a click (and is cut at LONG_TEXT_MAX, saying so).
LONG_TEXT_OPEN = 600
LONG_TEXT_MAX = 20_000
SHORT_WORD = 20  # a cell of one word up to this long (a sample id) is never broken across lines

# The parts of the report (tables, verdict, cards, readiness): one rule per line, so that
# ``fragment`` can scope them for a notebook.
PARTS_CSS = """
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:10px 14px;min-width:180px;max-width:100%;box-sizing:border-box}
.card .v{font-size:22px;font-weight:600}
.card .d{color:#555;font-size:13px}
table{border-collapse:collapse;font-size:13px;max-width:100%;margin:6px 0}
td,th{border-bottom:1px solid #e5e5e5;padding:3px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{font-weight:600;overflow-wrap:normal;word-break:normal}
td.n{text-align:right;white-space:nowrap}
td.w{white-space:nowrap}
tr.has-more td{border-bottom:none}
tr.more td{color:#333;background:#fafafa;font-size:12.5px}
tr.more .k{color:#666;font-weight:600;margin-right:4px}
.long{white-space:pre-wrap;overflow-wrap:anywhere}
.note{color:#555;font-size:13px}
.verdict{font-size:18px;line-height:1.4;margin:12px 0}
.verdict strong{font-size:20px}
ul.caveats{list-style:none;padding-left:0;margin:8px 0}
ul.caveats li{padding:4px 0 4px 26px;position:relative;font-size:14px}
ul.caveats li::before{position:absolute;left:4px;font-weight:700}
ul.caveats li.concern::before{content:"!";color:#D55E00}
ul.caveats li.ok{color:#555}
ul.caveats li.ok::before{content:"\\2713";color:#009E73}
.st{font-weight:700;white-space:nowrap;border-left:6px solid #999;padding-left:6px}
.st.pass{border-color:#009E73}
.st.warn{border-color:#E69F00}
.st.fail{border-color:#D55E00}
.st.skip{border-color:#999;color:#777}
.thr{color:#777;font-size:12px}
details summary{cursor:pointer}
"""
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:24px auto;padding:0 16px;color:#222;overflow-wrap:break-word}
h1{margin-bottom:0}.sub{color:#666;margin-top:4px}section{margin-top:28px}
nav.toc{font-size:13px;color:#555;margin:10px 0;line-height:1.7}nav.toc a{white-space:nowrap}
.failed{color:#D55E00}
""" + PARTS_CSS + """
@media print{
@page{margin:12mm}
body{max-width:none;margin:0;padding:0;font-size:12px}
h2,h3{break-after:avoid}section{margin-top:16px}
.js-plotly-plot,.plotly-graph-div,.card,tr,ul.caveats li,.verdict{break-inside:avoid}
.keep{break-inside:avoid}.modebar,.modebar-container,.no-print{display:none!important}
details>summary{list-style:none;font-weight:600;cursor:auto}details>summary::-webkit-details-marker{display:none}
table{width:100%;font-size:11px}a{color:inherit;text-decoration:none}
}
"""
NO_MATH = "tex2jax_ignore mathjax_ignore"  # MathJax 2 and 3+ leave "$28.9M … $17.7M" alone (notebooks)


def fragment(html: str) -> str:
    """Parts of the report (``verdict_html``, ``readiness_html``, ``suspects_html`` ...) for a
    notebook: with their styles scoped to them, and kept from MathJax."""
    rules = []
    for line in PARTS_CSS.strip().splitlines():
        selectors, body = line.split("{", 1)
        rules.append(",".join(f".rl-report {sel.strip()}" for sel in selectors.split(",")) + "{" + body)
    return f"<style>{''.join(rules)}</style><div class='rl-report {NO_MATH}'>{html}</div>"


# Figures sized for the page when printing ("Save as PDF", or write_pdf's #print), and folded text
# opened; back as they were afterwards.
PRINT_JS = """
(function(){
  var W = %d, opened = [];
  function figures(){ return window.Plotly ? document.querySelectorAll('.js-plotly-plot') : []; }
  function forPrint(){
    document.querySelectorAll('details:not([open])').forEach(function(d){ d.open = true; opened.push(d); });
    figures().forEach(function(f){ Plotly.relayout(f, {width: W, autosize: false}); });
  }
  function forScreen(){
    opened.forEach(function(d){ d.open = false; }); opened = [];
    figures().forEach(function(f){ Plotly.relayout(f, {width: null, autosize: true}); });
  }
  window.addEventListener('beforeprint', forPrint);
  window.addEventListener('afterprint', forScreen);
  if (location.hash === '#print') window.addEventListener('load', forPrint);
})();
""" % PRINT_WIDTH_PX


# --- numbers and tables for people -------------------------------------------------------------

def _plain(v):
    """numpy scalars as Python ones (fmt tells ints from floats by their Python type)."""
    return v.item() if isinstance(v, np.generic) else v


def _cell(v) -> str:
    """Any cell as text: numbers by fmt, times to the minute, lists joined."""
    v = _plain(v)
    if isinstance(v, (list, tuple, np.ndarray)):
        return ", ".join(str(_plain(x)) for x in v)
    if isinstance(v, (pd.Timestamp, datetime)):
        return f"{v:%Y-%m-%d %H:%M}"
    if missing(v):
        return fmt.MISSING
    return fmt.value(v)


def long_text(value) -> str:
    """Log text (escaped) shown whole and wrapped; very long text opens on a click."""
    if missing(value):
        return ""
    text = str(value)
    cut = len(text) > LONG_TEXT_MAX
    shown = _e(text[:LONG_TEXT_MAX]) + (f" [cut at {LONG_TEXT_MAX:,} of {len(text):,} characters: the whole text "
                                        "is in the explorer]" if cut else "")
    if len(text) <= LONG_TEXT_OPEN:
        return f"<span class='long'>{shown}</span>"
    return f"<details><summary>show all {len(text):,} characters</summary><div class='long'>{shown}</div></details>"


def _table(df: pd.DataFrame, kinds: dict | None = None, long: tuple = (), headers: dict | None = None,
           numeric: tuple = ()) -> str:
    """An HTML table for people: each cell through its column's formatter in ``kinds`` (default:
    ``fmt`` by type), escaped; the ``long`` columns (answers, reasons) in a full-width row under
    their row, wrapped, never cut into a narrow column. Numbers (and the ``numeric`` columns,
    already formatted) are right-aligned."""
    kinds, headers = kinds or {}, headers or {}
    short = [c for c in df.columns if c not in long]
    head = "".join(f"<th>{_e(headers.get(c, str(c).replace('_', ' ')))}</th>" for c in short)
    body = []
    for values in df.itertuples(index=False, name=None):
        row = dict(zip(df.columns, values))
        cells = []
        for c in short:
            v = _plain(row[c])
            text = kinds[c](v) if c in kinds else _cell(v)
            number = c in numeric or isinstance(v, (int, float)) and not isinstance(v, bool)
            word = len(text) <= SHORT_WORD and not any(ch.isspace() for ch in text)  # an id: kept on one line
            cells.append(f"<td class='n'>{_e(text)}</td>" if number else
                         f"<td class='w'>{_e(text)}</td>" if word else f"<td>{_e(text)}</td>")
        more = [(c, row[c]) for c in long if not missing(row[c]) and str(row[c]).strip()]
        row_class = " class='has-more'" if more else ""
        body.append(f"<tr{row_class}>{''.join(cells)}</tr>")
        if more:
            body.append(f"<tr class='more'><td colspan='{len(short)}'>" + "".join(
                f"<div><span class='k'>{_e(headers.get(c, str(c).replace('_', ' ')))}:</span>{long_text(v)}</div>"
                for c, v in more) + "</td></tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _keep(html: str) -> str:
    """A heading, its note and its figure on one printed page."""
    return f"<div class='keep'>{html}</div>"


def _figure(fig) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True})

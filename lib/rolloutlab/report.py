"""The stakeholder report: one self-contained HTML file (plotly's JavaScript inlined once, no
external requests), built from the same functions as the notebooks.

The first screen is the verdict in words (``verdict``): the score change with its CI, and beside
it every reason the workbench knows not to trust it yet (reward-hacking suspects of the candidate,
its readiness warnings, grader disagreement, infra errors that differ between the runs,
truncation, samples only one run evaluated), one line each with a link to its section. Then the
readiness of both runs side by side, variance, tool calls, latency, per-sample changes, what to
train on next (curation), graders and their calibration against people's labels, the suspects, how
the runs fail (failure modes), tool endpoint load, cost, training curves, what the trainer
reported, methods. The headline also says which differences the comparison could detect (power).
A contents line links every section; a section that cannot be built says why in its place and
the rest of the report is written.

Notebook 06-report shows the same verdict, readiness, suspects and endpoint load (through the
``*_html`` functions here) with static figures; the interactive figures are only in the report.

Every string from the logs is HTML-escaped; figures get escaped text from plots.interactive.
Numbers are shown for people (``fmt``); the frames behind them keep full values. A print
stylesheet and ``write_pdf`` (headless Chromium) give clean PDF pages.
"""
from __future__ import annotations

import functools
import os
import shutil
import shlex
import subprocess
import tempfile
import warnings
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
from scipy.stats import fisher_exact
from tqdm.auto import tqdm

from . import catalog, config, fmt
from .fmt import unit_diff, unit_interval, unit_value
from .compare import (GRADER_PREFIX, MEAN_OF_SAMPLE_MEANS, RATIO_METRICS, by_step, compare, compare_without,
                      distribution_shift, sample_deltas, significance)
from .metrics.costs import truncation, unknown_words_text
from .metrics.training import training_metrics
from .metrics.common import training_runs
from .metrics import capacity, capacity_change, grader_stats, latency, latency_ecdf, sample_stats, summary
from .audit import audit, audit_counts
from .readiness import check
from .htmltext import esc as _e, missing
from .version import __version__ as VERSION

# Figures are drawn this wide (CSS px) for print: A4 and US Letter both hold 680 px between 12 mm
# margins (A4: 703 px, Letter: 725 px).
PRINT_WIDTH_PX = 680
# Long text (answers, audit reasons) in a table is shown whole in a row of its own; beyond this
# many characters it opens on a click (and is cut at LONG_TEXT_MAX, saying so).
LONG_TEXT_OPEN = 600
LONG_TEXT_MAX = 20_000
SHORT_WORD = 20  # a cell of one word up to this long (a sample id) is never broken across lines
# Readiness checks whose value is a share of 0..1 (shown as a percentage); the others are counts
# or plain numbers.
SHARE_CHECKS = {"signal_share", "saturation", "infra_errors", "ungraded", "rejected_records", "long_tail",
                "tool_budget"}
# Truncated rollouts (stopped by a turn, token or time limit) count with the score they ended
# with: a caveat when more than this share of either run's rollouts were truncated.
TRUNCATED_WARN = 0.01
# Infra errors and never-graded rollouts are a caveat when their share differs between the runs at
# this p-value (Fisher's exact test over rollouts), or a readiness check warns on them.
INFRA_DIFFER_P = 0.05
# Readiness checks the verdict weighs in a line of their own (graders, infra errors; power: the
# headline's one detectable-difference line, from the two runs' observed correlation).
_OWN_TOPIC = {"graders", "infra_errors", "ungraded", "power"}
# Metrics where a rise is an improvement, and where a fall is; the verdict says "better" / "worse"
# by them (any other primary: "higher" / "lower").
HIGHER_IS_BETTER = {"score", "pass@1", "best_of_n"}
LOWER_IS_BETTER = {"tool_calls_per_rollout", "long_tail_share", "truncated_share", "turns_per_rollout",
                   "tokens_per_rollout", "cost_per_rollout", "cost_per_solved", "infra_error_rate", "latency_p50",
                   "latency_p95"}
# The failure-mode section resamples at most this many times (the fit dominates its time; its
# CIs only sort modes into fixed / unchanged / grew), and shows this many modes.
FAILURE_N_BOOT = 200
FAILURE_TOP = 8
# What each curation verdict means, for the "What to train on next" table.
CURATION_WORDS = {
    "keep": "learning signal: attempts disagree, the pass rate lies inside the band",
    "too_easy": "passed every attempt: nothing left to learn",
    "too_hard": "never passed: no signal",
    "outside_band": "passes and fails, but outside the band",
    "few_attempts": "too few counted attempts to tell",
    "infra": "every rollout an infra error or never graded: unknown, not hard",
    "suspect": "a rollout the audit flags (only with drop_suspects)",
    "duplicate": "the same prompt as a kept sample",
}
CURATE_FORMATS = "openai-rft|verl|trl|jsonl"

CHROMIUM_ENV_VAR, CHROMIUM_NAMES, CHROMIUM_ARGS = config.CHROMIUM_ENV_VAR, config.CHROMIUM_NAMES, config.CHROMIUM_ARGS
PDF_TIMEOUT_S = 180

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


def check_value(check_name: str, value) -> str:
    """A readiness check's value as people read it: shares as percentages, counts with separators."""
    value = _plain(value)
    if missing(value):
        return ""
    return fmt.share(value) if check_name in SHARE_CHECKS else fmt.number(value)


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


# --- the verdict ---------------------------------------------------------------------------------

VERDICT_COLUMNS = ["topic", "concern", "count", "line", "condition", "section", "section_title"]


def _share_of(n, total) -> str:
    return f"{fmt.count(n)} of {fmt.count(total)} ({fmt.share(n / total)})" if total else fmt.count(n)


def two_runs(con: duckdb.DuckDBPyConnection, base: str, candidate: str) -> tuple[str, str]:
    """``base`` and ``candidate`` as run names; a report of a run against itself is refused (its
    difference is 0 by construction, and a headline would read as a finding)."""
    from .metrics.common import resolve_runs

    base, candidate = resolve_runs(con, [base, candidate])
    if base == candidate:
        raise ValueError(f"base and candidate are the same run ({base}): a run against itself differs by nothing; "
                         "give the checkpoint to compare with as --candidate (rolloutlab runs lists the runs)")
    return base, candidate


def verdict(con: duckdb.DuckDBPyConnection, base: str, candidate: str, cmp: pd.DataFrame | None = None, *,
            suspects: pd.DataFrame | None = None, checks: dict[str, pd.DataFrame] | None = None,
            n_boot: int = 2000) -> pd.DataFrame:
    """The headline in words and every reason not to trust it yet: one row per topic the
    workbench checked (``topic, concern, count, line, condition, section, section_title``), the
    concerns first. ``attrs``: ``verdict`` (the sentence), ``direction`` (better / worse / no
    clear change), ``concerns``. ``line`` and ``verdict`` are plain text (escape them to show).

    Topics: reward-hacking suspects of the candidate (``audit`` with the base); each readiness
    check of the candidate that warns or fails (``check``); grader disagreement (the ``graders``
    check, ``grader_stats(...).attrs["pairs"]``); infra errors and never-graded rollouts (a
    concern when their share differs between the runs, Fisher's exact test p < ``INFRA_DIFFER_P``,
    or a readiness check of either run warns on them); truncated rollouts (a concern above
    ``TRUNCATED_WARN`` of either run, counting stop reasons rolloutlab does not know, which it names); samples only one run scored. ``cmp``, ``suspects``, ``checks`` (run -> ``check``
    frame) are computed when not given."""
    base, candidate = two_runs(con, base, candidate)
    cmp = require_shared(compare(con, base, candidate, n_boot=n_boot) if cmp is None else cmp)
    suspects = audit(con, candidate, base=base) if suspects is None else suspects
    checks = {run: check(con, run) for run in (base, candidate)} if checks is None else checks
    counts = summary(con, [base, candidate]).set_index("run")
    rows: list[dict] = []

    def add(topic, concern, count, line, condition, section, title):
        rows.append(dict(zip(VERDICT_COLUMNS, (topic, bool(concern), count, line, condition, section, title))))

    # reward-hacking suspects
    n = len(suspects)
    if n:
        by_check = audit_counts(suspects)
        by_check = by_check[by_check.rollouts > 0]
        flagged = ", ".join(f"{c} {fmt.count(k)}" for c, k in zip(by_check.check, by_check.rollouts))
        line = (f"{fmt.count(n)} reward-hacking suspects among {candidate}'s rollouts, flagged by: {flagged} "
                "(a rollout can be flagged by several checks).")
        injected = suspects[suspects.checks.map(lambda c: "grader_injection" in list(c))]
        answers = [a for a in injected.final_answer if not missing(a) and str(a).strip()]
        if len(injected):
            example = str(answers[0]).strip() if answers else ""
            example = example if len(example) <= 160 else example[:160].rsplit(" ", 1)[0] + " …"
            line += (f" {fmt.count(len(injected))} of them talk to the grader"
                     + (f", e.g. “{example}”" if example else "."))
        without = _without_suspects(con, base, candidate, cmp, suspects)
        if without is not None:
            line += " " + without_words(without)
        add("audit", True, n, line, f"the {fmt.count(n)} audit suspects are honest", "suspects",
            "Reward-hacking suspects")
    else:
        add("audit", False, 0, f"The reward-hacking audit flags none of {candidate}'s rollouts.", "",
            "suspects", "Reward-hacking suspects")

    # readiness of the candidate
    cand = checks[candidate]
    bad = cand[cand.status.isin(["warn", "fail"]) & ~cand.check.isin(_OWN_TOPIC)]
    for r in bad.itertuples():
        value = check_value(r.check, r.value)
        add(f"readiness:{r.check}", True, _plain(r.value),
            f"Readiness of {candidate}: {r.check} {r.status}s{f' ({value})' if value else ''}: {r.advice}",
            f"{candidate}'s {r.check} {'warning' if r.status == 'warn' else 'failure'} does not bias the score",
            f"readiness-{r.check}",
            f"Readiness: {r.check}")
    if bad.empty:
        passed = (~cand.status.isin(["warn", "fail"])).sum()
        add("readiness", False, 0, f"Readiness of {candidate}: no check warns or fails ({passed} pass or skip).",
            "", "readiness", "Readiness")

    # graders
    graders_check = cand.set_index("check").loc["graders"] if "graders" in set(cand.check) else None
    stats = grader_stats(con, candidate)
    pairs = stats.attrs["pairs"]
    n_min = config.CHECK_THRESHOLDS["grader_min_rollouts"]
    pairs = pairs[pairs.rollouts >= n_min]
    worst = pairs.sort_values(["disagree_share", "rollouts"], ascending=False).iloc[0] if len(pairs) else None
    if graders_check is not None and graders_check.status in ("warn", "fail"):
        most = ("" if worst is None else f"the largest pass/fail disagreement is {worst.grader_a} vs "
                f"{worst.grader_b}, {_share_of(worst.n_disagree, worst.rollouts)} rollouts. ")
        add("graders", True, _plain(graders_check.value),
            f"Graders of {candidate}: {most}{graders_check.advice} ({graders_check.details})",
            f"{candidate}'s graders measure what you mean", "graders", "Graders")
    elif worst is not None:
        add("graders", False, _plain(worst.disagree_share),
            f"Graders of {candidate}: the largest pass/fail disagreement is {worst.grader_a} vs {worst.grader_b}, "
            f"{_share_of(worst.n_disagree, worst.rollouts)} rollouts, below the "
            f"{fmt.share(config.CHECK_THRESHOLDS['grader_disagree_warn'])} at which the graders check warns.",
            "", "graders", "Graders")
    elif not stats.empty:
        add("graders", False, 0, f"One grader scores {candidate}: nothing to disagree with.", "", "graders",
            "Graders")

    # infra errors and never-graded rollouts
    def excluded(run):
        c = counts.loc[run]
        return int(c.n_infra_error) + int(c.n_ungraded), int(c.rollouts)

    (eb, tb), (ec, tc) = excluded(base), excluded(candidate)
    # over every rollout of both runs (compare's infra_error_rate sees only the samples both runs
    # scored, so a sample whose every rollout failed is not in it)
    p_infra = fisher_exact([[eb, tb - eb], [ec, tc - ec]]).pvalue if tb and tc and eb + ec else 1.0
    differs = p_infra < INFRA_DIFFER_P
    warned = [f"{run}'s {c}" for run in (base, candidate) for c, s in zip(checks[run].check, checks[run].status)
              if c in ("infra_errors", "ungraded") and s in ("warn", "fail")]
    line = (f"Infra errors and never-graded rollouts, left out of the scores: {_share_of(eb, tb)} in {base}, "
            f"{_share_of(ec, tc)} in {candidate}")
    if differs or warned:
        why = []
        if differs:
            why.append(f"the share differs between the runs ({fmt.points(ec / tc - eb / tb)}, Fisher's exact "
                       f"test {fmt.pvalue(p_infra)})")
        if warned:
            why.append("readiness warns on " + ", ".join(warned))
        add("infra", True, ec + eb, line + f": {'; '.join(why)}. If the failures hit hard or easy samples, the "
            "two scores describe different subsets.", "the infra errors hit easy and hard samples alike",
            "methods-rollouts", "Methods: rollouts")
    else:
        add("infra", False, ec + eb, line + ": few, and no clear difference between the runs.", "",
            "methods-rollouts", "Methods: rollouts")

    # truncation
    trunc = {run: (int(counts.loc[run].n_truncated), int(counts.loc[run].rollouts)) for run in (base, candidate)}
    said = f"{_share_of(*trunc[base])} in {base}, {_share_of(*trunc[candidate])} in {candidate}"
    # stop words rolloutlab does not know are counted as not cut: said, with their counts
    stops = truncation(con, [base, candidate]).set_index("run")
    unknown = {run: (int(stops.loc[run].unknown_stop), stops.loc[run].unknown_words) for run in (base, candidate)
               if run in stops.index and stops.loc[run].unknown_stop}
    if unknown:
        said += ("; counted as not cut, though their producer's stop reason is one rolloutlab does not know: "
                 + ", ".join(f"{fmt.count(n)} in {run} ({unknown_words_text(words)})"
                             for run, (n, words) in unknown.items()))
    if any(t and (n + unknown.get(run, (0,))[0]) / t > TRUNCATED_WARN for run, (n, t) in trunc.items()):
        add("truncation", True, sum(n for n, _ in trunc.values()),
            f"Truncated rollouts (stopped by a turn, token or time limit, scored as they ended): {said}. A run "
            "that hits its limits more often loses score to them: part of the difference may be the limit, "
            "not the model.", "the limits treat both runs alike", "methods-rollouts", "Methods: rollouts")
    else:
        add("truncation", False, sum(n for n, _ in trunc.values()), f"Truncated rollouts: {said}.", "",
            "methods-rollouts", "Methods: rollouts")

    # coverage
    a = cmp.attrs
    if a["base_only"] or a["candidate_only"] or a.get("unscored"):
        only = [f"{fmt.count(k)} only by {run}" for k, run in ((a["base_only"], base),
                                                                (a["candidate_only"], candidate)) if k]
        if a.get("unscored"):
            only.append(f"{fmt.count(a['unscored'])} by both but without a counted rollout in one of them "
                        "(every rollout an infra error or ungraded)")
        add("coverage", True, a["base_only"] + a["candidate_only"] + a.get("unscored", 0),
            f"Samples: {fmt.count(a['shared_samples'])} scored by both runs; {'; '.join(only)}. The difference "
            "is over the samples both scored.", "the samples left out would not change it", "headline-cards",
            "Headline")

    df = pd.DataFrame(rows, columns=VERDICT_COLUMNS)
    df = df.sort_values("concern", ascending=False, kind="stable").reset_index(drop=True)
    df.attrs["without_suspects"] = without if n else None
    df.attrs.update(verdict_sentence(cmp, df, base, candidate))
    return df


def _without_suspects(con, base, candidate, cmp, suspects) -> pd.DataFrame | None:
    """``compare_without`` of the suspects for ``cmp``'s primary (None when it is a latency or
    grader row, which that cannot recompute)."""
    a = cmp.attrs
    primary = a.get("primary", "score")
    if primary not in RATIO_METRICS:
        return None
    return compare_without(con, base, candidate, suspects.rollout_id, pass_threshold=a.get("pass_threshold"),
                           ci=a.get("ci", 0.95), include_errors=a.get("include_errors", False), primary=primary)


def _survives(row: pd.Series, direction: str, primary: str) -> bool:
    """Whether a ``compare_without`` row still says ``direction`` (significant, same sign)."""
    if not bool(row.significant) or missing(row["diff"]):
        return direction == "no clear change" and not bool(row.significant)
    up = row["diff"] > 0 if primary not in LOWER_IS_BETTER else row["diff"] < 0
    return direction == ("better" if up else "worse")


def without_words(without: pd.DataFrame) -> str:
    """The primary's difference with the suspects left out and counted as failures, in words."""
    a = without.attrs
    level = f"{fmt.number(100 * a.get('ci', 0.95))}% CI"
    parts = []
    for r in without.itertuples():
        clear = "" if r.significant else ", no clear change"
        parts.append(f"{r.treated_as}, {unit_diff(r.diff, r.unit)} ({level} "
                     f"{unit_interval(r.ci_low, r.ci_high, r.unit)}{clear})")
    return f"The {metric_label(a['primary']).lower()} difference with them " + "; ".join(parts) + "."


def metric_label(metric: str) -> str:
    """A compare metric as the verdict and the cards name it: the score says which mean it is."""
    if metric == "score":
        return f"Score ({MEAN_OF_SAMPLE_MEANS})"
    return metric[len(GRADER_PREFIX):] + " (grader)" if metric.startswith(GRADER_PREFIX) else metric


def verdict_sentence(cmp: pd.DataFrame, df: pd.DataFrame, base: str, candidate: str) -> dict:
    """The verdict in words from ``compare``'s primary row (the score by default) and the verdict
    rows (``VERDICT_COLUMNS``): ``verdict`` (the whole sentence), its parts ``lead``, ``rest``,
    ``change``; ``direction``, ``concerns``, ``primary``. "better" or "worse" only where the primary
    row is ``significant`` (its own test, alone at alpha; its CI inverts the same test, so the two
    agree), and "better" never bare when a concern stands: it is conditioned on the first one."""
    a = cmp.attrs
    primary = a.get("primary", "score")
    row = cmp.set_index("metric").loc[primary]
    unit = row.get("unit", "score")
    level = f"{fmt.number(100 * a.get('ci', 0.95))}% CI"
    change = (f"{metric_label(primary)} {unit_value(row.base, unit)} → {unit_value(row.candidate, unit)}: "
              f"{unit_diff(row['diff'], unit)}, {level} {unit_interval(row.ci_low, row.ci_high, unit)}"
              + ("" if missing(row.p_value) else f", {fmt.pvalue(row.p_value)}") + ".")
    concerns = df[df.concern]
    n = len(concerns)
    up = bool(row.significant) and row["diff"] > 0
    down = bool(row.significant) and row["diff"] < 0
    if primary in LOWER_IS_BETTER:
        up, down = down, up
    judged = primary in HIGHER_IS_BETTER | LOWER_IS_BETTER or primary.startswith(GRADER_PREFIX)
    if up:
        direction = "better"
        lead = f"{candidate} is better than {base}" if judged else f"{candidate} is higher than {base} in {primary}"
    elif down:
        direction = "worse"
        lead = f"{candidate} is worse than {base}" if judged else f"{candidate} is lower than {base} in {primary}"
    else:
        direction, lead = "no clear change", f"No clear difference between {candidate} and {base}"
    if not n:
        rest = ": nothing else the workbench checks argues against it."
    elif direction == "better":
        first = concerns.iloc[0]
        without = df.attrs.get("without_suspects")
        more = f" ({n - 1} more caveat{'s' if n > 2 else ''} below)." if n > 1 else "."
        if first.topic == "audit" and without is not None and len(without):
            kept = [r.treated_as for _, r in without.iterrows() if _survives(r, direction, primary)]
            suspects = f"{fmt.count(first['count'])} audit suspects"
            if len(kept) == len(without):
                rest = f", even with its {suspects} left out or counted as failures" + more
            else:
                lost = without[~without.treated_as.isin(kept)].iloc[0]
                rest = (f", if {first.condition}: with them {lost.treated_as}, the difference is "
                        f"{unit_diff(lost['diff'], lost.unit)} ({level} {unit_interval(lost.ci_low, lost.ci_high, lost.unit)})"
                        f"{'' if lost.significant else ', no clear change'}; read them first" + more)
        else:
            rest = (f", if {first.condition}: read {'them' if first.topic == 'audit' else 'the caveats below'} first"
                    + more)
    elif direction == "worse":
        rest = f"; {n} caveat{'s' if n > 1 else ''} below may explain part of it."
    else:
        rest = (f" (p > {fmt.number(a.get('alpha', 0.05))}: the {level} includes 0); read the {n} "
                f"caveat{'s' if n > 1 else ''} below before concluding.")
    return {"verdict": f"{lead}{rest} {change}", "lead": lead, "rest": rest, "change": change,
            "direction": direction, "concerns": int(n), "primary": primary}


def verdict_html(v: pd.DataFrame, links: bool = True) -> str:
    """The verdict sentence and one line per topic (concerns first), escaped; with ``links`` each
    line links to its report section (in a notebook, it names it)."""
    a = v.attrs
    items = []
    for r in v.itertuples():
        where = (f" <a href='#{_e(r.section)}'>→ {_e(r.section_title)}</a>" if links else
                 f" <span class='thr'>(→ {_e(r.section_title)})</span>")
        kind = "concern" if r.concern else "ok"
        items.append(f"<li class='{kind}' data-topic='{_e(r.topic)}'>{_e(r.line)}{where}</li>")
    title = "Before you trust it" if a["concerns"] else "What else was checked"
    return (f"<p class='verdict'><strong>{_e(a['lead'])}</strong>{_e(a['rest'])} {_e(a['change'])}</p>"
            f"<h3>{title}</h3><ul class='caveats'>{''.join(items)}</ul>")


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


# --- sections ------------------------------------------------------------------------------------

def headline_html(cmp: pd.DataFrame) -> str:
    """The headline cards: score with its CI and p-value, wins / ties / losses, tool calls, P95
    latency, tokens; and which samples both runs evaluated."""
    row, a = cmp.set_index("metric"), cmp.attrs
    score = row.loc["score"]
    p = "" if missing(score.p_value) else f", {fmt.pvalue(score.p_value)}"
    cards = [
        (metric_label("score"), f"{fmt.number(score.base)} → {fmt.number(score.candidate)}",
         f"{fmt.signed(score['diff'])} (95% CI {fmt.signed(score.ci_low)} to {fmt.signed(score.ci_high)}{p})"),
        ("Per sample", f"{a['wins']:,} / {a['ties']:,} / {a['losses']:,}", "better / unchanged / worse"),
    ]
    for metric, label in (("tool_calls_per_rollout", "Tool calls per rollout"), ("latency_p95", "P95 latency"),
                          ("tokens_per_rollout", "Tokens per rollout")):
        if metric not in row.index:
            continue
        m = row.loc[metric]
        if not (missing(m.base) or missing(m.candidate)):
            ci = ("" if missing(m.ci_low) else
                  f" (95% CI {unit_diff(m.ci_low, m.unit)} to {unit_diff(m.ci_high, m.unit)})")
            cards.append((label, f"{unit_value(m.base, m.unit)} → {unit_value(m.candidate, m.unit)}",
                          f"{unit_diff(m['diff'], m.unit)}{ci}"))
    body = "".join(f"<div class='card'><div>{_e(t)}</div><div class='v'>{_e(v)}</div><div class='d'>{_e(d)}</div></div>"
                   for t, v, d in cards)
    coverage = (f"{a['shared_samples']:,} samples evaluated by both runs"
                + (f"; {a['base_only']:,} only by {_e(a['base'])}" if a["base_only"] else "")
                + (f"; {a['candidate_only']:,} only by {_e(a['candidate'])}" if a["candidate_only"] else ""))
    return f"<div class='cards' id='headline-cards'>{body}</div><p class='note'>{coverage}.</p>"


def metrics_table(cmp: pd.DataFrame) -> str:
    """Every metric of ``compare``: base, candidate, change, 95% CI, p-value, by unit, and how it
    takes part in the decision (primary, the same numbers as the primary, constant)."""
    units = cmp.unit.tolist() if "unit" in cmp else [None] * len(cmp)
    shown = pd.DataFrame({
        "metric": cmp.metric,
        "base": [unit_value(v, u) for v, u in zip(cmp.base, units)],
        "candidate": [unit_value(v, u) for v, u in zip(cmp.candidate, units)],
        "change": [unit_diff(v, u) for v, u in zip(cmp["diff"], units)],
        "95% CI": [unit_interval(lo, hi, u) for lo, hi, u in zip(cmp.ci_low, cmp.ci_high, units)],
        "p": [fmt.pvalue(p) for p in cmp.p_value],
        "significant": ["yes" if s else "" for s in cmp.significant],
    })
    if "family" in cmp:
        role = {"primary": "primary: tested alone", "duplicate": f"= {cmp.attrs.get('primary', 'score')}",
                "constant": "constant: not tested"}
        shown["test"] = [role.get(f, "") for f in cmp.family]
        shown["metric"] = [metric_label(m) if m == "score" else m for m in cmp.metric]
    if "n_samples" in cmp:
        shown.insert(6, "samples", [fmt.count(n) for n in cmp.n_samples])
    return _table(shown, headers={"base": cmp.attrs.get("base", "base"),
                                  "candidate": cmp.attrs.get("candidate", "candidate")},
                  numeric=("base", "candidate", "change", "samples")) + f"<p class='note'>{_e(significance(cmp))}</p>"


def build_report(con: duckdb.DuckDBPyConnection, base: str, candidate: str, n_boot: int = 2000,
                 progress: bool | None = None, batch_size: int | None = None,
                 compute_multiplier: int | None = None) -> str:
    """The report as one HTML string. ``batch_size``/``compute_multiplier``: the training step the
    capacity section projects (default ``config.CAPACITY_PLANNED_STEP``)."""
    from plotly.offline import get_plotlyjs

    from .plots import interactive as pi

    base, candidate = two_runs(con, base, candidate)
    disable = config.progress_disabled() if progress is None else not progress
    sections: list[str] = []
    comparison = functools.cache(lambda: require_shared(compare(con, base, candidate, n_boot=n_boot)))
    suspects = functools.cache(lambda: audit(con, candidate, base=base))
    checks = functools.cache(lambda: {run: check(con, run) for run in (base, candidate)})
    power_line = functools.cache(lambda: _power_or_failure(con, base, candidate))
    steps = [
        ("headline", "Headline", lambda: _headline(con, base, candidate, comparison(), suspects(), checks(),
                                                   power_line())),
        ("readiness", "Readiness", lambda: _readiness(base, candidate, report_checks(checks(), power_line()[0]))),
        ("variance", "Variance", lambda: _keep(
            "<h2>Score per sample across attempts</h2><p class='note'>Only samples whose score varies across "
            "attempts give learning signal.</p>" + _figure(pi.variance({base: sample_stats(con, base),
                                                                        candidate: sample_stats(con, candidate)})))),
        ("tool calls", "Tool calls", lambda: _keep("<h2>Tool calls per rollout</h2>" + _figure(
            pi.tool_calls(distribution_shift(con, base, candidate), base, candidate)))),
        ("latency", "Latency", lambda: _keep("<h2>Latency</h2>" + _figure(pi.latency_ecdf(
            latency_ecdf(con, [base, candidate]), {r: latency(con, r, tool_n_boot=0) for r in (base, candidate)})))),
        ("per sample", "Per sample", lambda: _per_sample(con, base, candidate, pi)),
        ("train next", "What to train on next", lambda: curation_html(con, base, candidate)),
        ("graders", "Graders", lambda: _graders(con, base, candidate, comparison(), n_boot, pi)),
        ("calibration", "Graders against labels", lambda: calibration_html(con, base, candidate)),
        ("suspects", "Suspects", lambda: suspects_html(suspects(), candidate)),
        ("how it fails", "How it fails", lambda: failures_html(con, base, candidate, min(n_boot, FAILURE_N_BOOT))),
        ("capacity", "Endpoint load", lambda: capacity_html(con, base, candidate, batch_size, compute_multiplier)),
        ("cost", "Cost", lambda: cost_html(con, base, candidate, n_boot, batch_size, compute_multiplier)),
        ("training", "Training curves", lambda: _training(con, base, candidate, pi)),
        ("trainer", "Trainer", lambda: _trainer(con, pi)),
        ("methods", "Methods", lambda: methods_html(con, base, candidate, n_boot)),
    ]
    comparison()  # runs that are not there, or share no scored sample: an error, not a report of failed sections
    failed = []
    for name, heading, make in tqdm(steps, desc="report", unit="section", disable=disable):
        sections.append(f"<section id='{_section_id(name)}'>{_guarded(name, heading, make, failed)}</section>")
    contents = " · ".join(f"<a href='#{_section_id(name)}'>{_e(heading)}</a>"
                          + (" <span class='failed'>(failed)</span>" if name in failed else "")
                          for name, heading, _ in steps)
    title = f"{_e(base)} → {_e(candidate)}"
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>rolloutlab report: {title}</title>"
            f"<style>{CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            f"<h1>Fine-tuning report: {title}</h1><p class='sub'>rolloutlab {VERSION} · generated "
            f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC</p>"
            f"<nav class='toc no-print'><b>Contents</b>: {contents}</nav>{''.join(sections)}"
            f"<script type='text/javascript'>{PRINT_JS}</script></body></html>")


def _section_id(name: str) -> str:
    return name.replace(" ", "-")


def _guarded(name: str, heading: str, make, failed: list) -> str:
    """A section's HTML; a section that fails says why in its place (escaped) and is added to
    ``failed``, so that one broken section never costs the whole report."""
    try:
        return make()
    except NoSharedSamplesError:
        raise
    except Exception as exc:  # noqa: BLE001 (any error of one section; the others still show)
        failed.append(name)
        return failed_html(heading, exc)


def failed_html(heading: str, exc: BaseException) -> str:
    """The stand-in for a section that could not be built: its heading and the error, escaped."""
    return (f"<h2>{_e(heading)}</h2><p class='note failed'>This section could not be built: "
            f"{_e(type(exc).__name__)}: {_e(str(exc), 500)}. The rest of the report does not depend on it.</p>")


class NoSharedSamplesError(ValueError):
    """The two runs have no sample with a counted rollout under both: nothing to pair."""


def require_shared(cmp: pd.DataFrame) -> pd.DataFrame:
    """``compare``'s result, or an error that names both runs when they share no scored sample
    (every section pairs samples; without this, the first empty figure would blame one run)."""
    a = cmp.attrs
    if a["shared_samples"]:
        return cmp
    base, candidate = a["base"], a["candidate"]
    why = ("the report pairs each sample's scores under the two runs. Compare runs evaluated on the same "
           "samples (a base checkpoint and a fine-tuned one on one evaluation set)")
    if a["unscored"]:
        raise NoSharedSamplesError(
            f"{base} and {candidate} share {a['unscored']} samples, but none has a counted rollout in both runs "
            f"(infra errors and ungraded rollouts are not counted: see `rolloutlab summary`): {why}.")
    raise NoSharedSamplesError(
        f"{base} and {candidate} share no samples ({a['base_only']} samples only in {base}, "
        f"{a['candidate_only']} only in {candidate}): {why}.")


def _headline(con, base, candidate, cmp, suspects, checks, power_line=None) -> str:
    v = verdict(con, base, candidate, cmp, suspects=suspects, checks=checks)
    power = power_html(con, base, candidate) if power_line is None else _power_p(*power_line)
    return ("<h2>Headline</h2>" + verdict_html(v) + headline_html(cmp) + power
            + "<details><summary>All metrics</summary>" + metrics_table(cmp) + "</details>")


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
    from .power_analysis import detectable_sentence, power

    df = power(con, base, candidate)
    sentence = detectable_sentence(df)
    if df.attrs["no_estimate"]:
        return sentence
    return (f"{sentence} Planned for {df.attrs['decision']}. A true difference smaller than that can go unseen "
            "here: “no clear change” is not “no change”.")


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


def _per_sample(con, base, candidate, pi) -> str:
    deltas = sample_deltas(con, base, candidate)
    worst = deltas[deltas.outcome == "loss"].sort_values("score_diff").head(10)
    answers = con.execute(
        "SELECT run_id, sample_id, any_value(final_answer ORDER BY attempt) FROM rollouts "
        "WHERE list_contains(?, run_id) AND list_contains(?, sample_id) GROUP BY ALL",
        [[base, candidate], worst.sample_id.tolist()]).fetchall()
    answer = {(r, s): a for r, s, a in answers}
    shown = pd.DataFrame({
        "sample": worst.sample_id.to_numpy(),
        f"{base} score": worst.base_score.to_numpy(), f"{candidate} score": worst.candidate_score.to_numpy(),
        "change": [fmt.signed(d) for d in worst.score_diff],
        f"{base} answer": [answer.get((base, s)) for s in worst.sample_id],
        f"{candidate} answer": [answer.get((candidate, s)) for s in worst.sample_id]})
    table = (_table(shown, long=(f"{base} answer", f"{candidate} answer"), numeric=("change",)) if len(worst)
             else "<p>No sample got worse.</p>")
    return (_keep("<h2>Per sample</h2><p class='note'>Each point is a sample both runs evaluated: up is a better "
                  "score, left is fewer tool calls.</p>" + _figure(pi.quadrants(deltas, base, candidate)))
            + "<h3>Samples that got worse</h3><p class='note'>The ten largest drops, with each run's first "
              "answer.</p>" + table)


def _graders(con, base, candidate, cmp, n_boot, pi) -> str:
    stats = {run: grader_stats(con, run) for run in (base, candidate)}
    if all(df.empty for df in stats.values()):
        return "<h2>Graders</h2><p class='note'>No per-grader scores in these logs.</p>"
    per_grader = cmp[cmp.metric.str.startswith(GRADER_PREFIX)]
    pairs = stats[candidate].attrs["pairs"]
    parts = [_keep("<h2>Graders</h2><p class='note'>Each grader's mean score, pass rate and signal share (samples "
                   "whose score from that grader varies across attempts). A model can gain on one grader and lose "
                   f"on another: the table pairs each grader's per-sample score between the runs (95% CI, {n_boot:,} "
                   "resamples).</p>" + _figure(pi.graders({r: df for r, df in stats.items() if not df.empty})))]
    if len(per_grader):
        units = per_grader.unit if "unit" in per_grader else [None] * len(per_grader)
        shown = pd.DataFrame({
            "grader": per_grader.metric.str.slice(len(GRADER_PREFIX)).to_numpy(),
            base: [unit_value(v, u) for v, u in zip(per_grader.base, units)],
            candidate: [unit_value(v, u) for v, u in zip(per_grader.candidate, units)],
            "change": [unit_diff(v, u) for v, u in zip(per_grader["diff"], units)],
            "95% CI": [unit_interval(lo, hi, u) for lo, hi, u in zip(per_grader.ci_low, per_grader.ci_high, units)],
            "samples": [fmt.count(n) for n in per_grader.n_samples],
            "significant": ["yes" if s else "" for s in per_grader.significant]})
        parts.append(_table(shown, numeric=(base, candidate, "change", "samples"))
                     + f"<p class='note'>{_e(significance(cmp))}</p>")
    if len(pairs):
        parts.append(_keep(_figure(pi.grader_disagreement(pairs, candidate))))
    return "".join(parts)


def suspects_html(suspects: pd.DataFrame, candidate: str, top: int = 10) -> str:
    """The reward-hacking section: how many suspects, counts by check, the ``top`` ones with
    their reasons, the numbers behind them and the final answer in rows of their own."""
    head = ("<h2>Reward-hacking suspects</h2><p class='note'>Rollouts of the candidate to read first: the audit "
            "ranks, it does not accuse (definitions in docs/metrics.md). Open one in the explorer "
            "(notebook 01-explore, or rl.explore) to confirm.</p>")
    if suspects.empty:
        return head + f"<p>No suspects in {_e(candidate)}.</p>"
    counts = audit_counts(suspects)
    shown = suspects.head(top)
    table = pd.DataFrame({
        "rank": shown["rank"].to_numpy(), "rollout": shown.rollout_id.to_numpy(),
        "sample": shown.sample_id.to_numpy(), "score": shown.score.to_numpy(),
        "tool calls": shown.n_tool_calls.to_numpy(), "checks": [", ".join(c) for c in shown.checks],
        "why": shown.reason.to_numpy(), "numbers": shown.details.to_numpy(),
        "final answer": shown.final_answer.to_numpy()})
    return (head + f"<p>{fmt.count(len(suspects))} suspect rollouts in {_e(candidate)}.</p>"
            + _table(counts[counts.rollouts > 0], headers={"rollouts": "suspects"})
            + f"<h3>Top {min(top, len(suspects))} suspects</h3>"
            + _table(table, long=("why", "numbers", "final answer")))


def capacity_html(con, base, candidate, batch_size=None, compute_multiplier=None) -> str:
    """The tool endpoint load of both runs, observed and projected for a training step of
    ``batch_size`` x ``compute_multiplier`` rollouts (default ``config.CAPACITY_PLANNED_STEP``)."""
    if batch_size is None:
        batch_size, compute_multiplier = (config.CAPACITY_PLANNED_STEP["batch_size"],
                                          config.CAPACITY_PLANNED_STEP["compute_multiplier"])
    plans = [capacity(con, run, batch_size=batch_size, compute_multiplier=compute_multiplier).assign(run=run)
             for run in (base, candidate)]
    columns = {"run": "run", "tool": "tool", "calls_per_rollout": "calls per rollout",
               "latency_p50": "latency p50 (s)", "latency_p95": "latency p95 (s)",
               "peak_calls_in_flight": "peak in flight", "peak_calls_per_s": "peak calls/s",
               "projected_peak_calls_in_flight": "projected peak in flight",
               "projected_peak_calls_per_s": "projected calls/s"}
    table = pd.concat(plans)[list(columns)]
    step = plans[0].attrs["rollouts_per_step"]
    change = capacity_change(con, base, candidate, batch_size, compute_multiplier)
    return (f"<h2>Tool endpoint load</h2><p class='note'>For whoever runs the tool servers. Observed: what each "
            f"run asked of each endpoint (latency in seconds; peaks from a sweep over call start and end times). "
            f"Projected: a training step of {batch_size:,} × {compute_multiplier or 1:,} = {step:,} rollouts started "
            f"at once, each behaving like that run's ({step:,} sandboxes alive at once). An upper bound when the "
            "platform spreads the starts; the model and its measured error are in docs/metrics.md.</p>"
            f"<p id='capacity-change'>{_e(change.attrs['sentence'])}</p>"
            + _table(table, headers=columns))


# --- what to train on next, how it fails, cost, graders against labels -----------------------------

def curation_html(con: duckdb.DuckDBPyConnection, base: str, candidate: str) -> str:
    """What to train on next: ``curate(con, base)`` counted per verdict (with an example sample and
    its reason each), the expected learning signal of the kept samples (``forecast``), the signal
    along training when the runs hold two checkpoints or more (``signal_by_step``), and the command
    that writes the training files."""
    from .curation import VERDICTS, curate, forecast, signal_by_step
    from .plots.curation import signal_by_step_interactive

    cur = curate(con, base)
    a = cur.attrs
    counts, n, keep = a["counts"], a["samples"], a["counts"]["keep"]
    lo, hi = a["band"]
    on_pass = a["on"] == "pass_rate"
    band = f"{fmt.share(lo)}–{fmt.share(hi)}" if on_pass else f"{fmt.number(lo)}–{fmt.number(hi)}"
    dropped = [f"{fmt.count(counts[v])} {v.replace('_', ' ')}" for v in VERDICTS if v != "keep" and counts[v]]
    lead = (f"{fmt.count(keep)} of {fmt.count(n)} samples of {base} are worth training on next: their "
            f"{'pass rate' if on_pass else 'mean score'} over at least {a['min_attempts']} attempts lies in {band}, "
            "so attempts disagree and a policy-gradient step has something to learn from."
            + (f" Left out: {', '.join(dropped)}." if dropped else " None is left out."))
    first = cur.drop_duplicates("verdict").set_index("verdict")
    shown = pd.DataFrame({
        "verdict": list(VERDICTS), "samples": [counts[v] for v in VERDICTS],
        "what it means": [CURATION_WORDS[v] for v in VERDICTS],
        "example": [str(first.sample_id[v]) if v in first.index else "" for v in VERDICTS],
        "why": [first.reason[v] if v in first.index else None for v in VERDICTS]})
    parts = [f"<h2>What to train on next</h2><p class='note'>Every sample of {_e(base)} judged by the learning "
             "signal its attempts give (docs/metrics.md, “Curation”); near-duplicate prompts are grouped and kept "
             "once. “Suspect” counts only when curating with drop_suspects.</p>",
             f"<p id='curation-lead'>{_e(lead)}</p>",
             _table(shown, long=("why",), headers={"example": "example sample", "why": "its reason"})]
    if keep:
        try:
            plan = forecast(con, cur)
        except Exception as exc:  # noqa: BLE001 (the counts stand without it)
            parts.append(f"<p class='note failed'>The forecast was not computed: {_e(type(exc).__name__)}: "
                         f"{_e(str(exc), 300)}.</p>")
        else:
            parts.append(f"<p class='note' id='curation-forecast'>{_e(_forecast_sentence(plan))}</p>")
    signal = signal_by_step(con, training_runs(con, also=[base, candidate]))
    checkpoints = signal[signal.data_source == "(all)"][["split", "step", "step_known"]].drop_duplicates()
    if len(checkpoints) >= 2:
        parts.append(_keep("<h3>Learning signal along training</h3><p class='note'>Per checkpoint, the samples "
                           "with at least 2 attempts whose attempts all fail, all pass, or pass and fail (the signal); the dashed line "
                           "is the share whose attempts all scored the same (zero advantage in GRPO).</p>"
                           + _figure(signal_by_step_interactive(signal))))
    command = f"rolloutlab curate --run {shlex.quote(base)} --out DIR --to {CURATE_FORMATS}"
    parts.append("<p class='note'>To write the kept samples as training files (train and validation split by "
                 f"prompt group): <code>{_e(command)}</code>, or <code>rl.curate</code> and "
                 "<code>rl.write_curated</code> in a notebook.</p>")
    return "".join(parts)


def _forecast_sentence(plan: pd.DataFrame) -> str:
    """The forecast in words: the smallest number of attempts per sample whose expected signal
    share reaches the target, against every sample before curation."""
    if plan.empty or plan.expected_signal_share.isna().all():
        return "No kept sample to forecast."
    target = float(plan.target.iloc[0])
    rec = plan[plan.recommended]
    if len(rec):
        r = rec.iloc[0]
        return (f"With {fmt.count(r.k)} attempts per sample (the fewest that reach the {fmt.share(target)} target), an "
                f"expected {fmt.share(r.expected_signal_share)} (95% interval {fmt.share(r.ci_low)}–"
                f"{fmt.share(r.ci_high)}) of the {fmt.count(r.samples)} kept samples give learning signal, against "
                f"{fmt.share(r.all_expected_signal_share)} of all {fmt.count(r.all_samples)} samples before curation.")
    r = plan.iloc[-1]
    return (f"No number of attempts up to {fmt.count(r.k)} reaches the {fmt.share(target)} target: at "
            f"{fmt.count(r.k)} attempts an expected {fmt.share(r.expected_signal_share)} of the kept samples give "
            "learning signal.")


def failures_html(con: duckdb.DuckDBPyConnection, base: str, candidate: str, n_boot: int = FAILURE_N_BOOT,
                  top: int = FAILURE_TOP) -> str:
    """How it fails: ``failure_modes_diff`` in one sentence (``diff_sentence``), the dumbbell of
    every mode, and the ``top`` modes by the size of their change, each with one example rollout
    (its id, final answer and error, escaped)."""
    from .failures import diff_sentence, failure_modes_diff
    from .plots.failure_modes import diff_interactive

    head = "<h2>How it fails</h2>"
    diff = failure_modes_diff(con, base, candidate, n_boot=n_boot)
    if diff.empty:
        return head + f"<p>Neither {_e(base)} nor {_e(candidate)} has failing rollouts.</p>"
    a = diff.attrs
    per_failures = a.get("per") == "failures"
    b_col, c_col, d_col = (("base_share", "candidate_share", "diff") if per_failures
                           else ("base_rate", "candidate_rate", "rate_diff"))
    measure = "share of the run's failures" if per_failures else "share of the run's rollouts that fail this way"
    thr = a.get("pass_threshold", config.PASS_THRESHOLD)
    fitted = ("on every sample, blind to which run each failure came from" if a["in_sample"] else
              f"on {fmt.count(a['samples_fitted'])} samples and counted on the other {fmt.count(a['samples_tested'])}")
    below = "its run's pass threshold" if thr is None else fmt.number(thr)
    note = (f"Failing rollouts of both runs (score below {below}; infra errors and never-graded rollouts "
            "in modes of their own, I1 …) grouped into modes by their final answer (is its value in a tool output, "
            "does it match the reference once units and formats are normalised, a refusal), how the run went "
            "(errors, loops, truncation) and what it called, fitted on both runs together so that a mode means the "
            f"same in each, {fitted}: {fmt.count(a['base_failures'])} of {fmt.count(a['base_rollouts'])} rollouts "
            f"of {base} fail, {fmt.count(a['candidate_failures'])} of {fmt.count(a['candidate_rollouts'])} of "
            f"{candidate}. Per mode, the {measure}, and the change with its 95% CI (bootstrap over samples, "
            f"{n_boot:,} resamples). A verdict other than unchanged needs the change's permutation p-value (a "
            f"sample's attempts in {base} and {candidate} swapped, {fmt.count(a['n_perm'])} times), adjusted across "
            f"the modes by {a['adjust_words']}, to be at most {fmt.number(a['alpha'])}: two runs of one checkpoint "
            "then rarely show a change. A mode is a pattern the failures share, not their cause: read its example.")
    assignments = a["assignments"].set_index("rollout_id")
    order = diff.assign(_size=diff[d_col].abs()).sort_values("_size", ascending=False, kind="stable").head(top)
    examples = []
    for r in order.itertuples():
        pick = ([(candidate, r.examples_candidate), (base, r.examples_base)]
                if r.verdict not in ("fixed", "reduced") else [(base, r.examples_base), (candidate, r.examples_candidate)])
        run, ids = next(((run, ids) for run, ids in pick if len(ids)), (None, []))
        rid = ids[0] if len(ids) else None
        row = assignments.loc[rid] if rid is not None and rid in assignments.index else None
        examples.append((rid, run, None if row is None else row.final_answer, None if row is None else row.error))
    shown = pd.DataFrame({
        "mode": order["mode"].to_numpy(), "what sets it apart": order.label.to_numpy(),
        base: [fmt.share(x) for x in order[b_col]], candidate: [fmt.share(x) for x in order[c_col]],
        "change": [fmt.points(x) for x in order[d_col]],
        "95% CI": [f"[{fmt.points(lo)}, {fmt.points(hi)}]" for lo, hi in
                   zip(order[f"{d_col}_ci_low"], order[f"{d_col}_ci_high"])],
        "p (adjusted)": [fmt.number(x) for x in order.p_adjusted],
        "verdict": order.verdict.to_numpy(),
        "example rollout": [f"{rid} ({run})" if rid else None for rid, run, _, _ in examples],
        "example's final answer": [ans for _, _, ans, _ in examples],
        "example's error": [err for _, _, _, err in examples]})
    more = len(diff) - len(order)
    return (_keep(head + f"<p class='verdict' id='failures-lead'>{_e(diff_sentence(diff))}</p>"
                  f"<p class='note'>{_e(note)}</p>" + _figure(diff_interactive(diff)))
            + f"<h3>The {len(order)} modes that changed most</h3>"
            + _table(shown, long=("example's final answer", "example's error"),
                     numeric=(base, candidate, "change"))
            + (f"<p class='note'>{more} more mode{'s' if more > 1 else ''} in "
               f"<code>rl.failure_modes_diff</code>.</p>" if more > 0 else ""))


def _cost_source(row, as_of: str) -> str:
    if row.cost_source == "logs":
        return "logs"
    if row.cost_source == "prices":
        return f"price table{as_of}"
    if row.cost_source == "logs+prices":
        return f"logs and price table{as_of}"
    return "no price"


def _no_price(row) -> str:
    """Why a run has no cost, in words."""
    if missing(row.input_tokens) and missing(row.output_tokens):
        return f"{row.run}: no price (no cost in the logs and no tokens to price)"
    if missing(row.model):
        return f"{row.run}: no price (no model name to look up, no cost in the logs)"
    return (f"{row.run}: no price (model {row.model} is not in the price table; give it with "
            f"rl.cost(..., prices={{'{row.model}': {{'input': ..., 'output': ...}}}}))")


def cost_html(con: duckdb.DuckDBPyConnection, base: str, candidate: str, n_boot: int = 2000,
              batch_size: int | None = None, compute_multiplier: int | None = None) -> str:
    """Cost: per run, dollars per rollout, per solved sample and in total, and where they came from
    (the logs or the price table); the cost–score frontier; and the rollout cost of the training
    step the capacity section plans (``job_cost`` of the base). A model without a price says "no
    price", never $0; platform training fees are never included."""
    from .metrics.costs import PriceWarning, cost, frontier
    from .plots.cost import interactive_frontier

    if batch_size is None:
        batch_size, compute_multiplier = (config.CAPACITY_PLANNED_STEP["batch_size"],
                                          config.CAPACITY_PLANNED_STEP["compute_multiplier"])
    with warnings.catch_warnings():  # a model without a price: said in the section, not on stderr
        warnings.simplefilter("ignore", PriceWarning)
        costs = cost(con, [base, candidate])
        front = frontier(con, [base, candidate], n_boot=n_boot)
    as_of = costs.attrs.get("prices_as_of") or []
    as_of_text = f" as of {', '.join(as_of)}" if as_of else ""

    def dollars(v, known):
        return fmt.dollars(v) if known and not missing(v) else "no price"

    rows = list(costs.itertuples())
    known = {r.run: not missing(r.cost_per_rollout) for r in rows}
    shown = pd.DataFrame({
        "run": [r.run for r in rows], "model": [r.model for r in rows],
        "cost from": [_cost_source(r, as_of_text) for r in rows],
        "per rollout": [dollars(r.cost_per_rollout, known[r.run]) for r in rows],
        "per solved sample": [dollars(r.cost_per_solved, known[r.run]) if r.passes_costed or not known[r.run]
                              else "none solved" for r in rows],
        "total": [dollars(r.cost_total, known[r.run]) for r in rows],
        "rollouts costed": [f"{fmt.count(r.rollouts_costed)} of {fmt.count(r.rollouts)}" for r in rows]})
    unpriced = [_no_price(r) for r in rows if not known[r.run]]
    parts = ["<h2>Cost</h2><p class='note'>Dollars of the counted rollouts (infra errors and never-graded left out): "
             "from the cost the logs give where they give one, else the run's tokens at the model's list price "
             f"(rolloutlab's price table{_e(as_of_text)}; priced costs bill every input token uncached unless the logs "
             "count cached tokens). Per solved sample: the total over the passing rollouts, what one pass costs. "
             "Platform training fees not included, nor model-grader tokens.</p>",
             _table(shown, numeric=("per rollout", "per solved sample", "total", "rollouts costed"))]
    if unpriced:
        parts.append("<p class='note' id='cost-no-price'>" + _e("; ".join(unpriced)) + ".</p>")
    if front.cost_per_rollout.notna().any() and front.score.notna().any():
        parts.append(_keep(_figure(interactive_frontier(front))))
    parts.append(_job_cost_html(con, base, batch_size, compute_multiplier, known.get(base, False), n_boot))
    return "".join(parts)


def _job_cost_html(con, base, batch_size, compute_multiplier, known, n_boot) -> str:
    """The rollout cost of the planned step (``job_cost`` of the base), fees excluded."""
    from .metrics.costs import PriceWarning, job_cost

    step = batch_size * (compute_multiplier or 1)
    head = (f"<h3 id='cost-step'>A training step's rollouts</h3><p class='note'>The step the endpoint-load section "
            f"plans: {batch_size:,} × {compute_multiplier or 1:,} = {step:,} rollouts, each costing what {_e(base)}'s "
            "rollouts cost (failed ones included: they spent tokens too).</p>")
    if not known:
        return head + f"<p>No price for {_e(base)}'s rollouts: no cost for the step.</p>"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PriceWarning)
        jc = job_cost(con, base, samples=batch_size, compute_multiplier=compute_multiplier, n_boot=n_boot)
    one, per_step = jc.set_index("scope").loc["rollout"], jc.set_index("scope").loc["step"]
    return head + (
        f"<p id='cost-step-line'>{_e(fmt.dollars(per_step.cost_usd))} per step (95% CI "
        f"{_e(fmt.dollars(per_step.ci_low))}–{_e(fmt.dollars(per_step.ci_high))}): {_e(fmt.dollars(one.cost_usd))} per "
        f"rollout on average, p50 {_e(fmt.dollars(one.p50))}, p95 {_e(fmt.dollars(one.p95))}. Rollout tokens only: "
        "platform training fees not included (RFT bills training time per hour), nor model-grader tokens.</p>")


def _labelled(con, runs: list[str]) -> dict[str, int]:
    rows = con.execute("SELECT r.run_id, count(DISTINCT l.rollout_id) FROM labels l JOIN rollouts r USING (rollout_id) "
                       "WHERE list_contains(?, r.run_id) GROUP BY r.run_id", [runs]).fetchall()
    return {run: int(n) for run, n in rows}


def calibration_html(con: duckdb.DuckDBPyConnection, base: str, candidate: str) -> str:
    """Graders against people's labels: per run with labelled rollouts, ``grader_calibration``
    as ``report_table`` with its ``findings``; without labels, how to make them."""
    from .calibration import findings, grader_calibration, report_table

    head = ("<h2>Graders against people's labels</h2><p class='note'>A grader's pass rate is what the run's score "
            "rests on. Where people labelled a random sample of rollouts, each grader is checked against them "
            "(agreement, Cohen's κ) and the pass rate corrected by its mistakes (prediction-powered inference, "
            "docs/metrics.md, “Grader calibration”).</p>")
    n = _labelled(con, [base, candidate])
    if not any(n.values()):
        return head + (
            f"<p id='calibration-none'>No rollout of {_e(base)} or {_e(candidate)} is labelled. To check the "
            f"graders, draw a random sample to label (<code>{_e(f'rolloutlab labels sample --run {shlex.quote(candidate)}')}"
            "</code>, or <code>rl.labelling_sample(con, run)</code>), label each rollout pass or fail "
            "(<code>rl.label(con, rollout_id, &quot;pass&quot;)</code>, or in the explorer) and build the report "
            "again. Pick them at random, not by hand: the correction needs a random subset.</p>")
    parts = [head]
    for run in (base, candidate):
        if not n.get(run):
            parts.append(f"<h3>{_e(run)}</h3><p class='note'>No labelled rollout.</p>")
            continue
        cal = grader_calibration(con, run)
        said = findings(cal)
        parts.append(f"<h3>{_e(run)}: {fmt.count(n[run])} labelled rollouts</h3>"
                     + _table(report_table(cal), numeric=("labelled", "false passes", "accuracy"))
                     + ("<ul class='caveats'>" + "".join(f"<li class='concern'>{_e(f)}</li>" for f in said) + "</ul>"
                        if said else "<p class='note'>Every labelled grader agrees with the labels beyond chance "
                                     "(κ ≥ 0.4), and each one's pass rate lies inside its corrected CI.</p>"))
    return "".join(parts)

def _training(con, base, candidate, pi) -> str:
    runs = training_runs(con, also=[base, candidate])
    info = {r: s for r, s in con.execute("SELECT run_id, step FROM runs").fetchall()}
    stepped = [r for r in runs if info[r] is not None]
    if len(stepped) < 2:
        return "<h2>Training curves</h2><p class='note'>Fewer than two runs carry a training step.</p>"
    steps = sorted({int(info[r]) for r in stepped})
    unstepped = [r for r in runs if info[r] is None]
    left_out = sorted(r for r in info if r not in runs)
    note = (f"{len(steps)} checkpoint{'s' if len(steps) > 1 else ''} by training step "
            f"({', '.join(map(str, steps))}) in {len(stepped)} runs, one line per split"
            + (f"; {', '.join(_e(r) for r in unstepped)} carr{'ies' if len(unstepped) == 1 else 'y'} no step "
               "and is an open marker at step 0" if unstepped else "")
            + (f". Not drawn: {len(left_out)} other run{'s' if len(left_out) > 1 else ''} without a step "
               f"({', '.join(_e(r) for r in left_out)})" if left_out else "") + ".")
    return _keep(f"<h2>Training curves</h2><p class='note' id='training-note'>{note}</p>"
                 + _figure(pi.training_curves(by_step(con, runs))))


def _trainer(con, pi) -> str:
    metrics = training_metrics(con)
    if metrics.empty:
        return ("<h2>What the trainer reported</h2><p class='note'>No trainer metrics loaded (OpenAI fine-tuning "
                "job events, checkpoints).</p>")
    return _keep("<h2>What the trainer reported</h2><p class='note'>The training job's own step metrics: reward on "
                 "training batches and on validation steps, per grader, grader error rates and step time. "
                 "Validation points exist only on validation steps.</p>" + _figure(pi.trainer_curves(metrics)))


def methods_html(con: duckdb.DuckDBPyConnection, base: str, candidate: str, n_boot: int = 2000) -> str:
    """Methods and provenance: how the numbers were made, the rollouts of both runs by status, and
    the files that loaded them."""
    both = summary(con, [base, candidate])
    counts = both[["run", "rollouts", "samples", "n_ok", "n_model_error", "n_infra_error", "n_truncated", "n_ungraded",
                   "n_excluded", "score_min", "score_max"]]
    scale = "; ".join(f"{_e(r.run)}: score ≥ {fmt.number(r.pass_threshold)}, a rollout without a score counts as "
                      f"{fmt.number(r.reward_floor)}" for r in both.itertuples())
    ids = sorted({sid for run in (base, candidate)
                  for (sid,) in con.execute(catalog.run_sources_sql(), {"run": run}).fetchall()})
    sources = con.execute("SELECT path, format, n_records AS records, n_records - n_rejected AS loaded, "
                          "n_rejected AS rejected, ingested_at FROM sources WHERE list_contains(?, source_id) "
                          "ORDER BY source_id", [ids]).df()
    sources["path"] = sources.path.map(os.path.basename)
    headers = {"n_ok": "ok", "n_model_error": "model error", "n_infra_error": "infra error",
               "n_truncated": "truncated", "n_ungraded": "ungraded", "n_excluded": "excluded from scores",
               "score_min": "lowest score", "score_max": "highest score",
               "ingested_at": "ingested (UTC)"}
    return ("<h2>Methods and provenance</h2><p class='note'>Scores exclude infra errors and ungraded rollouts "
            "(counted below): a failed tool endpoint says nothing about the model. Differences are paired per "
            "sample over the samples both runs evaluated; each 95% CI and p-value come from one test: a paired t-test "
            "over samples (clustered: the attempts at a sample count once) for the score and the other means and "
            f"ratios, a paired bootstrap over samples ({n_boot:,} resamples, seed 0) for latency percentiles. The score is the primary metric, tested alone; the other metrics are adjusted together "
            f"(Holm). A rollout passes at its run's pass threshold ({scale}). Readiness thresholds: "
            f"{_e(', '.join(f'{k} = {fmt.value(v)}' for k, v in config.CHECK_THRESHOLDS.items()))}.</p>"
            "<h3 id='methods-rollouts'>Rollouts</h3>" + _table(counts, headers=headers)
            + f"<h3>Sources</h3><p class='note'>The files that loaded {_e(base)} or {_e(candidate)}.</p>"
            + _table(sources, headers=headers))


def write_report(con: duckdb.DuckDBPyConnection, base: str, candidate: str, path: str | os.PathLike,
                 n_boot: int = 2000, progress: bool | None = None, **step) -> Path:
    """Build the report and write it to ``path``; returns the path. ``step``: build_report's
    batch_size and compute_multiplier."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build_report(con, base, candidate, n_boot=n_boot, progress=progress, **step), encoding="utf-8")
    return out


# --- PDF -----------------------------------------------------------------------------------------

class ChromiumNotFoundError(ValueError):
    """No Chromium to print the report with."""


def find_chromium() -> str:
    """Chromium's path: ``$ROLLOUTLAB_CHROMIUM``, else the first of ``CHROMIUM_NAMES`` on PATH."""
    env = os.environ.get(CHROMIUM_ENV_VAR)
    if env:
        if Path(env).is_file() and os.access(env, os.X_OK):
            return env
        raise ChromiumNotFoundError(f"${CHROMIUM_ENV_VAR} is {env}, which is no executable file: point it at "
                                    "Chromium or Chrome, or unset it to look on PATH.")
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise ChromiumNotFoundError(
        "a PDF needs Chromium (or Chrome), and none was found on PATH "
        f"(looked for {', '.join(CHROMIUM_NAMES)}). Install it (Debian/Ubuntu: apt-get install chromium; "
        f"macOS: brew install --cask chromium) or set ${CHROMIUM_ENV_VAR} to its path. Without it, open the "
        "HTML report in a browser and print it to PDF (the report has a print stylesheet).")


def write_pdf(html: str | os.PathLike, pdf: str | os.PathLike | None = None, chromium: str | None = None,
              timeout: float = PDF_TIMEOUT_S) -> Path:
    """Print a written report to PDF with headless Chromium (``--print-to-pdf``): figures drawn
    for the page width, folded text opened, controls hidden (the report's print stylesheet).
    ``pdf`` defaults to the HTML's path with ``.pdf``. Raises ``ChromiumNotFoundError`` (saying how
    to install it) when there is no Chromium, ``RuntimeError`` when printing fails."""
    html = Path(html).resolve()
    out = Path(pdf) if pdf is not None else html.with_suffix(".pdf")
    out = out.resolve()
    browser = chromium or find_chromium()
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="rolloutlab-chromium-") as profile:
        # --virtual-time-budget: Chromium waits for the page's scripts (plotly drawing, then
        # sizing the figures for print on load) before it prints
        command = [browser, "--headless", *CHROMIUM_ARGS, f"--user-data-dir={profile}", "--no-pdf-header-footer",
                   "--virtual-time-budget=15000", "--run-all-compositor-stages-before-draw",
                   f"--print-to-pdf={out}", html.as_uri() + "#print"]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"Chromium did not print {html} within {timeout:g} s: open the HTML in a browser "
                               "and print it to PDF instead.") from None
    if not out.is_file() or out.stat().st_size == 0:
        tail = " ".join((proc.stderr or "").strip().splitlines()[-3:])
        raise RuntimeError(f"Chromium ({browser}) wrote no PDF (exit {proc.returncode}{': ' + tail if tail else ''}). "
                           "Open the HTML report in a browser and print it to PDF instead.")
    return out

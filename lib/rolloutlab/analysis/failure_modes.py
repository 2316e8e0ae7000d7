"""Why it fails: failing rollouts grouped into failure modes, and base vs candidate by mode
(aligned trajectory diffs: ``trajectories``).

Offline and deterministic for a seed. Features come from what the logs hold, built in DuckDB SQL
(``failure_features_sql``), about the outcome as much as the path: are the final answer's values
(numbers, dates, times, identifiers) found in any tool output (grounded), does the answer match
the reference once units and formats are normalised (right value, wrong form; right number, wrong
unit); a refusal, a question back or no answer; failed calls made good or not, and which came
last; loops of identical calls; calls that came back empty; truncation; and the tools that
answered. Each field is a unit vector; the answer weighs as much as the path and the process
together (``_Vectorizer``, FAILURE_MODES_WEIGHTS), and no field weighs more than its share.
Average-linkage agglomerative clustering (cosine; SciPy), the tree cut where modes lie
FAILURE_MODES_MIN_SEPARATION apart, k <= min(12, sqrt(failures / 2)); ``method="kmeans"`` or
``"hdbscan"`` instead. Labels name a behaviour from the features that set a mode apart ("retries
`search` after timeouts, then gives up", "right number, wrong unit"). No model weights, no
network; an optional labeller (``failure_labeler``) asks the team's own model.

Infra errors and never-graded rollouts are modes of their own (``kind = 'infra'``), grouped by
their normalised error message; they are never clustered with the model's failures.

``failure_modes_diff`` fits the modes on both runs' failures blind to the run and tests each with
a permutation test that swaps a sample's attempts between the runs (or fits on some samples and
tests on the others: ``holdout``), the p-values adjusted across modes (Holm), so that two runs of
one checkpoint rarely show a change.

A mode is a pattern that failing rollouts share, not a cause: two rollouts in one mode fail the
same way, which is where to start reading.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from . import stats
from ..config import (FAILURE_MODES_ADJUST, FAILURE_MODES_ALPHA, FAILURE_MODES_EXAMPLES, FAILURE_MODES_HOLDOUT,
                      FAILURE_MODES_INFRA_GROUPS, FAILURE_MODES_K_MAX, FAILURE_MODES_LABEL_FEATURES,
                      FAILURE_MODES_LABEL_MIN_DIFF, FAILURE_MODES_LABEL_MIN_SHARE, FAILURE_MODES_LINKAGE_MAX,
                      FAILURE_MODES_MIN_SEPARATION, FAILURE_MODES_MIN_SIZE, FAILURE_MODES_N_BOOT,
                      FAILURE_MODES_N_PERM, FAILURE_MODES_SILHOUETTE_SAMPLE, FAILURE_MODES_TEXT_CHARS,
                      FAILURE_MODES_VERDICT_RESIDUAL, FAILURE_MODES_WEIGHTS)
from ..store.stop_reasons import LIMITS, lit as _lit
from ..text.fmt import share
from .metrics.common import (EXCLUDED_STATUSES, common_threshold, pass_at_sql, resolve_runs, run_sql,
                             sample_texts_sql, threshold)

# ---- defaults ---------------------------------------------------------------------------------

MODE_COLUMNS = ["mode", "kind", "label", "rollouts", "share_of_failures", "share_ci_low", "share_ci_high",
                "share_of_rollouts", "mean_tool_calls", "mean_turns", "examples", "features", "auto_label"]
ASSIGNMENT_COLUMNS = ["rollout_id", "run", "sample_id", "attempt", "status", "score", "kind", "mode", "label",
                      "similarity", "n_tool_calls", "n_turns", "sequence", "final_answer", "error"]
DIFF_COLUMNS = ["mode", "kind", "label", "base_rollouts", "candidate_rollouts",
                "base_share", "base_ci_low", "base_ci_high", "candidate_share", "candidate_ci_low", "candidate_ci_high",
                "diff", "diff_ci_low", "diff_ci_high",
                "base_rate", "base_rate_ci_low", "base_rate_ci_high", "candidate_rate", "candidate_rate_ci_low",
                "candidate_rate_ci_high", "rate_diff", "rate_diff_ci_low", "rate_diff_ci_high",
                "p_value", "p_adjusted", "verdict", "examples_base", "examples_candidate", "features"]
VERDICTS = ("fixed", "reduced", "unchanged", "grew", "new")
METHODS = ("average", "kmeans", "hdbscan")
ADJUSTMENTS = {"holm": "Holm (family-wise error)", "bh": "Benjamini-Hochberg (false discovery rate)"}


# ---- SQL ----------------------------------------------------------------------------------------

# Masks applied in order to lower-cased text: what varies between two instances of one failure.
MASKS = [
    (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>"),
    (r"https?://[^\s'\"<>]+", "<url>"),
    (r"[\w.+-]+@[\w-]+\.[\w.-]+", "<email>"),
    (r"(~|\.{1,2})?(/[\w.-]+){2,}/?", "<path>"),
    (r"[a-z]:\\[^\s'\"]+", "<path>"),
    (r"\b\d+(\.\d+)?(ms|s|m|h|k|kb|mb|gb|%)?\b", "<n>"),
    (r"\b[a-z_-]*\d[a-z0-9_-]*\b", "<id>"),
    (r"\s+", " "),
]

ERROR_CLASSES = [  # (class, pattern on the lower-cased error); the first match wins
    ("timeout", r"time[d]?[ -]?out|deadline exceeded"),
    ("rate_limit", r"\b429\b|rate[ -]?limit|too many requests"),
    ("server_error", r"\b5\d\d\b|unavailable|internal server|bad gateway|connection (reset|refused|error)"),
    ("not_found", r"not found|no such|does not exist|\b404\b"),
    ("denied", r"denied|forbidden|unauthori[sz]ed|permission|\b40[13]\b"),
    ("invalid", r"invalid|must|should|required|missing|expected|cannot|not allowed|\b4\d\d\b"),
]

REFUSAL = (r"\b(i (can.?t|cannot|can not|am unable|.m unable|am not able|.m not able|don.?t know|do not know|"
           r"couldn.?t|could not|was unable|wasn.?t able)|unable to|sorry|not (able|possible) to|"
           r"no (relevant )?(information|data|results?) (is )?(available|found))")
NUMBER = r"[-+]?[$€£¥]?\s*\d[\d,]*(\.\d+)?"
HANDOVER = r"transfer|escalat|hand_?off|handover|human|operator"  # a tool that hands the case to a person
# A number as written, in lower-cased text: a currency sign, digits (thousands grouped by commas or
# not; a decimal comma before one or two digits), decimals, a percent sign, a scale word or a unit of
# weight. Digits inside identifiers (HAT136) are not numbers; dates and times are read first.
WEIGHT_UNITS = {"lb": 0.45359237, "lbs": 0.45359237, "pound": 0.45359237, "pounds": 0.45359237,
                "oz": 0.028349523125, "ounce": 0.028349523125, "ounces": 0.028349523125}  # -> kg
VALUE = (r"(?:[$€£¥]\s?)?\b(?:\d{1,3}(?:,\d{3})+|\d+,\d{1,2}\b|\d+)(?:\.\d+)?"
         r"(?:\s?%|\s?(?:percent|thousand|million|billion|trillion|bn|mn|kilograms?|kilos?|kg|lbs?|pounds?|ounces?|oz"
         r"|k|m|b)\b)?")
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
# dates in the forms people write them, each read as year-month-day: (pattern, group of y, m, d)
DATES = [(r"\b(\d{4})-(\d{1,2})-(\d{1,2})", 1, 2, 3),                     # 2025-06-17
         (r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b", 3, 1, 2),                  # 06/17/2025
         (r"\b(\d{1,2})\.(\d{1,2})\.(\d{4})\b", 3, 2, 1),                # 17.06.2025
         (r"\b" + MONTH + r"\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b", 3, 1, 2),    # june 17th, 2025
         (r"\b(\d{1,2})(?:st|nd|rd|th)?\s+" + MONTH + r"\.?,?\s+(\d{4})\b", 3, 2, 1)]    # 17 june 2025
TIME = r"(?:\b|\dt)(\d{1,2}):(\d{2})(?::\d{2})?(?:\s*([ap])\.?m\b\.?)?"     # 6:45 am, 18:45, 2025-06-17t06:45
DATETIME = "|".join(f"(?:{p})" for p, *_ in DATES) + f"|(?:{TIME})"
# an identifier in lower-cased text: letters then a digit (hat136, w4836353, mia_li_3668)
IDENTIFIER = r"\b[a-z][a-z_-]*\d[a-z0-9_-]*\b"
# a tool output that reports an error in its text (tau-bench: "Error: ..."), when the log has no status
ERROR_OUTPUT = r"^\W{0,3}(error|exception|traceback)\b"
# a successful call whose output says it found nothing: empty JSON, or "no results", "not found", ...
EMPTY_OUTPUT = (r"^\s*(\[\s*\]|\{\s*\}|null|none|\"\"|)\s*$|\b(no (results?|matches|match|records?|data|figures?|"
                r"information|entries|items)\b|not (found|available)|nothing (found|matched)|does not (contain|include|"
                r"have)|0 results)")


def mask_sql(expr: str) -> str:
    """``expr`` lower-cased with ids, numbers, paths, URLs and e-mail addresses masked."""
    out = f"lower({expr})"
    for pattern, repl in MASKS:
        out = f"regexp_replace({out}, {_lit(pattern)}, {_lit(repl)}, 'g')"
    return f"trim({out})"


def error_class_sql(error: str, status: str) -> str:
    """One word for how a call failed (NULL when it did not)."""
    cases = " ".join(f"WHEN regexp_matches(lower({error}), {_lit(p)}) THEN {_lit(c)}" for c, p in ERROR_CLASSES)
    return (f"CASE WHEN coalesce({status}, 'ok') = 'ok' AND {error} IS NULL THEN NULL "
            f"WHEN {error} IS NULL THEN lower({status}) {cases} ELSE 'error' END")


def answer_shape_sql(answer: str) -> str:
    """The final answer's shape: empty, refusal, question, number, number_unit, short_text, text."""
    a = f"trim({answer})"
    bare_number = _lit(NUMBER + r"\.?")
    return f"""CASE WHEN {answer} IS NULL OR {a} = '' THEN 'empty'
        WHEN regexp_matches(lower({a}), {_lit(REFUSAL)}) THEN 'refusal'
        WHEN regexp_full_match({a}, {bare_number}) THEN 'number'
        WHEN length({a}) <= 40 AND regexp_matches({a}, {_lit(NUMBER)}) THEN 'number_unit'
        WHEN right({a}, 1) = '?' THEN 'question'
        WHEN length({a}) <= 40 THEN 'short_text'
        ELSE 'text' END"""


def answer_mask_sql(answer: str) -> str:
    """A short answer holding a number, digits and words masked (``$28.9M`` -> ``$9.9M``,
    ``28.9 million`` -> ``9.9 w``): the number's format. NULL for other answers."""
    a = f"trim({answer})"
    masked = f"regexp_replace(regexp_replace({a}, '[0-9]+', '9', 'g'), '[A-Za-z]{{2,}}', 'w', 'g')"
    space = _lit(r"\s+")
    return (f"CASE WHEN length({a}) BETWEEN 1 AND 40 AND regexp_matches({a}, '[0-9]') "
            f"THEN regexp_replace({masked}, {space}, ' ', 'g') END")


def value_sql(lit: str) -> tuple[str, str]:
    """(value, significant digits) of a number matched by VALUE: ``$28.9m`` -> 28,900,000 and 3,
    ``28,900,000`` -> 28,900,000 and 3 (trailing zeros are not significant), ``25%`` -> 0.25,
    ``184,50`` -> 184.5, ``23 kg`` -> 23 (weights in kg: ``weight_sql`` gives the other units)."""
    digits = f"regexp_extract({lit}, '\\d[\\d,]*(?:\\.\\d+)?')"
    plain = (f"CASE WHEN regexp_matches({digits}, '^\\d+,\\d{{1,2}}$') THEN replace({digits}, ',', '.') "
             f"ELSE replace({digits}, ',', '') END")
    scale = (f"CASE WHEN regexp_matches({lit}, '%|percent') THEN 0.01 "
             f"WHEN regexp_matches({lit}, '(kilograms?|kilos?|kg|lbs?|pounds?|ounces?|oz)$') THEN 1.0 "
             f"WHEN regexp_matches({lit}, '(thousand|k)$') THEN 1e3 "
             f"WHEN regexp_matches({lit}, '(million|mn|m)$') THEN 1e6 "
             f"WHEN regexp_matches({lit}, '(billion|bn|b)$') THEN 1e9 "
             f"WHEN regexp_matches({lit}, 'trillion$') THEN 1e12 ELSE 1.0 END")
    value = f"TRY_CAST({plain} AS DOUBLE) * {scale}"
    sig = f"greatest(1, least(15, length(rtrim(ltrim(regexp_replace({digits}, '[^0-9]', '', 'g'), '0'), '0'))))"
    return value, sig


def weight_sql(lit: str) -> str:
    """The factor to kilograms of a number written in pounds or ounces (NULL for others): such a
    number is read both as written and in kg ("51 pounds" may be money or 23 kg)."""
    cases = " ".join(f"WHEN regexp_matches({lit}, '\\b{u}$') THEN {f!r}" for u, f in WEIGHT_UNITS.items())
    return f"CASE {cases} END"


def dates_sql(text: str) -> str:
    """A SELECT of (rollout_id, src, tok) rows: each date in ``text`` of ``texts`` as
    ``YYYY-MM-DD`` (DATES), each time as ``tHH:MM`` (TIME, 12-hour times with am/pm made 24-hour)."""
    parts = []
    for pattern, y, m, d in DATES:
        month = (f"list_position({MONTHS!r}, left(regexp_extract(x, {_lit(pattern)}, {m}), 3))" if MONTH in pattern
                 else f"TRY_CAST(regexp_extract(x, {_lit(pattern)}, {m}) AS INTEGER)")
        parts.append(f"""SELECT rollout_id, src, TRY_CAST(regexp_extract(x, {_lit(pattern)}, {y}) AS INTEGER) AS y,
                            {month} AS m, TRY_CAST(regexp_extract(x, {_lit(pattern)}, {d}) AS INTEGER) AS d
                     FROM (SELECT rollout_id, src, unnest(regexp_extract_all({text}, {_lit(pattern)})) AS x FROM texts)""")
    dates = " UNION ALL ".join(parts)
    t = _lit(TIME)
    return f"""SELECT rollout_id, src, printf('%04d-%02d-%02d', y, m, d) AS tok FROM ({dates})
                   WHERE m BETWEEN 1 AND 12 AND d BETWEEN 1 AND 31
               UNION ALL
               SELECT rollout_id, src, printf('t%02d:%02d', CASE WHEN ap = 'p' AND h < 12 THEN h + 12
                                                                 WHEN ap = 'a' AND h = 12 THEN 0 ELSE h END, mm) AS tok
               FROM (SELECT rollout_id, src, TRY_CAST(regexp_extract(x, {t}, 1) AS INTEGER) AS h,
                            TRY_CAST(regexp_extract(x, {t}, 2) AS INTEGER) AS mm, regexp_extract(x, {t}, 3) AS ap
                     FROM (SELECT rollout_id, src, unnest(regexp_extract_all({text}, {t})) AS x FROM texts))
               WHERE h BETWEEN 0 AND 24 AND mm BETWEEN 0 AND 59"""


def _same_digits(a: str, b: str, sig: str) -> str:
    """Numbers a and b (rows of ``vals``) have the same leading ``sig`` digits."""
    return f"round({a}.mant * pow(10, {sig} - 1)) = round({b}.mant * pow(10, {sig} - 1))"


def _same(a: str, b: str, sig: str) -> str:
    """Values a and b (rows of ``vals``) are the same: one date or time, or one number at ``sig``
    significant digits."""
    return (f"(({a}.kind = 'dt' AND {b}.kind = 'dt' AND {a}.tok = {b}.tok) OR ({a}.kind = 'num' AND {b}.kind = 'num' "
            f"AND {a}.e = {b}.e AND {_same_digits(a, b, sig)}))")


def _scaled(a: str, b: str) -> str:
    """Numbers a and b have the same digits at another scale (28.9 vs 28,900,000; 15 vs 15%),
    counted from two significant digits (one digit matches too much by chance)."""
    return (f"({a}.kind = 'num' AND {b}.kind = 'num' AND {a}.e <> {b}.e AND greatest({a}.sig, {b}.sig) >= 2 "
            f"AND {_same_digits(a, b, f'greatest({a}.sig, {b}.sig)')})")


def failure_features_sql() -> str:
    """One row per failing rollout of $runs (score below $threshold; infra errors and ungraded
    rollouts as ``kind = 'infra'``) with its features.

    The path: the call sequence with each call's outcome, the tools used, first and last tool.
    The process: error classes and masked messages (a call's error, or a tool output that starts
    with "Error"), the last failed call (``last_error``: tool and class), whether the last call
    failed, the most repeated identical call (same tool, same arguments), truncation.
    The answer: its shape; its numbers (``VALUE``, with units and scale words) and identifiers
    not taken from the prompt or a user message (``answer_values``), how many of them a tool
    output holds at the answer's precision (``grounded_values``) or only at another scale
    (``scaled_values``); against the sample's reference: the same text, the same value in
    another form (``ref_same``), the same digits at another scale (``ref_scaled``), the reference
    inside the answer (``ref_contains``). Each tool output and user message is read up to
    $text_chars characters. Parameters: $runs, $threshold, $text_chars."""
    excluded = ", ".join(_lit(s) for s in EXCLUDED_STATUSES)
    limits = ", ".join(_lit(s) for s in LIMITS)
    value, sig = value_sql("lit")
    error_output = f"regexp_matches(left(ltrim(o.text), 80), {_lit(ERROR_OUTPUT)})"
    norm = "regexp_replace(lower({}), '[^a-z0-9.%]', '', 'g')"
    return f"""
    WITH failing AS (
        SELECT rollout_id, run_id, sample_id, attempt, status, stop_reason, score, final_answer, error,
               n_turns, n_tool_calls, source_id,
               CASE WHEN status IN ({excluded}) THEN 'infra' ELSE 'model' END AS kind
        FROM rollouts
        WHERE list_contains($runs, run_id)
          AND (status IN ({excluded}) OR coalesce(score, 0.0) < {pass_at_sql()})),
    refs AS ({sample_texts_sql("failing")}),
    outs AS (  -- tool outputs; the i-th tool message of a turn answers the turn's i-th call
        SELECT m.rollout_id, m.turn_idx, lower(left(m.content, $text_chars)) AS text,
               row_number() OVER (PARTITION BY m.rollout_id, m.turn_idx ORDER BY m.msg_idx) AS k
        FROM messages m SEMI JOIN failing f ON m.rollout_id = f.rollout_id
        WHERE m.role = 'tool' AND m.content IS NOT NULL),
    calls AS (
        SELECT c.rollout_id, c.call_idx, coalesce(regexp_replace(c.tool, '\\s+', '_', 'g'), '?') AS tool,
               coalesce(c.tool, '') || ':' || coalesce(CAST(c.arguments AS VARCHAR), '') AS call_key,
               CASE WHEN c.error IS NOT NULL OR coalesce(c.status, 'ok') <> 'ok' THEN {error_class_sql('c.error', 'c.status')}
                    WHEN {error_output} THEN {error_class_sql('left(o.text, 300)', "'error'")} END AS err_class,
               CASE WHEN c.error IS NOT NULL THEN left({mask_sql('left(c.error, 300)')}, 120)
                    WHEN {error_output} THEN left({mask_sql('left(o.text, 300)')}, 120) END AS err_masked,
               o.text IS NOT NULL AND c.error IS NULL AND coalesce(c.status, 'ok') = 'ok' AND NOT {error_output}
                   AND regexp_matches(left(o.text, 400), {_lit(EMPTY_OUTPUT)}) AS empty,
               row_number() OVER (PARTITION BY c.rollout_id ORDER BY c.call_idx) AS pos
        FROM (SELECT *, row_number() OVER (PARTITION BY rollout_id, turn_idx ORDER BY call_idx) AS k
              FROM tool_calls SEMI JOIN failing USING (rollout_id)) c
             LEFT JOIN outs o ON o.rollout_id = c.rollout_id AND o.turn_idx = c.turn_idx AND o.k = c.k),
    same AS (  -- the most repeated identical call (the same tool with the same arguments), in all and in a row
        SELECT rollout_id, max(n) AS max_identical, arg_max(tool, n) AS identical_tool, max(run) AS max_in_a_row
        FROM (SELECT rollout_id, call_key, min(tool) AS tool, count(*) AS n, max(run) AS run
              FROM (SELECT rollout_id, call_key, tool, count(*) OVER (PARTITION BY rollout_id, call_key, grp) AS run
                    FROM (SELECT rollout_id, call_key, tool,
                                 pos - row_number() OVER (PARTITION BY rollout_id, call_key ORDER BY pos) AS grp
                          FROM calls))
              GROUP BY ALL)
        GROUP BY rollout_id),
    unrecovered AS (  -- failed calls that no later call of the same tool made good
        SELECT c.rollout_id, count(*) AS unrecovered
        FROM calls c WHERE c.err_class IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM calls d WHERE d.rollout_id = c.rollout_id AND d.tool = c.tool AND d.pos > c.pos
              AND d.err_class IS NULL)
        GROUP BY c.rollout_id),
    seqs AS (
        SELECT rollout_id,
               string_agg(tool || CASE WHEN err_class IS NULL THEN '' ELSE '(' || err_class || ')' END, ' '
                          ORDER BY pos) AS sequence,
               count(*) AS calls, count(err_class) AS failed_calls,
               arg_min(tool, pos) AS first_tool, arg_max(tool, pos) AS last_tool,
               arg_max(err_class IS NOT NULL, pos) AS last_call_failed,
               count(*) FILTER (WHERE empty) AS empty_calls, arg_max(empty, pos) AS last_call_empty,
               arg_max(tool || '(' || err_class || ')', pos) FILTER (WHERE err_class IS NOT NULL) AS last_error,
               list_sort(list_distinct(list(err_class))) AS err_classes,
               list_sort(list_distinct(list(err_masked)))[1:3] AS errors
        FROM calls GROUP BY rollout_id),
    texts AS (  -- where the values of a final answer can come from, and the answer
        SELECT rollout_id, 'output' AS src, text FROM outs
        UNION ALL SELECT m.rollout_id, 'user', lower(left(m.content, $text_chars)) FROM messages m
            SEMI JOIN failing f ON m.rollout_id = f.rollout_id WHERE m.role = 'user' AND m.content IS NOT NULL
        UNION ALL SELECT rollout_id, 'user', lower(left(prompt, $text_chars)) FROM refs WHERE prompt IS NOT NULL
        UNION ALL SELECT rollout_id, 'reference', lower(left(reference, $text_chars)) FROM refs WHERE reference IS NOT NULL
        UNION ALL SELECT rollout_id, 'answer', lower(left(final_answer, $text_chars)) FROM failing
            WHERE kind = 'model' AND final_answer IS NOT NULL),
    dts AS ({dates_sql('text')}),
    nums AS (  -- numbers (a weight in pounds also in kg: one vid, two rows), dates and times removed first
        SELECT rollout_id, src, vid, 'num' AS kind, NULL AS tok, v * f AS v, sig,
               CASE WHEN v * f > 0 THEN CAST(floor(log10(v * f)) AS INTEGER) ELSE 0 END AS e,
               CASE WHEN v * f > 0 THEN v * f / pow(10, floor(log10(v * f))) ELSE 0 END AS mant
        FROM (SELECT rollout_id, src, row_number() OVER () AS vid, {value} AS v, {sig} AS sig, {weight_sql('lit')} AS w
              FROM (SELECT rollout_id, src, unnest(regexp_extract_all(regexp_replace(text, {_lit(DATETIME)}, ' ', 'g'),
                                                                      {_lit(VALUE)})) AS lit FROM texts)),
             (SELECT unnest([1.0, NULL]) AS k) conv, LATERAL (SELECT coalesce(conv.k, w) AS f)
        WHERE v IS NOT NULL AND f IS NOT NULL),
    vals AS (
        SELECT * FROM nums
        UNION ALL SELECT rollout_id, src, -row_number() OVER () AS vid, 'dt', tok, NULL, NULL, NULL, NULL
                  FROM (SELECT DISTINCT rollout_id, src, tok FROM dts)),
    ans AS (  -- the answer's values that the prompt or the user did not give
        SELECT a.* FROM vals a WHERE a.src = 'answer' AND NOT EXISTS (
            SELECT 1 FROM vals u WHERE u.rollout_id = a.rollout_id AND u.src = 'user' AND {_same('u', 'a', 'a.sig')})),
    grounded AS (  -- each of them against the tool outputs: at its own precision, or at another scale
        SELECT a.rollout_id, a.vid, any_value(a.kind) AS kind,
               coalesce(bool_or(b.src IS NOT NULL AND {_same('a', 'b', 'a.sig')}), false) AS grounded,
               coalesce(bool_or(b.src IS NOT NULL AND {_scaled('a', 'b')}), false) AS scaled
        FROM ans a LEFT JOIN vals b ON b.rollout_id = a.rollout_id AND b.src = 'output' AND b.kind = a.kind
        GROUP BY a.rollout_id, a.vid),
    refmatch AS (  -- each value of the reference against every value of the answer (at the finer precision)
        SELECT r.rollout_id, r.vid,
               coalesce(bool_or(a.src IS NOT NULL AND {_same('a', 'r', 'greatest(a.sig, r.sig)')}), false) AS same,
               coalesce(bool_or(a.src IS NOT NULL AND {_scaled('a', 'r')}), false) AS scaled
        FROM vals r LEFT JOIN vals a ON a.rollout_id = r.rollout_id AND a.src = 'answer' AND a.kind = r.kind
        WHERE r.src = 'reference'
        GROUP BY r.rollout_id, r.vid),
    ref AS (  -- the same value: every value of the reference is in the answer; scaled: some only at another scale
        SELECT rollout_id, bool_and(same) AS ref_same, bool_and(same OR scaled) AND NOT bool_and(same) AS ref_scaled
        FROM refmatch GROUP BY rollout_id),
    ids AS (  -- the answer's identifiers that the prompt or the user did not give
        SELECT t.rollout_id, EXISTS (SELECT 1 FROM texts o WHERE o.rollout_id = t.rollout_id AND o.src = 'output'
                                     AND contains(o.text, t.tok)) AS grounded
        FROM (SELECT DISTINCT rollout_id, unnest(regexp_extract_all(text, {_lit(IDENTIFIER)})) AS tok
              FROM texts WHERE src = 'answer') t
        WHERE NOT EXISTS (SELECT 1 FROM texts u WHERE u.rollout_id = t.rollout_id AND u.src = 'user'
                          AND contains(u.text, t.tok))),
    grounding AS (
        SELECT rollout_id, count(*) AS answer_values, count(*) FILTER (WHERE grounded) AS grounded_values,
               count(*) FILTER (WHERE NOT grounded AND scaled) AS scaled_values,
               count(*) FILTER (WHERE kind IS NOT NULL) AS answer_numbers
        FROM (SELECT rollout_id, grounded, scaled, kind FROM grounded
              UNION ALL SELECT rollout_id, grounded, false, NULL FROM ids)
        GROUP BY rollout_id),
    answers AS (SELECT DISTINCT rollout_id FROM vals WHERE src = 'answer')
    SELECT f.rollout_id, f.run_id AS run, f.sample_id, f.attempt, f.status, f.score, f.kind,
           coalesce({mask_sql('f.stop_reason')}, '') AS stop_reason,
           f.status = 'truncated' OR coalesce(f.stop_reason IN ({limits}), false) AS truncated,
           coalesce(s.calls, f.n_tool_calls, 0) AS n_tool_calls, coalesce(f.n_turns, 0) AS n_turns,
           coalesce(s.sequence, '') AS sequence, coalesce(s.failed_calls, 0) AS failed_calls,
           s.first_tool, s.last_tool, coalesce(s.last_call_failed, false) AS last_call_failed, s.last_error,
           coalesce(s.empty_calls, 0) AS empty_calls, coalesce(s.last_call_empty, false) AS last_call_empty,
           coalesce(uc.unrecovered, 0) AS unrecovered_calls,
           coalesce(q.max_identical, 0) AS max_identical, coalesce(q.max_in_a_row, 0) AS max_in_a_row, q.identical_tool,
           coalesce(s.err_classes, []) AS err_classes, coalesce(s.errors, []) AS call_errors,
           CASE WHEN f.error IS NOT NULL THEN left({mask_sql('left(f.error, 300)')}, 120) END AS error_masked,
           {answer_shape_sql('f.final_answer')} AS answer_shape,
           {answer_mask_sql('f.final_answer')} AS answer_mask,
           coalesce(g.answer_values, 0) AS answer_values, coalesce(g.grounded_values, 0) AS grounded_values,
           coalesce(g.scaled_values, 0) AS scaled_values, coalesce(g.answer_numbers, 0) AS answer_numbers,
           r.reference IS NOT NULL AND trim(r.reference) <> '' AS has_reference,
           coalesce(rf.ref_same, false) AS ref_same, coalesce(rf.ref_scaled, false) AS ref_scaled,
           coalesce({norm.format('f.final_answer')} = {norm.format('r.reference')}, false) AS ref_exact,
           coalesce(length(trim(r.reference)) > 0 AND strpos(lower(f.final_answer), lower(trim(r.reference))) > 0
                    AND NOT regexp_matches(substr(lower(f.final_answer), strpos(lower(f.final_answer), lower(trim(r.reference)))
                                                  + length(trim(r.reference)), 1), '[a-z0-9]'), false) AS ref_contains,
           left(f.final_answer, 300) AS final_answer, left(f.error, 300) AS error
    FROM failing f LEFT JOIN seqs s USING (rollout_id) LEFT JOIN same q USING (rollout_id)
         LEFT JOIN unrecovered uc USING (rollout_id)
         LEFT JOIN grounding g USING (rollout_id) LEFT JOIN refs r USING (rollout_id) LEFT JOIN ref rf USING (rollout_id)
    ORDER BY f.run_id, f.sample_id NULLS LAST, f.attempt, f.rollout_id
    """


def run_counts_sql() -> str:
    """Rollouts per (run, sample) of $runs: every rollout, and the failing ones (below
    $threshold, or infra / ungraded). A rollout without a sample is a cluster of its own."""
    excluded = ", ".join(_lit(s) for s in EXCLUDED_STATUSES)
    return f"""
    SELECT run_id AS run, coalesce(sample_id, 'rollout:' || rollout_id) AS unit, count(*) AS rollouts,
           count(*) FILTER (WHERE status IN ({excluded}) OR coalesce(score, 0.0) < {pass_at_sql()}) AS failures
    FROM rollouts WHERE list_contains($runs, run_id)
    GROUP BY ALL ORDER BY run, unit
    """


# ---- features -> vectors -> modes ---------------------------------------------------------------

CALL_BINS = [(0, 0, "0"), (1, 2, "1-2"), (3, 5, "3-5"), (6, 10, "6-10"), (11, 20, "11-20"), (21, 50, "21-50")]
NO_CALLS = "<no_calls>"
# field -> block: what the vectors are made of (each field one unit vector; a block's weight is
# shared by its fields that vary)
FIELDS = {"tools": "path", "calls": "path",
          "errors": "process", "empty": "process", "loop": "process", "end": "process",
          "shape": "answer", "grounding": "answer", "reference": "answer"}


def _bin(n: int) -> str:
    for lo, hi, name in CALL_BINS:
        if lo <= n <= hi:
            return name
    return ">50"


def _has(value) -> bool:
    return isinstance(value, str) and bool(value)


def _tools(seq: str, answered: bool = False) -> list[str]:
    """The tools of a call sequence (``answered``: only calls that did not fail)."""
    return [c.split("(")[0] for c in seq.split() if not (answered and "(" in c)]


def grounding_of(row: dict) -> str:
    """all (every value the answer brings is in a tool output), partly, scaled (found only at
    another scale), none_found, or none (the answer brings no value of its own)."""
    n, g = int(row["answer_values"]), int(row["grounded_values"])
    if n == 0:
        return "none"
    if g == n:
        return "all"
    if g > 0:
        return "partly"
    return "scaled" if int(row["scaled_values"]) > 0 else "none_found"


def reference_of(row: dict) -> str:
    """The answer against the sample's reference: no_reference, exact, contains (the reference's
    text inside the answer), same_value (in another form), scaled (the same digits at another
    scale: the unit), no_number, other."""
    if not row["has_reference"]:
        return "no_reference"
    if row["ref_exact"]:
        return "exact"
    if row["ref_contains"]:
        return "contains"
    if row["ref_same"]:
        return "same_value"
    if row["ref_scaled"]:
        return "scaled"
    return "no_number" if int(row["answer_numbers"]) == 0 else "other"


def end_of(row: dict) -> str:
    """How the run ended: truncated, model_error, no_calls, after_error (the last call failed),
    after_ok."""
    if row["truncated"]:
        return "truncated"
    if row["status"] == "model_error":
        return "model_error"
    if int(row["n_tool_calls"]) == 0:
        return "no_calls"
    return "after_error" if row["last_call_failed"] else "after_ok"


def errors_of(row: dict) -> str:
    """Failed calls: none, recovered (each one later made good by a call of the same tool that
    succeeded), unrecovered (one was not: the agent went on, or stopped, without it). Their
    classes (timeout, server error ...) only name modes."""
    if int(row["failed_calls"]) == 0:
        return "none"
    return "unrecovered" if int(row["unrecovered_calls"]) else "recovered"


def empty_of(row: dict) -> str:
    """Calls that succeeded but found nothing (empty output, "no results", "not found"): none, last
    (the last call), earlier."""
    if int(row["empty_calls"]) == 0:
        return "none"
    return "last" if row["last_call_empty"] else "earlier"


def loop_of(row: dict) -> str:
    """Loops: the same call (tool and arguments) 3+ or 10+ times in a row, or 5+ times in all (a
    cycle of calls); "none" otherwise (a file read twice is no loop)."""
    in_a_row, total = int(row["max_in_a_row"]), int(row["max_identical"])
    if in_a_row >= 10 or total >= 10:
        return "10+"
    return "3+" if in_a_row >= 3 or total >= 5 else "none"


def _fields(row: dict) -> dict:
    """A failing rollout's facts, by field (``FIELDS``): tokens, or a number for ``calls`` (the
    call count) and ``grounding`` (the share of the answer's own values found in a tool output;
    NaN when it brings none)."""
    tools = _tools(row["sequence"], answered=True)  # what the agent got answers from: a failed call gave nothing
    shape = row["answer_shape"]
    n_values = int(row["answer_values"])
    if shape == "question" and (n_values or int(row["answer_numbers"])):
        shape = "answer"  # a closing "anything else?" after the answer asks nothing back
    if row["truncated"]:  # cut off: whatever text it ended on is no answer
        shape, n_values = "empty", 0
    end = end_of(row)
    return {
        "tools": sorted(set(tools)) or [NO_CALLS], "calls": int(row["n_tool_calls"]),
        "errors": [errors_of(row)], "empty": [empty_of(row)],
        # how it ended, as a limit or a crash; whether the last call failed only names modes (labels)
        "loop": [loop_of(row)], "end": [end if end in ("truncated", "model_error") else "finished"],
        # the shape as behaviour (a refusal, a question, nothing); its surface form only in labels
        "shape": [shape if shape in ("empty", "refusal", "question") else "answer"],
        "grounding": int(row["grounded_values"]) / n_values if n_values else math.nan,
        "reference": ["cut_off" if row["truncated"] else reference_of(row)],
    }


def _ngrams(seq: str, n_max: int) -> list[str]:
    calls = seq.split()
    if not calls:
        return [NO_CALLS]
    out = []
    for n in range(1, n_max + 1):
        out += [" ".join(calls[i:i + n]) for i in range(len(calls) - n + 1)]
    return out


def _label_tokens(row: dict, fields: dict) -> list[str]:
    """What the labels read: every field as ``field=value`` (the call count binned, grounding as
    ``grounding_of`` says it), call n-grams with their outcomes (up to 3), the first and last tool,
    the tool of a loop, the failed calls and the last of them, normalised error messages, the
    answer's shape and format, the turn count. ``fields``: the row's ``_fields``."""
    out = [f"{name}={v}" for name, values in fields.items() if name not in NUMERIC for v in values]
    out = [t for t in out if not t.startswith("end=")] + [f"end={end_of(row)}"]
    out += [f"err={c}" for c in row["err_classes"] if _has(c)]
    out += [f"calls={_bin(fields['calls'])}", f"grounding={grounding_of(row)}",
            f"last_error={row['last_error'] if _has(row['last_error']) else 'none'}"]
    if row["answer_shape"] not in ("empty", "refusal", "question"):
        out.append(f"shape={row['answer_shape']}")
    out += [f"seq:{g}" for g in _ngrams(row["sequence"], 3)]
    if _has(row["first_tool"]):
        out.append(f"first={row['first_tool']}")
    if _has(row["last_tool"]):
        out.append(f"last={row['last_tool']}")
    if loop_of(row) != "none" and _has(row["identical_tool"]):
        out.append(f"loop_tool={row['identical_tool']}")
    out += sorted({f"failed={c}" for c in row["sequence"].split() if "(" in c})
    out += [f"error~{e[:60]}" for e in row["call_errors"] if _has(e)]
    if _has(row["error_masked"]):
        out.append(f"error~{row['error_masked'][:60]}")
    if _has(row["answer_mask"]):
        out.append(f"form~{row['answer_mask']}")
    out.append(f"turns={_bin(int(row['n_turns']))}")
    return out


def _rows(frame: pd.DataFrame) -> list[dict]:
    """The frame's rows as dicts of plain Python values (iterating Arrow-backed columns row by
    row is slow)."""
    cols = {c: frame[c].tolist() for c in frame.columns}
    return [dict(zip(cols, values)) for values in zip(*cols.values())]


def _token_docs(tokens: list[list[str]]):
    """A (rows x distinct tokens) 0/1 matrix and its vocabulary."""
    from sklearn.feature_extraction.text import CountVectorizer

    vec = CountVectorizer(analyzer=lambda x: x, binary=True, lowercase=False)
    return vec.fit_transform(tokens), vec.get_feature_names_out()


def _calls_vector(n) -> np.ndarray:
    """A call count as a unit vector on a quarter circle, log-scaled to 50 calls and beyond: 8
    and 11 calls are close, 0 and 20 far apart."""
    theta = np.minimum(1.0, np.log1p(np.asarray(n, dtype=float)) / math.log1p(50)) * math.pi / 2
    return np.column_stack([np.cos(theta), np.sin(theta)])


def _grounding_vector(share) -> np.ndarray:
    """The grounded share as a unit vector: every value found and none found at right angles,
    a part in between; an answer without values of its own on a third axis."""
    share = np.asarray(share, dtype=float)
    none = np.isnan(share)
    theta = (1 - np.nan_to_num(share, nan=1.0)) * math.pi / 2
    return np.column_stack([none.astype(float), np.where(none, 0.0, np.cos(theta)), np.where(none, 0.0, np.sin(theta))])


NUMERIC = {"calls": _calls_vector, "grounding": _grounding_vector}


class _Vectorizer:
    """Fields -> one row vector per failure: each field (``FIELDS``) a unit vector (its tokens,
    equally weighted; ``NUMERIC`` fields on a circle), scaled by the square root of the field's
    weight. A block's weight (FAILURE_MODES_WEIGHTS) is shared equally by its fields; a field every
    fitted failure has the same way says nothing and drops out, and the weights are scaled to sum
    to 1 (so one constant field does not hand its weight to its neighbours). So the cosine distance of two failures is the weighted share of what differs
    between them, and no field weighs more than its share however many values it has.
    ``field_shares``: each field's share of the mean squared distance between two failures (how
    much of what sets failures apart it carries, measured)."""

    def __init__(self):
        self.weights = dict(FAILURE_MODES_WEIGHTS)

    @staticmethod
    def _key(name: str, value):
        if name in NUMERIC:
            return "none" if isinstance(value, float) and math.isnan(value) else round(float(value), 6)
        return tuple(value)

    def fit(self, docs: list[dict]) -> "_Vectorizer":
        self.vocab = {name: {t: i for i, t in enumerate(sorted({t for d in docs for t in d[name]}))}
                      for name in FIELDS if name not in NUMERIC}
        varying = {name: len({self._key(name, d[name]) for d in docs}) > 1 for name in FIELDS}
        size = {b: sum(1 for f in FIELDS if FIELDS[f] == b) for b in set(FIELDS.values())}
        raw = {name: self.weights.get(block, 0.0) / size[block] if varying[name] else 0.0
               for name, block in FIELDS.items()}
        total = sum(raw.values())
        self.field_weight = {name: (w / total if total else 0.0) for name, w in raw.items()}
        self.field_shares = None
        return self

    def _part(self, name: str, docs: list[dict]):
        from scipy import sparse

        if name in NUMERIC:
            return sparse.csr_matrix(NUMERIC[name]([d[name] for d in docs]))
        vocab = self.vocab[name]
        rows, cols = [], []
        for i, d in enumerate(docs):
            for t in d[name]:
                j = vocab.get(t)
                if j is not None:  # a value the fitted failures never had weighs nothing
                    rows.append(i)
                    cols.append(j)
        m = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(docs), max(1, len(vocab))))
        norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
        return sparse.diags(1 / np.maximum(norms, 1e-12)) @ m

    def transform(self, docs: list[dict]) -> np.ndarray:
        from scipy import sparse

        parts = [math.sqrt(self.field_weight[name]) * self._part(name, docs) for name in FIELDS]
        if self.field_shares is None:  # on the fitted failures: E||x_a - x_b||^2 = 2 (E||x||^2 - ||E x||^2)
            spread = {}
            for name, m in zip(FIELDS, parts):
                mean = np.asarray(m.mean(axis=0)).ravel()
                spread[name] = 2 * (float(m.multiply(m).sum()) / max(1, m.shape[0]) - float(mean @ mean))
            total = sum(spread.values())
            self.field_shares = {n: (v / total if total > 0 else 0.0) for n, v in spread.items()}
        joint = sparse.hstack(parts).tocsr().toarray()
        return joint / np.maximum(np.linalg.norm(joint, axis=1, keepdims=True), 1e-12)


@dataclass
class _Features:
    frame: pd.DataFrame              # failure_features_sql, model failures
    binary: object                   # rows x label tokens, 0/1
    vocab: np.ndarray
    vectors: np.ndarray              # rows x dims, unit length
    vectorizer: _Vectorizer


def _features(frame: pd.DataFrame) -> _Features:
    """Label tokens and vectors of failures, by a vectorizer fitted on them."""
    rows = _rows(frame)
    docs = [_fields(r) for r in rows]
    vectorizer = _Vectorizer().fit(docs)
    vectors = vectorizer.transform(docs)
    binary, vocab = _token_docs([_label_tokens(r, d) for r, d in zip(rows, docs)])
    return _Features(frame, binary.tocsr(), vocab.astype(object), vectors, vectorizer)


def _unique(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows (rounded), the row each failure maps to, and how many failures each holds."""
    rounded = np.round(vectors, 6)
    uniq, inverse, counts = np.unique(rounded, axis=0, return_inverse=True, return_counts=True)
    return uniq, inverse.ravel(), counts


def _k_range(n: int) -> range:
    """The ks tried: 2 .. min(K_MAX, sqrt(n / 2)) (Mardia's rule of thumb), at least 2..2."""
    return range(2, max(2, min(FAILURE_MODES_K_MAX, int(math.sqrt(n / 2)))) + 1)


def _choose_k(vectors: np.ndarray, labels_for: Callable[[int], np.ndarray], n_distinct: int, seed: int,
              info: dict) -> tuple[np.ndarray, dict]:
    """k-means' k: cut into each k of ``_k_range`` and take the k with the best silhouette (of the
    unit vectors, euclidean), measured on a seeded sample of at most
    FAILURE_MODES_SILHOUETTE_SAMPLE failures; a tie goes to the larger k."""
    from sklearn.metrics import silhouette_score

    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(vectors), size=min(len(vectors), FAILURE_MODES_SILHOUETTE_SAMPLE), replace=False))
    scores, cuts = {}, {}
    for kk in _k_range(len(vectors)):
        if kk > n_distinct:
            break
        labels = labels_for(kk)
        if len(np.unique(labels[pick])) < 2:
            continue
        scores[kk] = float(silhouette_score(vectors[pick], labels[pick]))
        cuts[kk] = labels
    if not scores:
        return labels_for(min(2, n_distinct)), {**info, "k": min(2, n_distinct), "k_chosen_by": "the only split"}
    k = max(scores, key=lambda kk: (round(scores[kk], 9), kk))
    return cuts[k], {**info, "k": k, "k_chosen_by": "silhouette", "silhouette": scores}


def _average_linkage(vectors: np.ndarray, k: int | None, seed: int) -> tuple[np.ndarray, dict]:
    """Average-linkage agglomerative clustering (cosine) of the distinct vectors; past
    FAILURE_MODES_LINKAGE_MAX distinct vectors, of a seeded sample of them, the others joining the
    group whose centre is nearest. k given, or the most modes (up to ``_k_range``) that still lie
    FAILURE_MODES_MIN_SEPARATION apart: the tree cut where the average distance between two modes
    — the weighted share of what differs between their failures — falls below it. (The silhouette
    chose k before: it rewards splitting groups that are nearly the same when each is tight, as
    identical failures make them, and it kept apart modes that differ in one answer field only when
    they were also far from the rest.)"""
    from scipy.cluster.hierarchy import fcluster, linkage

    uniq, inverse, counts = _unique(vectors)
    n_distinct = len(uniq)
    info: dict = {"method": "average", "distinct_vectors": n_distinct}
    if n_distinct < 2:
        return np.zeros(len(vectors), dtype=int), {**info, "k": 1, "k_chosen_by": "one distinct failure pattern"}
    rng = np.random.default_rng(seed)
    sample = None
    if n_distinct > FAILURE_MODES_LINKAGE_MAX:
        sample = np.sort(rng.choice(n_distinct, size=FAILURE_MODES_LINKAGE_MAX, replace=False,
                                    p=counts / counts.sum()))
        info["linkage_sample"] = FAILURE_MODES_LINKAGE_MAX
    tree = linkage(uniq if sample is None else uniq[sample], method="average", metric="cosine")

    def labels_for(kk: int) -> np.ndarray:
        cut = fcluster(tree, kk, criterion="maxclust") - 1
        if sample is not None:
            centres = np.vstack([uniq[sample][cut == c].mean(axis=0) for c in range(cut.max() + 1)])
            centres /= np.maximum(np.linalg.norm(centres, axis=1, keepdims=True), 1e-12)
            cut = np.argmax(uniq @ centres.T, axis=1)
        return cut[inverse]

    if k is not None:
        k = min(int(k), n_distinct)
        return labels_for(k), {**info, "k": k, "k_chosen_by": "given"}
    heights = tree[::-1, 2]  # heights[k - 2]: the merge that would join two of k modes
    ks = [kk for kk in _k_range(len(vectors)) if kk <= n_distinct and heights[kk - 2] >= FAILURE_MODES_MIN_SEPARATION]
    k = max(ks, default=min(2, n_distinct))
    return labels_for(k), {**info, "k": k, "k_chosen_by": "distance",
                           "separation": float(heights[k - 2]) if k >= 2 else math.nan}


def _kmeans(vectors: np.ndarray, k: int | None, seed: int) -> tuple[np.ndarray, dict]:
    """k-means on the distinct vectors (weighted by how many failures share each); k given, or by
    ``_choose_k``."""
    from sklearn.cluster import KMeans

    uniq, inverse, counts = _unique(vectors)
    n_distinct = len(uniq)
    info: dict = {"method": "kmeans", "distinct_vectors": n_distinct}
    if n_distinct < 2:
        return np.zeros(len(vectors), dtype=int), {**info, "k": 1, "k_chosen_by": "one distinct failure pattern"}

    def labels_for(kk: int) -> np.ndarray:
        if kk < 2:
            return np.zeros(len(vectors), dtype=int)
        return KMeans(n_clusters=kk, n_init=10, random_state=seed).fit(uniq, sample_weight=counts).labels_[inverse]

    if k is not None:
        k = min(int(k), n_distinct)
        return labels_for(k), {**info, "k": k, "k_chosen_by": "given"}
    return _choose_k(vectors, labels_for, n_distinct, seed, info)


def _hdbscan(vectors: np.ndarray, seed: int) -> tuple[np.ndarray, dict]:
    """HDBSCAN (no k); failures it leaves as noise form one mode of their own (label -1)."""
    from sklearn.cluster import HDBSCAN

    size = max(FAILURE_MODES_MIN_SIZE, int(round(0.02 * len(vectors))))
    labels = HDBSCAN(min_cluster_size=size, min_samples=FAILURE_MODES_MIN_SIZE, copy=True).fit_predict(vectors)
    return labels, {"method": "hdbscan", "min_cluster_size": size, "k": int(len(set(labels) - {-1})),
                    "noise": int((labels == -1).sum())}


def _cluster(feats: _Features, method: str, k: int | None, seed: int) -> tuple[np.ndarray, dict]:
    n = len(feats.frame)
    if n < 2 * FAILURE_MODES_MIN_SIZE and k is None:
        return np.zeros(n, dtype=int), {"method": method, "k": 1, "k_chosen_by": f"fewer than "
                                        f"{2 * FAILURE_MODES_MIN_SIZE} failures"}
    if method == "hdbscan":
        return _hdbscan(feats.vectors, seed)
    if method == "kmeans":
        return _kmeans(feats.vectors, k, seed)
    return _average_linkage(feats.vectors, k, seed)


def check_k(k, failures: int, what: str = "model failures") -> None:
    """``k`` modes of ``failures``: a whole number from 1 to ``failures``, or None (chosen by
    silhouette). Raises ValueError naming the valid range."""
    if k is None:
        return
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k={k!r}: give a whole number of modes, or leave k out to choose it by silhouette")
    if failures == 0:
        raise ValueError(f"k={k}: there are no {what} to group; leave k out")
    if not 1 <= k <= failures:
        raise ValueError(f"k={k}: give a number of modes from 1 to {failures} (the {what} to group), or leave "
                         "k out to choose it by silhouette")


# ---- labels --------------------------------------------------------------------------------------

SHAPE_WORDS = {"empty": "no final answer", "refusal": "ends in a refusal", "question": "ends with a question",
               "number": "answers a bare number", "number_unit": "answers a number with a unit",
               "short_text": "a short text answer", "text": "a text answer"}
ERROR_WORDS = {"timeout": "timeouts", "rate_limit": "rate limits", "server_error": "server errors",
               "not_found": "“not found” errors", "denied": "denials", "invalid": "invalid-call errors",
               "error": "errors"}
GROUNDING_WORDS = {"all": "answers with values the tools returned", "partly": "some of its values come from no tool",
                   "scaled": "answers a tool's number at another scale",
                   "none_found": "answers a value no tool returned", "none": "its last message states no value"}
EMPTY_WORDS = {"none": "no call came back empty", "earlier": "a call came back empty", "last": "its last call came back empty"}
REFERENCE_WORDS = {"exact": "the reference's own text", "contains": "the reference inside a longer answer",
                   "same_value": "right value, wrong format", "scaled": "right number, wrong unit",
                   "no_number": "no number in the answer", "other": "a value other than the reference's",
                   "no_reference": "no reference", "cut_off": "cut off before answering"}
END_WORDS = {"truncated": "cut off at a limit", "model_error": "a model error", "no_calls": "no tool calls",
             "after_error": "stops right after a failed call", "after_ok": "stops after a successful call"}
LOOP_WORDS = {"3+": "the same call again and again", "10+": "the same call 10+ times", "none": "no loop"}


def _call_words(token: str) -> str:
    m = re.fullmatch(r"(.+)\((\w+)\)", token)
    return f"`{m.group(1)}` {m.group(2).replace('_', ' ')}" if m else f"`{token}`"


def phrase(feature: str) -> str:
    """A feature token in words."""
    if feature.startswith("seq:"):
        calls = feature[4:].split()
        if calls == [NO_CALLS]:
            return "no tool calls"
        if len(set(calls)) == 1 and len(calls) > 1:
            return f"{_call_words(calls[0])} ×{len(calls)} in a row"
        if len(calls) == 1:
            return "calls " + _call_words(calls[0]) if "(" not in calls[0] else _call_words(calls[0])
        return " → ".join(_call_words(c) for c in calls)
    key, sep, value = feature.partition("=") if "=" in feature else feature.partition("~")
    if not sep:
        return feature
    if sep == "~":
        what = {"form": "answer shaped like", "error": "error"}.get(key, key)
        return f"{what} “{value}”"
    if key in ("calls", "turns"):
        return ("no tool calls" if value == "0" else f"{value.replace('>', 'over ')} tool calls") if key == "calls" \
            else f"{value.replace('>', 'over ')} turns"
    if key == "tools":
        return "no tool calls" if value == NO_CALLS else f"calls `{value}`"
    if key == "errors":
        return {"none": "no failed call", "recovered": "a failed call made good by a retry",
                "unrecovered": "goes on without a call that failed"}.get(value, value)
    if key == "err":
        return f"tool {ERROR_WORDS.get(value, value)}"
    if key == "last_error":
        return "no failed call" if value == "none" else f"last failed call {_call_words(value)}"
    if key == "failed":
        return _call_words(value)
    if key == "loop":
        return LOOP_WORDS.get(value, value)
    if key == "loop_tool":
        return f"repeats one `{value}` call"
    if key == "end":
        return END_WORDS.get(value, value)
    if key == "empty":
        return EMPTY_WORDS.get(value, value)
    if key == "shape":
        return SHAPE_WORDS.get(value, f"answer {value}")
    if key == "grounding":
        return GROUNDING_WORDS.get(value, value)
    if key == "reference":
        return REFERENCE_WORDS.get(value, value)
    if key == "first":
        return f"starts with `{value}`"
    if key == "last":
        return f"last call `{value}`"
    return feature


def _distinguishing(binary, vocab, members: np.ndarray, others: np.ndarray) -> list[tuple[str, float, float]]:
    """(feature, share in the mode, share in the other failures), most distinguishing first: the
    difference of shares times the share of all failures without the feature (what most failures
    have says little), for features at least FAILURE_MODES_LABEL_MIN_SHARE of the mode has."""
    p_in = np.asarray(binary[members].mean(axis=0)).ravel()
    p_out = np.asarray(binary[others].mean(axis=0)).ravel() if others.any() else np.zeros_like(p_in)
    p_all = np.asarray(binary.mean(axis=0)).ravel()
    score = (p_in - p_out) * (1 - p_all)
    keep = np.where(p_in >= FAILURE_MODES_LABEL_MIN_SHARE)[0]
    order = keep[np.lexsort((vocab[keep].astype(str), -np.round(score[keep], 9)))]
    return [(str(vocab[i]), float(p_in[i]), float(p_out[i])) for i in order]


def _tool_of(feature: str) -> str | None:
    """The tool a feature is about: a call unigram, the first or last call, a loop."""
    if feature.startswith("seq:") and " " not in feature[4:]:
        return feature[4:].split("(")[0]
    if feature.startswith(("first=", "last=", "tools=", "loop_tool=")):
        return feature.split("=", 1)[1]
    return None


def _redundant(feature: str, chosen: list[str]) -> bool:
    """Says nothing new beside the chosen features: a call n-gram inside a chosen one (or the
    other way round), the same tool again (calls `x`, last call `x`), the turn count beside the
    same call count, or the same words twice."""
    words = phrase(feature)
    tool = _tool_of(feature)
    for c in chosen:
        if phrase(c) == words or (tool is not None and _tool_of(c) == tool):
            return True
        if feature.startswith("seq:") and c.startswith("seq:"):
            a, b = f" {feature[4:]} ", f" {c[4:]} "
            if a in b or b in a:
                return True
        pair = {feature.split("=")[0], c.split("=")[0]}
        if pair == {"calls", "turns"} and feature.split("=")[-1] == c.split("=")[-1]:
            return True
    return False


def _behaviours(ranked: list[tuple[str, float, float]]) -> list[tuple[str, float, set[str]]]:
    """Behaviours a person recognises, from the features that set a mode apart (``ranked``: each
    feature with its share in the mode and in the other failures; a feature qualifies when at
    least FAILURE_MODES_LABEL_MIN_SHARE of the mode has it). Each: (words, how much more of the
    mode shows it than of the others, the features it uses)."""
    p_in = {f: a for f, a, _ in ranked}
    lift = {f: a - b for f, a, b in ranked}

    def has(f: str) -> bool:
        return f in p_in

    def apart(f: str) -> bool:
        return f in lift and lift[f] >= FAILURE_MODES_LABEL_MIN_DIFF

    out: list[tuple[str, float, set[str]]] = []
    gives_up = [f for f in ("shape=refusal", "shape=empty") if has(f)]
    # a tool that failed twice in a row: retries
    retries = [(f, f[4:].split()[0]) for f, _, _ in ranked
               if f.startswith("seq:") and len(f[4:].split()) >= 2 and len(set(f[4:].split())) == 1 and "(" in f and apart(f)]
    truncated = apart("end=truncated")
    retried = None
    if retries:
        f, call = retries[0]
        retried, cls = re.fullmatch(r"(.+)\((\w+)\)", call).groups()
        words = f"retries `{retried}` after {ERROR_WORDS.get(cls, cls + 's')}"
        if truncated:
            out.append((words + " until cut off", lift[f], {f, "end=truncated", *gives_up}))
        elif gives_up:
            out.append((words + ", then gives up", lift[f], {f, *gives_up}))
        else:
            out.append((words, lift[f], {f}))
    if has("tools=" + NO_CALLS) and apart("tools=" + NO_CALLS):
        f = "tools=" + NO_CALLS
        how = "without calling a tool" if has("calls=0") else "before any tool call succeeds"
        if gives_up:
            out.append((f"gives up {how}", lift[f], {f, *gives_up}))
        else:
            out.append((f"answers {how}", lift[f], {f}))
    for value, words in (("scaled", "right number, wrong unit"), ("same_value", "right value, wrong format")):
        f = f"reference={value}"
        if apart(f):
            out.append((words, lift[f], {f}))
    if apart("grounding=none_found"):
        f = "grounding=none_found"
        what = "a number" if has("shape=number") or has("shape=number_unit") else "a value"
        if apart("errors=unrecovered") and not gives_up:
            out.append((f"ignores a failed call, answers {what} no tool returned", lift[f] + lift["errors=unrecovered"],
                        {f, "errors=unrecovered"}))
        else:
            out.append((f"answers {what} no tool returned", lift[f], {f}))
    if apart("grounding=scaled"):
        out.append(("answers a tool's number at another scale", lift["grounding=scaled"], {"grounding=scaled"}))
    if apart("reference=other") and has("grounding=all"):
        out.append(("takes the wrong value from a tool output", lift["reference=other"], {"reference=other", "grounding=all"}))
    elif apart("reference=other") and not apart("grounding=none_found"):
        out.append(("answers a wrong value", lift["reference=other"], {"reference=other"}))
    for value in ("exact", "contains"):  # right by the reference, failed all the same: read the grader
        if apart(f"reference={value}"):
            out.append(("gives the reference answer, yet scores below the pass mark", lift[f"reference={value}"],
                        {f"reference={value}"}))
            break
    loops = [f for f, _, _ in ranked if f.startswith("loop_tool=") and apart(f) and f.split("=", 1)[1] != retried]
    if retried is not None and truncated:
        pass  # said: "... until cut off"
    elif loops:
        tool = loops[0].split("=", 1)[1]
        big = "10+" if has("loop=10+") else "3+"
        words = f"repeats the same `{tool}` call" + (" until cut off" if truncated else f" {big} times")
        out.append((words, lift[loops[0]], {loops[0], *(["end=truncated", *gives_up] if truncated else [])}))
    elif any(apart(f"loop={n}") for n in ("3+", "10+")):  # loops on whichever tool came next
        f = "loop=10+" if apart("loop=10+") else "loop=3+"
        words = "repeats the same call" + (" until cut off" if truncated else f" {f[5:]} times")
        out.append((words, lift[f], {f, *(["end=truncated", *gives_up] if truncated else [])}))
    elif truncated:
        many = [f for f, _, _ in ranked if f.startswith("calls=") and apart(f)]
        words = "cut off at a limit" + (f" after {phrase(many[0])}" if many else "")
        out.append((words, lift["end=truncated"], {"end=truncated", *many[:1], *gives_up}))
    last = [f for f, _, _ in ranked if f.startswith("last_error=") and f != "last_error=none" and apart(f)]
    if last and not retries:
        call = last[0].split("=", 1)[1]
        tool, cls = re.fullmatch(r"(.+)\((\w+)\)", call).groups()
        what = ERROR_WORDS.get(cls, cls + "s").rstrip("s")
        if apart("end=after_error"):
            words = f"stops after a `{tool}` {what}"
        else:
            words = f"goes on after a `{tool}` {what}"
        out.append((words, lift[last[0]], {last[0]}))
    for f, _, _ in ranked:  # a tool the mode uses and the other failures rarely do
        if f.startswith("tools=") and f != "tools=" + NO_CALLS and apart(f):
            tool = f.split("=", 1)[1]
            if re.search(HANDOVER, tool, re.I):
                out.append((f"hands over to a person (`{tool}`)", lift[f], {f}))
            elif lift[f] >= 0.4:
                out.append((f"calls `{tool}`", lift[f], {f}))
            else:
                continue
            break
    if apart("empty=last") and not any("grounding=none_found" in used for _, _, used in out):
        out.append(("its last call came back empty", lift["empty=last"], {"empty=last"}))
    elif apart("empty=last"):
        out = [(w.replace("answers a number no tool returned", "answers a number although its last call came back empty")
                .replace("answers a value no tool returned", "answers a value although its last call came back empty"),
                sc, used | ({"empty=last"} if "grounding=none_found" in used else set())) for w, sc, used in out]
    if apart("shape=question") and not out:
        out.append(("ends with a question to the user", lift["shape=question"], {"shape=question"}))
    if gives_up and not any(g in used for _, _, used in out for g in gives_up) and apart(gives_up[0]):
        out.append(("gives up" if gives_up[0] == "shape=refusal" else "gives no final answer", lift[gives_up[0]],
                    {gives_up[0]}))
    return sorted(out, key=lambda b: -b[1])


# what a failure does not do names no mode
ABSENCES = {"end=after_ok", "errors=none", "loop=none", "empty=none", "last_error=none", "reference=no_reference"}
# an answer's surface form names no mode either (it stays in ``features``)
SURFACE = ("form~", "shape=number", "shape=short_text", "shape=text", "shape=answer")


def _label(ranked: list[tuple[str, float, float]]) -> tuple[str, str]:
    """(label in words, the features behind it with their shares). The label names up to two
    behaviours (``_behaviours``); when none applies, the distinguishing features in words."""
    shares = {f: (a, b) for f, a, b in ranked}
    behaviours = _behaviours(ranked)
    if behaviours:
        picked, used = [], set()
        for words, _, features in behaviours:
            if features & used or any(words in p or p in words for p in picked):
                continue
            picked.append(words)
            used |= features
            if len(picked) == 2:
                break
        features = "; ".join(f"{f} ({shares[f][0]:.0%} vs {shares[f][1]:.0%})" for f in sorted(used) if f in shares)
        return ", ".join(picked), features
    chosen: list[tuple[str, float, float]] = []
    for feature, p_in, p_out in ranked:
        if (p_in - p_out < FAILURE_MODES_LABEL_MIN_DIFF or feature in ABSENCES or feature.startswith(SURFACE)
                or _redundant(feature, [c[0] for c in chosen])):
            continue
        chosen.append((feature, p_in, p_out))
        if len(chosen) == FAILURE_MODES_LABEL_FEATURES:
            break
    if not chosen:
        return "no pattern sets these apart from the other failures", ""
    label = ", ".join(phrase(f) for f, _, _ in chosen)
    features = "; ".join(f"{f} ({p_in:.0%} vs {p_out:.0%})" for f, p_in, p_out in chosen)
    return label, features


# ---- fitting -------------------------------------------------------------------------------------

@dataclass
class Fit:
    """Failing rollouts of some runs, each with its mode, and one row per mode."""
    assignments: pd.DataFrame
    modes: pd.DataFrame  # mode, kind, label, auto_label, features, examples (over the failures fitted)
    info: dict = field(default_factory=dict)


def _readable(seq: str) -> str:
    return " → ".join(seq.split()) if seq else "(no tool calls)"


def unit_of(sample_id, rollout_id) -> str:
    """The unit resampled and split on: the sample, or the rollout itself when it has none (as
    ``run_counts_sql`` names it)."""
    return sample_id if isinstance(sample_id, str) else f"rollout:{rollout_id}"


def _infra_key(r) -> str:
    if r.status == "ungraded":
        return "never graded"
    msg = r.error_masked if isinstance(r.error_masked, str) and r.error_masked else (
        r.call_errors[-1] if len(r.call_errors) else None)
    return f"infra error: {msg}" if msg else "infra error (no message logged)"


def _infra_modes(frame: pd.DataFrame, fitted: np.ndarray) -> tuple[pd.Series, list[dict]]:
    """Infra errors grouped by their normalised error (ungraded rollouts apart): the
    FAILURE_MODES_INFRA_GROUPS keys most common among the ``fitted`` rows, the rest pooled."""
    keys = pd.Series([_infra_key(r) for r in frame.itertuples()], index=frame.index, dtype=object)
    counts = keys[fitted].value_counts()
    order = sorted(counts.index, key=lambda x: (-counts[x], x))
    kept = order[:FAILURE_MODES_INFRA_GROUPS]
    keys = keys.where(keys.isin(kept), "other infra errors")
    groups = kept + (["other infra errors"] if (keys == "other infra errors").any() else [])
    modes = []
    for i, g in enumerate(groups, start=1):
        members = frame[(keys == g).to_numpy() & fitted]
        if members.empty:
            members = frame[keys == g]
        modes.append({"mode": f"I{i}", "kind": "infra", "label": g, "auto_label": g, "features": "",
                      "examples": list(members.rollout_id[:FAILURE_MODES_EXAMPLES])})
    names = {g: f"I{i}" for i, g in enumerate(groups, start=1)}
    return keys.map(names), modes


def _summary_for_labeler(mode: dict, members: pd.DataFrame, ranked) -> dict:
    ex = members.set_index("rollout_id").loc[mode["examples"]]
    return {"mode": mode["mode"], "kind": mode["kind"], "label": mode["auto_label"], "rollouts": len(members),
            "features": [{"feature": f, "words": phrase(f), "share_in_mode": a, "share_in_other_failures": b}
                         for f, a, b in ranked[:10]],
            "examples": [{"rollout_id": rid, "sequence": _readable(r.sequence), "final_answer": r.final_answer,
                          "error": r.error, "grounding": GROUNDING_WORDS[grounding_of(r.to_dict())],
                          "reference": REFERENCE_WORDS[reference_of(r.to_dict())]} for rid, r in ex.iterrows()]}


def _features_frame(con, runs: list[str], thr: float) -> pd.DataFrame:
    frame = run_sql(con, failure_features_sql(), {"runs": runs, "threshold": thr,
                                                  "text_chars": FAILURE_MODES_TEXT_CHARS}).df()
    for col in ("err_classes", "call_errors"):
        frame[col] = [list(v) if v is not None and not isinstance(v, float) else [] for v in frame[col]]
    return frame


def fit(con, runs: str | list[str], pass_threshold: float | None = None, k: int | None = None,
        method: str = "average", seed: int = 0, labeler: Callable[[dict], str] | None = None,
        fit_units: set[str] | None = None) -> Fit:
    """Group the failing rollouts of ``runs`` (together) into modes. What ``failure_modes`` and
    ``failure_modes_diff`` share. ``fit_units``: fit on the failures of these samples only (labels
    and examples from them too); every other failure joins the mode whose centre is nearest
    (cosine), infra errors the group of their message."""
    if method not in METHODS:
        raise ValueError(f"method: one of {', '.join(METHODS)}")
    runs = resolve_runs(con, runs)
    thr = common_threshold(con, runs, pass_threshold)  # None: each run's own
    # in the order of the rollouts' ids, not of their runs: the modes are a function of the failures
    # alone, whichever run each came from (what makes the diff's permutation test exact)
    frame = _features_frame(con, runs, thr)
    frame = frame.assign(_pos=np.arange(len(frame))).sort_values("rollout_id", kind="stable").reset_index(drop=True)
    units = np.array([unit_of(s, r) for s, r in zip(frame.sample_id, frame.rollout_id)], dtype=object)
    fitted_all = np.ones(len(frame), dtype=bool) if fit_units is None else np.isin(units, list(fit_units))
    is_model = (frame.kind == "model").to_numpy()
    model = frame[is_model].reset_index(drop=True)
    infra = frame[~is_model].reset_index(drop=True)
    fitted_model, fitted_infra = fitted_all[is_model], fitted_all[~is_model]
    info: dict = {"runs": runs, "pass_threshold": thr, "seed": seed, "method": method,
                  "model_failures": len(model), "infra_failures": len(infra),
                  "model_failures_fitted": int(fitted_model.sum())}
    check_k(k, int(fitted_model.sum()))
    modes: list[dict] = []
    model_mode = pd.Series([], dtype=object)
    similarity = np.array([])
    if fitted_model.any():
        fit_rows = model[fitted_model].reset_index(drop=True)
        feats = _features(fit_rows)
        labels, cinfo = _cluster(feats, method, k, seed)
        info.update(cinfo, field_weights=dict(feats.vectorizer.field_weight),
                    field_shares={n: round(v, 6) for n, v in feats.vectorizer.field_shares.items()})
        # modes numbered by size (largest first), ties by the first rollout's position; noise last
        ids = [lab for lab in pd.unique(labels) if lab != -1]
        size = {lab: int((labels == lab).sum()) for lab in ids}
        first = {lab: int(np.argmax(labels == lab)) for lab in ids}
        ordered = sorted(ids, key=lambda lab: (-size[lab], first[lab])) + ([-1] if (labels == -1).any() else [])
        name = {lab: f"F{i}" for i, lab in enumerate(ordered, start=1)}
        fit_sim = np.zeros(len(fit_rows))
        centres = []
        for lab in ordered:
            members = np.where(labels == lab)[0]
            centroid = feats.vectors[members].mean(axis=0)
            norm = np.linalg.norm(centroid)
            centroid = centroid / norm if norm else centroid
            centres.append(centroid)
            sims = feats.vectors[members] @ centroid
            fit_sim[members] = sims
            typical = members[np.lexsort((members, -np.round(sims, 9)))]
            ranked = _distinguishing(feats.binary, feats.vocab, labels == lab, labels != lab)
            label, features = _label(ranked)
            if lab == -1:
                label = "no clear pattern (HDBSCAN noise)" + (f": {label}" if features else "")
            mode = {"mode": name[lab], "kind": "model", "label": label, "auto_label": label, "features": features,
                    "examples": list(fit_rows.rollout_id.iloc[typical[:FAILURE_MODES_EXAMPLES]])}
            if labeler is not None:
                try:
                    named = labeler(_summary_for_labeler(mode, fit_rows.iloc[members], ranked))
                except Exception as exc:  # a labeller is optional: its failure keeps the automatic label
                    info.setdefault("labeler_errors", []).append(f"{name[lab]}: {type(exc).__name__}: {exc}")
                    named = None
                if isinstance(named, str) and named.strip():
                    mode["label"] = named.strip()
            modes.append(mode)
        mode_of = np.empty(len(model), dtype=object)
        similarity = np.zeros(len(model))
        mode_of[np.where(fitted_model)[0]] = [name[lab] for lab in labels]
        similarity[fitted_model] = fit_sim
        if (~fitted_model).any():  # the other failures join the nearest mode (noise is not a mode to join)
            rest = model[~fitted_model].reset_index(drop=True)
            vectors = feats.vectorizer.transform([_fields(r) for r in _rows(rest)])
            joinable = [i for i, lab in enumerate(ordered) if lab != -1] or list(range(len(ordered)))
            sims = vectors @ np.vstack([centres[i] for i in joinable]).T
            best = np.argmax(sims, axis=1)
            mode_of[~fitted_model] = [name[ordered[joinable[b]]] for b in best]
            similarity[~fitted_model] = sims[np.arange(len(best)), best]
        model_mode = pd.Series(mode_of, dtype=object)
    seen: dict[str, int] = {}
    for m in modes:  # two modes never share a label
        seen[m["label"]] = seen.get(m["label"], 0) + 1
    for m in modes:
        if seen[m["label"]] > 1:
            m["label"] = f"{m['label']} ({m['mode']})"
    infra_mode = pd.Series([], dtype=object)
    if len(infra):
        infra_mode, infra_modes = _infra_modes(infra, fitted_infra)
        modes += infra_modes
    model = model.assign(mode=model_mode.to_numpy(), similarity=similarity)
    infra = infra.assign(mode=infra_mode.to_numpy(), similarity=np.nan)
    both = pd.concat([model, infra], ignore_index=True) if len(infra) else model
    both = both.sort_values("_pos", kind="stable")  # by run, sample and attempt again
    mode_frame = pd.DataFrame(modes, columns=["mode", "kind", "label", "auto_label", "features", "examples"])
    labels_by_mode = dict(zip(mode_frame["mode"], mode_frame["label"]))
    assignments = pd.DataFrame({
        "rollout_id": both.rollout_id, "run": both.run, "sample_id": both.sample_id, "attempt": both.attempt,
        "status": both.status, "score": both.score, "kind": both.kind, "mode": both["mode"],
        "label": both["mode"].map(labels_by_mode), "similarity": both.similarity,
        "n_tool_calls": both.n_tool_calls, "n_turns": both.n_turns,
        "sequence": [_readable(s) for s in both.sequence.tolist()], "final_answer": both.final_answer, "error": both.error,
    }, columns=ASSIGNMENT_COLUMNS) if len(both) else pd.DataFrame(columns=ASSIGNMENT_COLUMNS)
    return Fit(assignments, mode_frame, info)


# ---- shares with bootstrap CIs over samples ----------------------------------------------------

def _run_counts(con, runs: list[str], thr: float) -> pd.DataFrame:
    return run_sql(con, run_counts_sql(), {"runs": runs, "threshold": thr}).df()


def _unit_counts(counts: pd.DataFrame, runs: list[str], assignments: pd.DataFrame, modes: list[str],
                 units: set[str] | None = None):
    """Per run: units (samples) x modes counts, failures and rollouts per unit (``counts``: the
    runs' ``_run_counts``), over one unit index (``units``: these only)."""
    if units is not None:
        counts = counts[counts.unit.isin(list(units))]
    unit_index = sorted(set(counts.unit))
    pos = {u: i for i, u in enumerate(unit_index)}
    col = {m: j for j, m in enumerate(modes)}
    a_unit = [unit_of(s, r) for s, r in zip(assignments.sample_id, assignments.rollout_id)]
    out = {}
    for run in runs:
        c = counts[counts.run == run]
        rollouts = np.zeros(len(unit_index))
        failures = np.zeros(len(unit_index))
        idx = np.array([pos[u] for u in c.unit], dtype=int)
        rollouts[idx] = c.rollouts.to_numpy(float)
        failures[idx] = c.failures.to_numpy(float)
        per_mode = np.zeros((len(unit_index), len(modes)))
        mine = [i for i, (r, u) in enumerate(zip(assignments.run, a_unit)) if r == run and u in pos]
        if mine:
            rows = np.array([pos[a_unit[i]] for i in mine], dtype=int)
            cols = np.array([col[m] for m in assignments["mode"].iloc[mine]], dtype=int)
            np.add.at(per_mode, (rows, cols), 1.0)
        out[run] = (per_mode, failures, rollouts)
    return len(unit_index), out


def _boot_shares(n_units: int, per_run: dict, runs: list[str], n_boot: int, seed: int):
    """Bootstrap replicates (n_boot x modes) of each run's share of failures and of rollouts per
    mode, resampling units (samples): a sample's rollouts in every run move together."""
    reps = {r: ([], []) for r in runs}
    if n_boot <= 0 or n_units == 0:
        n_modes = per_run[runs[0]][0].shape[1]
        return {r: (np.empty((0, n_modes)), np.empty((0, n_modes))) for r in runs}
    for w in stats.resample_counts(n_units, n_boot, seed):
        w = w.astype(float)
        for r in runs:
            per_mode, failures, rollouts = per_run[r]
            num = w @ per_mode
            with np.errstate(divide="ignore", invalid="ignore"):
                reps[r][0].append(num / (w @ failures)[:, None])
                reps[r][1].append(num / (w @ rollouts)[:, None])
    return {r: (np.vstack(a), np.vstack(b)) for r, (a, b) in reps.items()}


def _interval(reps: np.ndarray, ci: float) -> tuple[np.ndarray, np.ndarray]:
    if reps.shape[0] == 0 or reps.shape[1] == 0:
        return np.full(reps.shape[1], np.nan), np.full(reps.shape[1], np.nan)
    bounds = np.array([stats.percentile_interval(reps[:, j], ci) for j in range(reps.shape[1])])
    return bounds[:, 0], bounds[:, 1]


def _ratio(a: float, b: float) -> float:
    return a / b if b else math.nan


# ---- public API ----------------------------------------------------------------------------------

def failure_modes(con, run: str, pass_threshold: float | None = None, k: int | None = None,
                  method: str = "average", seed: int = 0, labeler: Callable[[dict], str] | None = None,
                  n_boot: int = FAILURE_MODES_N_BOOT, ci: float = 0.95) -> pd.DataFrame:
    """The failing rollouts of ``run`` grouped into modes: one row per mode, model failures
    (``F1``, ``F2`` ... largest first) then infra errors (``I1`` ...).

    Columns: ``mode``, ``kind`` (model / infra), ``label`` (the behaviour that sets the mode apart
    from the other failures, in words), ``rollouts``, ``share_of_failures`` with a bootstrap CI
    over samples (``share_ci_low``/``high``), ``share_of_rollouts``, ``mean_tool_calls``,
    ``mean_turns``, ``examples`` (rollout ids, the most typical first), ``features`` (the label's
    features with their share in the mode vs the other model failures), ``auto_label`` (the label
    before a ``labeler``). ``attrs``: the method, k and how it was chosen, counts, and
    ``assignments`` (the per-rollout frame of ``failure_mode_of``).

    ``k``: the number of model modes, 1 to the number of model failures (default: the best
    silhouette over 2..12); anything else is a ValueError naming the range. ``method="hdbscan"``
    finds its own number of modes (its noise is one mode). ``labeler``: a callable given a dict
    per mode (its automatic label, top features, example rollouts) that returns a label
    (``failure_labeler.endpoint_labeler`` asks the team's own model); when it fails, the
    automatic label stays and ``attrs["labeler_errors"]`` says why."""
    (run,) = resolve_runs(con, [run])
    f = fit(con, run, pass_threshold, k, method, seed, labeler)
    a = f.assignments
    modes = list(f.modes["mode"])
    n_units, per_run = _unit_counts(_run_counts(con, [run], f.info["pass_threshold"]), [run], a, modes)
    reps = _boot_shares(n_units, per_run, [run], n_boot, seed)
    lo, hi = _interval(reps[run][0], ci)
    per_mode, failures, rollouts = per_run[run]
    total_f, total_r = failures.sum(), rollouts.sum()
    rows = []
    for j, m in enumerate(f.modes.itertuples()):
        members = a[a["mode"] == m.mode]
        rows.append({"mode": m.mode, "kind": m.kind, "label": m.label, "rollouts": len(members),
                     "share_of_failures": _ratio(len(members), total_f), "share_ci_low": lo[j],
                     "share_ci_high": hi[j], "share_of_rollouts": _ratio(len(members), total_r),
                     "mean_tool_calls": float(members.n_tool_calls.mean()), "mean_turns": float(members.n_turns.mean()),
                     "examples": m.examples, "features": m.features, "auto_label": m.auto_label})
    out = pd.DataFrame(rows, columns=MODE_COLUMNS)
    out.attrs.update(f.info, run=run, failures=int(total_f), rollouts=int(total_r), n_boot=n_boot, ci=ci,
                     assignments=a)
    return out


def failure_mode_of(con, run: str | list[str], pass_threshold: float | None = None, k: int | None = None,
                    method: str = "average", seed: int = 0, labeler: Callable[[dict], str] | None = None,
                    rollouts: list[str] | None = None) -> pd.DataFrame:
    """Each failing rollout of ``run`` (a label, or several fitted together) with its mode:
    ``rollout_id, run, sample_id, attempt, status, score, kind, mode, label, similarity`` (cosine
    to the mode's centre; infra: NaN), ``n_tool_calls, n_turns, sequence`` (the calls with their
    outcomes), ``final_answer, error``. ``rollouts``: only these. A passing rollout has no mode
    and is not listed."""
    a = fit(con, run, pass_threshold, k, method, seed, labeler).assignments
    if rollouts is not None:
        a = a[a.rollout_id.isin(list(rollouts))].reset_index(drop=True)
    return a


def _verdict(b_n: int, c_n: int, b: float, c: float, p_adjusted: float, alpha: float = FAILURE_MODES_ALPHA) -> str:
    """unchanged unless the adjusted p-value is at most ``alpha``; then the direction of c - b:
    fixed (the candidate's value at most FAILURE_MODES_VERDICT_RESIDUAL of the base's) or reduced,
    new (the base's at most that share of the candidate's) or grew."""
    if math.isnan(p_adjusted) or p_adjusted > alpha or c == b:
        return "unchanged"
    r = FAILURE_MODES_VERDICT_RESIDUAL
    if c < b:
        return "fixed" if c_n == 0 or c <= r * b else "reduced"
    return "new" if b_n == 0 or b <= r * c else "grew"


def split_units(units: list[str], holdout: float, seed: int) -> tuple[set[str], set[str]]:
    """(units to fit on, units to count and test on): a seeded random ``holdout`` share of the
    units, by sample, so that a sample's attempts in both runs stay together. With holdout 0, or
    fewer than 2 units, both are every unit."""
    units = sorted(set(units))
    n_test = int(round(holdout * len(units)))
    if holdout <= 0 or len(units) < 2:
        return set(units), set(units)
    n_test = min(max(n_test, 1), len(units) - 1)
    order = np.random.default_rng(seed).permutation(len(units))
    test = {units[i] for i in order[:n_test]}
    return set(units) - test, test


def failure_modes_diff(con, base: str, candidate: str, pass_threshold: float | None = None, k: int | None = None,
                       method: str = "average", seed: int = 0, labeler: Callable[[dict], str] | None = None,
                       n_boot: int = 2000, ci: float = 0.95, per: str = "rollouts",
                       holdout: float = FAILURE_MODES_HOLDOUT, adjust: str = FAILURE_MODES_ADJUST,
                       alpha: float = FAILURE_MODES_ALPHA, n_perm: int = FAILURE_MODES_N_PERM) -> pd.DataFrame:
    """Failure modes of base and candidate, and how each changed.

    The modes are fitted on both runs' failures together, so that a mode means the same in each,
    and blind to which run each failure came from. Each mode is then tested with a permutation
    test that swaps a sample's base and candidate attempts (``stats.paired_permutation_p``): when
    the two runs are one checkpoint, the swap changes nothing about the failures, so the modes —
    a function of the failures alone — stay the same and the test is exact although it reads the
    data the modes were fitted on. ``holdout`` > 0 instead fits the modes on a seeded ``1 -
    holdout`` share of the samples and counts and tests on the rest (``split_units``; the other
    failures join the nearest mode): the same guarantee by another road, with less power.

    Per mode, on the tested samples present in both runs: its share of each run's rollouts
    (``base_rate``, ``candidate_rate``) and of each run's failures (``base_share``,
    ``candidate_share``), each with a percentile-bootstrap CI that resamples samples (a sample's
    attempts in both runs move together), the differences candidate - base with their CIs, the
    two-sided permutation ``p_value`` of the difference in ``per``, ``p_adjusted`` across the
    modes (``adjust``: "holm", family-wise error, or "bh", false discovery rate) and a
    ``verdict``: unchanged unless ``p_adjusted`` <= ``alpha``; then fixed / reduced / grew / new
    (``_verdict``). The CIs are per mode, unadjusted: they give the size of a change, the
    verdicts say which changes to believe.

    ``per``: "rollouts" (default: how often an attempt fails this way) or "failures" (what the
    failures are made of; it moves when other modes change). Rows: model modes by size, then infra
    modes. ``attrs``: base, candidate, the samples fitted and tested, failures and rollouts per run
    (counted on the tested samples; ``*_failures_all``: on all), k, the adjustment,
    ``assignments`` (every failing rollout of both runs), ``sentence`` (``diff_sentence``)."""
    if per not in ("failures", "rollouts"):
        raise ValueError("per: 'failures' or 'rollouts'")
    if adjust not in ADJUSTMENTS:
        raise ValueError(f"adjust: one of {', '.join(ADJUSTMENTS)}")
    if not 0 <= holdout < 1:
        raise ValueError(f"holdout={holdout}: give the share of samples held out to test on, from 0 (none: fit and "
                         "test on all) to below 1")
    base, candidate = resolve_runs(con, [base, candidate])
    if base == candidate:
        raise ValueError("base and candidate are the same run")
    thr = threshold(pass_threshold)
    counts = _run_counts(con, [base, candidate], thr)
    in_base, in_cand = set(counts.unit[counts.run == base]), set(counts.unit[counts.run == candidate])
    fit_units, test_units = split_units(list(in_base | in_cand), holdout, seed)
    f = fit(con, [base, candidate], thr, k, method, seed, labeler,
            fit_units=None if fit_units == test_units else fit_units)
    a = f.assignments
    modes = list(f.modes["mode"])
    paired = test_units & in_base & in_cand
    n_units, per_run = _unit_counts(counts, [base, candidate], a, modes, units=paired)
    reps = _boot_shares(n_units, per_run, [base, candidate], n_boot, seed)
    b_lo, b_hi = _interval(reps[base][0], ci)
    c_lo, c_hi = _interval(reps[candidate][0], ci)
    br_lo, br_hi = _interval(reps[base][1], ci)
    cr_lo, cr_hi = _interval(reps[candidate][1], ci)
    d_lo, d_hi = _interval(reps[candidate][0] - reps[base][0], ci)
    r_lo, r_hi = _interval(reps[candidate][1] - reps[base][1], ci)
    (bm, bf, br), (cm, cf, cr) = per_run[base], per_run[candidate]
    den_b, den_c = (bf, cf) if per == "failures" else (br, cr)
    n_modes = len(modes)
    if n_units and n_modes and n_perm > 0:
        p = stats.paired_permutation_p(bm, np.repeat(den_b[:, None], n_modes, axis=1), cm,
                                       np.repeat(den_c[:, None], n_modes, axis=1), n_perm=n_perm, seed=seed)
    else:
        p = np.full(n_modes, np.nan)
    present = (bm.sum(axis=0) + cm.sum(axis=0)) > 0 if n_modes else np.zeros(0, dtype=bool)
    p = np.where(present, p, np.nan)  # a mode no tested sample shows is not tested
    p_adj = (stats.holm if adjust == "holm" else stats.bh)(p) if n_modes else p
    totals = {base: (bf.sum(), br.sum()), candidate: (cf.sum(), cr.sum())}
    rows = []
    for j, m in enumerate(f.modes.itertuples()):
        nb, nc = int(bm[:, j].sum()), int(cm[:, j].sum())
        bs, cs = _ratio(nb, totals[base][0]), _ratio(nc, totals[candidate][0])
        b_rate, c_rate = _ratio(nb, totals[base][1]), _ratio(nc, totals[candidate][1])
        members = a[a["mode"] == m.mode]
        ex = {r: list(members[members.run == r].sort_values("similarity", ascending=False, kind="stable")
                      .rollout_id[:FAILURE_MODES_EXAMPLES]) for r in (base, candidate)}
        verdict = (_verdict(nb, nc, bs, cs, p_adj[j], alpha) if per == "failures"
                   else _verdict(nb, nc, b_rate, c_rate, p_adj[j], alpha))
        rows.append({"mode": m.mode, "kind": m.kind, "label": m.label, "base_rollouts": nb, "candidate_rollouts": nc,
                     "base_share": bs, "base_ci_low": b_lo[j], "base_ci_high": b_hi[j], "candidate_share": cs,
                     "candidate_ci_low": c_lo[j], "candidate_ci_high": c_hi[j], "diff": cs - bs,
                     "diff_ci_low": d_lo[j], "diff_ci_high": d_hi[j], "base_rate": b_rate, "base_rate_ci_low": br_lo[j],
                     "base_rate_ci_high": br_hi[j], "candidate_rate": c_rate, "candidate_rate_ci_low": cr_lo[j],
                     "candidate_rate_ci_high": cr_hi[j], "rate_diff": c_rate - b_rate, "rate_diff_ci_low": r_lo[j],
                     "rate_diff_ci_high": r_hi[j], "p_value": p[j], "p_adjusted": p_adj[j],
                     "verdict": verdict, "examples_base": ex[base], "examples_candidate": ex[candidate],
                     "features": m.features})
    out = pd.DataFrame(rows, columns=DIFF_COLUMNS)
    all_failures = {r: int((a.run == r).sum()) for r in (base, candidate)}
    out.attrs.update(f.info, base=base, candidate=candidate, per=per, n_boot=n_boot, ci=ci, n_perm=n_perm,
                     holdout=holdout, adjust=adjust, adjust_words=ADJUSTMENTS[adjust], alpha=alpha,
                     samples=len(in_base | in_cand), samples_fitted=len(fit_units), samples_tested=len(paired),
                     samples_unpaired=len(test_units - paired), in_sample=fit_units == test_units,
                     base_failures=int(totals[base][0]), base_rollouts=int(totals[base][1]),
                     candidate_failures=int(totals[candidate][0]), candidate_rollouts=int(totals[candidate][1]),
                     base_failures_all=all_failures[base], candidate_failures_all=all_failures[candidate],
                     assignments=a)
    out.attrs["sentence"] = diff_sentence(out)
    return out


def diff_sentence(diff: pd.DataFrame, limit: int = 2) -> str:
    """The diff in one sentence: the largest fixed/reduced modes and the largest new/grown ones,
    in the measure the verdicts read, e.g. "sft reduced F1 [calls `transfer_to_human_agents`, ...]
    (31% → 14% of rollouts); it introduced F3 [repeats the same `get_details_by_id` call until cut
    off] (0% → 6% of rollouts)"."""
    if diff is None or diff.empty:
        return "No failures to compare."
    cand = diff.attrs.get("candidate", "the candidate")
    col, unit = ("diff", "of failures") if diff.attrs.get("per", "rollouts") == "failures" else ("rate_diff", "of rollouts")
    b_col, c_col = ("base_share", "candidate_share") if col == "diff" else ("base_rate", "candidate_rate")
    down = diff[diff.verdict.isin(["fixed", "reduced"])].sort_values(col, kind="stable").head(limit)
    up = diff[diff.verdict.isin(["new", "grew"])].sort_values(col, ascending=False, kind="stable").head(limit)

    def item(r) -> str:
        return f"{r.mode} [{r.label}] ({share(getattr(r, b_col))} → {share(getattr(r, c_col))} {unit})"

    parts = []
    if len(down):
        verb = "removed" if (down.verdict == "fixed").all() else "reduced"
        parts.append(f"{verb} " + " and ".join(item(r) for r in down.itertuples()))
    if len(up):
        verb = "introduced" if (up.verdict == "new").all() else "increased"
        parts.append(f"{verb} " + " and ".join(item(r) for r in up.itertuples()))
    if not parts:
        adjusted = diff.attrs.get("adjust")
        how = f" after {ADJUSTMENTS[adjusted].split(' (')[0]}'s adjustment across modes" if adjusted in ADJUSTMENTS else ""
        return f"No failure mode changed significantly in {cand}{how}."
    return f"{cand} " + "; it ".join(parts) + "."



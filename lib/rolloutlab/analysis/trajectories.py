"""Aligned trajectory diffs: two rollouts' tool calls aligned step by step (``align``, banded past a
size), what differs at each (arguments, outcome, a call moved), where they first diverge
(``trajectory_diff``), and a sample's failing base attempt against a passing candidate one
(``sample_diff``, ``samples_to_diff``). Their HTML: ``views.failures_html``.
"""
from __future__ import annotations

import json
from typing import Iterable

import numpy as np
import pandas as pd

from ..config import DIFF_MAX_CELLS, DIFF_OUTPUT_CHARS
from ..text.htmltext import missing
from ..store.stop_reasons import lit
from .metrics.common import EXCLUDED_STATUSES, common_threshold, pass_at_sql, resolve_runs, run_sql, threshold

# bound: trajectory_diff aligns at most this many calls per side; the calls after it are not
# aligned (attrs["not_aligned"] says so, the HTML too), so a runaway rollout cannot hang compare mode
DIFF_MAX_CALLS = 2_000
TRAJECTORY_DIFF_COLUMNS = ["step", "kind", "op", "first_divergence", "args_differ", "outcome_differs", "moved",
                           "a_call", "a_turn", "a_tool", "a_arguments", "a_status", "a_error", "a_output",
                           "b_call", "b_turn", "b_tool", "b_arguments", "b_status", "b_error", "b_output"]
# ---- aligned trajectory diff -----------------------------------------------------------------

def trajectory_calls_sql() -> str:
    """One rollout's calls in order, each with the start of its output: the i-th tool message of
    a turn is the output of the turn's i-th call (as the explorer pairs them). $rollout, $chars."""
    return """
    WITH c AS (
        SELECT call_idx, turn_idx, tool, CAST(arguments AS VARCHAR) AS arguments, coalesce(status, 'ok') AS status,
               error, output_chars, row_number() OVER (PARTITION BY turn_idx ORDER BY call_idx) AS k
        FROM tool_calls WHERE rollout_id = $rollout),
    o AS (
        SELECT turn_idx, left(content, $chars) AS output, row_number() OVER (PARTITION BY turn_idx ORDER BY msg_idx) AS k
        FROM messages WHERE rollout_id = $rollout AND role = 'tool' AND turn_idx IS NOT NULL)
    SELECT c.call_idx, c.turn_idx, c.tool, c.arguments, c.status, c.error, c.output_chars, o.output
    FROM c LEFT JOIN o ON c.turn_idx = o.turn_idx AND c.k = o.k
    ORDER BY c.call_idx
    """


def rollout_facts_sql() -> str:
    return """SELECT rollout_id, run_id AS run, sample_id, attempt, status, score, final_answer, n_tool_calls,
                     n_turns, stop_reason FROM rollouts WHERE rollout_id = $rollout"""


def _norm_value(v):
    if isinstance(v, str):
        return " ".join(v.split()).lower()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, dict):
        return {str(k): _norm_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm_value(x) for x in v]
    return v


def normalise_arguments(arguments) -> str:
    """Arguments as compared when aligning: JSON with sorted keys, strings trimmed, whitespace
    collapsed and lower-cased, 3.0 == 3. Text that is not JSON is only whitespace-normalised."""
    if missing(arguments):
        return ""
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return " ".join(str(arguments).split()).lower()
    return json.dumps(_norm_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _same_text(a, b) -> bool:
    na = "" if missing(a) else " ".join(str(a).split())
    nb = "" if missing(b) else " ".join(str(b).split())
    return na == nb


def _pair_score(x, y, neg: int) -> int:
    return 2 if x == y else (1 if x[0] == y[0] else neg)


def align(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> list[tuple[int | None, int | None]]:
    """Global alignment (Needleman-Wunsch) of two call sequences of (tool, normalised arguments):
    the same call scores 2, the same tool with other arguments 1, a call facing no call -1;
    different tools are never paired. Returns (i, j) pairs, None where one side has no call.
    Past DIFF_MAX_CELLS, the same alignment restricted to a band around the diagonal
    (``_align_banded``: at most ~DIFF_MAX_CELLS cells, so time grows linearly with length)."""
    n, m = len(a), len(b)
    if n * m > DIFF_MAX_CELLS:
        return _align_banded(a, b)
    gap, neg = -1, -10 ** 9
    score = np.zeros((n + 1, m + 1), dtype=np.int64)
    score[:, 0] = np.arange(n + 1) * gap
    score[0, :] = np.arange(m + 1) * gap
    for i in range(1, n + 1):
        ai = a[i - 1]
        row, prev = score[i], score[i - 1]
        for j in range(1, m + 1):
            bj = b[j - 1]
            pair = 2 if ai == bj else (1 if ai[0] == bj[0] else neg)
            row[j] = max(prev[j - 1] + pair, prev[j] + gap, row[j - 1] + gap)
    pairs = []
    i, j = n, m
    while i > 0 or j > 0:
        if i > 0 and j > 0:
            ai, bj = a[i - 1], b[j - 1]
            pair = 2 if ai == bj else (1 if ai[0] == bj[0] else neg)
            if score[i, j] == score[i - 1, j - 1] + pair:
                pairs.append((i - 1, j - 1))
                i, j = i - 1, j - 1
                continue
        if i > 0 and score[i, j] == score[i - 1, j] + gap:
            pairs.append((i - 1, None))
            i -= 1
        else:
            pairs.append((None, j - 1))
            j -= 1
    return pairs[::-1]


def _align_banded(a, b):
    """``align``'s scoring on the cells within ``w`` of the diagonal only (row i: columns around
    i * m / n), w chosen so the band holds about DIFF_MAX_CELLS cells (and never less than one
    row's step, so the band stays connected). Linear in length; optimal whenever the best
    alignment stays within the band. (difflib's matcher, used before, is cubic on repetitive
    call sequences: 4,000 calls per side took 35 s.)"""
    n, m = len(a), len(b)
    gap, neg = -1, -10 ** 9
    w = max(DIFF_MAX_CELLS // (2 * (n + 1)), -(-m // n) + 1)
    lo = [max(0, (i * m) // n - w) for i in range(n + 1)]
    hi = [min(m, -(-(i * m) // n) + w) for i in range(n + 1)]
    rows = [[j * gap for j in range(lo[0], hi[0] + 1)]]  # lo[0] == 0
    for i in range(1, n + 1):
        ai, prev, plo, phi, l, h = a[i - 1], rows[-1], lo[i - 1], hi[i - 1], lo[i], hi[i]
        row = []
        for j in range(l, h + 1):
            best = None
            if plo <= j <= phi:
                best = prev[j - plo] + gap
            if j > l:
                best = max(best, row[-1] + gap) if best is not None else row[-1] + gap
            if j > 0 and plo <= j - 1 <= phi:
                diag = prev[j - 1 - plo] + _pair_score(ai, b[j - 1], neg)
                best = diag if best is None else max(best, diag)
            row.append(best)
        rows.append(row)
    pairs = []
    i, j = n, m
    while i > 0 or j > 0:
        cur = rows[i][j - lo[i]]
        if i > 0:
            plo, phi = lo[i - 1], hi[i - 1]
            if j > 0 and plo <= j - 1 <= phi and cur == rows[i - 1][j - 1 - plo] + _pair_score(a[i - 1], b[j - 1], neg):
                pairs.append((i - 1, j - 1))
                i, j = i - 1, j - 1
                continue
            if plo <= j <= phi and cur == rows[i - 1][j - plo] + gap:
                pairs.append((i - 1, None))
                i -= 1
                continue
        pairs.append((None, j - 1))
        j -= 1
    return pairs[::-1]


def _rollout(con, rollout_id: str) -> tuple[dict, pd.DataFrame]:
    facts = run_sql(con, rollout_facts_sql(), {"rollout": rollout_id}).df()
    if facts.empty:
        raise KeyError(f"no rollout {rollout_id!r}")
    calls = run_sql(con, trajectory_calls_sql(), {"rollout": rollout_id, "chars": DIFF_OUTPUT_CHARS}).df()
    return facts.iloc[0].to_dict(), calls


def trajectory_diff(con, rollout_a: str, rollout_b: str) -> pd.DataFrame:
    """Two trajectories aligned call by call (``align``: sequence alignment on tool name and
    normalised arguments). One row per aligned step, then one for the final answers.

    ``op``: ``same`` (same tool, arguments and outcome), ``outcome`` (same call, another status,
    error or output), ``arguments`` (same tool, other arguments; ``outcome_differs`` says whether
    the outcome differs too), ``only_a`` / ``only_b`` (a call only one side made); the last row
    (``kind = 'final'``) is ``same`` or ``differs`` on the final answers (``a_output``/``b_output``).
    ``first_divergence`` marks the first step that is not ``same``; ``moved``: the other side made
    this very call too, at another step (the same calls in another order). ``attrs``: both rollouts'
    run, sample, attempt, status, score, answer, the counts per op and ``first_divergence`` (the
    step, or None); ``calls_a`` / ``calls_b``, each side's number of calls; ``not_aligned``, None
    or the sentence saying that the calls after DIFF_MAX_CALLS (per side) were not aligned (they
    have no rows: a rollout that long is compared on its first DIFF_MAX_CALLS calls)."""
    fa, ca = _rollout(con, rollout_a)
    fb, cb = _rollout(con, rollout_b)
    total_a, total_b = len(ca), len(cb)
    ca, cb = ca.iloc[:DIFF_MAX_CALLS], cb.iloc[:DIFF_MAX_CALLS]  # bound: the rest is not aligned
    not_aligned = None
    if max(total_a, total_b) > DIFF_MAX_CALLS:
        not_aligned = (f"calls after {DIFF_MAX_CALLS:,} not aligned (A made {total_a:,} calls, "
                       f"B {total_b:,}): only the first {DIFF_MAX_CALLS:,} of each side are compared")
    keys_a = [(str(t), normalise_arguments(x)) for t, x in zip(ca.tool, ca.arguments)]
    keys_b = [(str(t), normalise_arguments(x)) for t, x in zip(cb.tool, cb.arguments)]
    set_a, set_b = set(keys_a), set(keys_b)
    rows = []
    for i, j in align(keys_a, keys_b):
        row = {"kind": "call"}
        for side, calls, idx in (("a", ca, i), ("b", cb, j)):
            c = calls.iloc[idx] if idx is not None else None
            row.update({f"{side}_call": None if c is None else int(c.call_idx),
                        f"{side}_turn": None if c is None or missing(c.turn_idx) else int(c.turn_idx),
                        f"{side}_tool": None if c is None else c.tool,
                        f"{side}_arguments": None if c is None else c.arguments,
                        f"{side}_status": None if c is None else c.status,
                        f"{side}_error": None if c is None else c.error,
                        f"{side}_output": None if c is None else c.output})
        # a call that is not paired with its twin, while the other side made the very same call elsewhere
        moved = (i is not None and (j is None or keys_a[i] != keys_b[j]) and keys_a[i] in set_b) or \
            (j is not None and (i is None or keys_a[i] != keys_b[j]) and keys_b[j] in set_a)
        row["moved"] = bool(moved)
        if i is None or j is None:
            row.update(op="only_a" if j is None else "only_b", args_differ=False, outcome_differs=False)
        else:
            args_differ = keys_a[i] != keys_b[j]
            x, y = ca.iloc[i], cb.iloc[j]
            outcome = (x.status != y.status or not _same_text(x.error, y.error)
                       or (not missing(x.output) and not missing(y.output) and not _same_text(x.output, y.output)))
            row.update(op="arguments" if args_differ else ("outcome" if outcome else "same"),
                       args_differ=args_differ, outcome_differs=bool(outcome))
        rows.append(row)
    same_answer = _same_text(fa["final_answer"], fb["final_answer"])
    rows.append({"kind": "final", "op": "same" if same_answer else "differs", "args_differ": False,
                 "outcome_differs": not same_answer, "moved": False, "a_output": fa["final_answer"], "b_output": fb["final_answer"],
                 "a_status": fa["status"], "b_status": fb["status"]})
    out = pd.DataFrame(rows, columns=[c for c in TRAJECTORY_DIFF_COLUMNS if c not in ("step", "first_divergence")])
    out.insert(0, "step", np.arange(len(out)))
    diverging = np.where(out.op.to_numpy() != "same")[0]
    first = int(diverging[0]) if len(diverging) else None
    out.insert(3, "first_divergence", out.step == first if first is not None else False)
    calls = out[out.kind == "call"]
    out.attrs.update(
        rollout_a=rollout_a, rollout_b=rollout_b, first_divergence=first, answers_same=bool(same_answer),
        **{f"{k}_{s}": f[k] for s, f in (("a", fa), ("b", fb))
           for k in ("run", "sample_id", "attempt", "status", "score", "final_answer", "n_tool_calls")},
        counts={op: int((calls.op == op).sum()) for op in ("same", "outcome", "arguments", "only_a", "only_b")},
        calls_a=total_a, calls_b=total_b, not_aligned=not_aligned,
    )
    return out


def sample_attempts_sql() -> str:
    """Attempts at $sample under $base and $candidate: which fail (below $threshold; infra and
    ungraded are not the model's and never picked) and which pass."""
    excluded = ", ".join(lit(s) for s in EXCLUDED_STATUSES)
    return f"""
    SELECT rollout_id, run_id AS run, attempt, status, score,
           status NOT IN ({excluded}) AND coalesce(score, 0.0) < {pass_at_sql()} AS fails,
           status NOT IN ({excluded}) AND coalesce(score, 0.0) >= {pass_at_sql()} AS passes
    FROM rollouts WHERE sample_id = $sample AND run_id IN ($base, $candidate)
    ORDER BY run_id, coalesce(score, 0.0), attempt, rollout_id
    """


def sample_diff(con, sample: str, base: str, candidate: str, pass_threshold: float | None = None,
                prefer: list[str] | None = None, suspects: Iterable[str] | None = None) -> pd.DataFrame:
    """``trajectory_diff`` of a failing base attempt (the lowest score, then the first attempt;
    one of ``prefer`` first when given, e.g. a failure mode's rollouts) and a passing candidate
    attempt (the first) at one sample. The passing attempt is never one of ``suspects`` (default:
    the candidate's audit suspects, ``audit(con, candidate, base=base)``; ``()`` allows any): a
    pass the grader may have been fooled into shows nothing worth copying. When there is no such
    pair, an empty frame whose ``attrs["message"]`` says why (``attrs["rollout_a"]``/``["rollout_b"]``
    None)."""
    base, candidate = resolve_runs(con, [base, candidate])
    if suspects is None:
        from .audit import audit

        suspects = audit(con, candidate, base=base, pass_threshold=pass_threshold).rollout_id
    suspects = {str(r) for r in suspects}
    thr = threshold(pass_threshold)
    rows = run_sql(con, sample_attempts_sql(), {"sample": sample, "base": base, "candidate": candidate,
                                                "threshold": thr}).df()
    shown = common_threshold(con, [base, candidate], thr)  # None: each run's own
    failing = rows[(rows.run == base) & rows.fails]
    if prefer is not None:
        failing = failing.assign(preferred=~failing.rollout_id.isin(list(prefer))).sort_values(
            "preferred", kind="stable")
    passing = rows[(rows.run == candidate) & rows.passes].sort_values(["attempt", "rollout_id"], kind="stable")
    honest = passing[~passing.rollout_id.isin(suspects)]
    reason = None
    if not (rows.run == base).any():
        reason = f"{base} has no attempt at sample {sample}"
    elif not (rows.run == candidate).any():
        reason = f"{candidate} has no attempt at sample {sample}"
    elif failing.empty:
        reason = f"no failing {base} attempt at sample {sample} (every counted attempt scored ≥ {'its run’s pass threshold' if shown is None else f'{shown:g}'})"
    elif passing.empty:
        reason = f"no passing {candidate} attempt at sample {sample} (none scored ≥ {'its run’s pass threshold' if shown is None else f'{shown:g}'})"
    elif honest.empty:
        reason = (f"every passing {candidate} attempt at sample {sample} is a reward-hacking suspect "
                  f"({len(passing)} of them; rl.audit): no pass to learn from")
    if reason:
        out = pd.DataFrame(columns=TRAJECTORY_DIFF_COLUMNS)
        out.attrs.update(message=reason, rollout_a=None, rollout_b=None, sample=sample, base=base,
                         candidate=candidate)
        return out
    out = trajectory_diff(con, failing.rollout_id.iloc[0], honest.rollout_id.iloc[0])
    skipped = len(passing) - len(honest)
    out.attrs.update(message=f"{base} attempt {failing.attempt.iloc[0]} (fails) vs {candidate} attempt "
                             f"{honest.attempt.iloc[0]} (passes) at sample {sample}"
                             + (f"; {skipped} passing attempt{'s' if skipped > 1 else ''} left aside as "
                                f"{'audit suspects' if skipped > 1 else 'an audit suspect'}" if skipped else ""),
                     sample=sample, base=base, candidate=candidate)
    return out


def samples_to_diff_sql() -> str:
    """Samples with a failing $base attempt and a passing $candidate attempt (below / at least
    $threshold; infra and ungraded attempts are neither), optionally only where one of the
    failing base attempts is in $rollouts ($limit_ids)."""
    excluded = ", ".join(lit(s) for s in EXCLUDED_STATUSES)
    return f"""
    WITH a AS (
        SELECT sample_id, run_id, rollout_id,
               status NOT IN ({excluded}) AND coalesce(score, 0.0) < {pass_at_sql()} AS fails,
               status NOT IN ({excluded}) AND coalesce(score, 0.0) >= {pass_at_sql()} AS passes
        FROM rollouts WHERE run_id IN ($base, $candidate) AND sample_id IS NOT NULL)
    SELECT sample_id,
           count(*) FILTER (WHERE run_id = $base) AS base_attempts,
           count(*) FILTER (WHERE run_id = $base AND fails) AS base_failing,
           count(*) FILTER (WHERE run_id = $candidate) AS candidate_attempts,
           count(*) FILTER (WHERE run_id = $candidate AND passes) AS candidate_passing
    FROM a GROUP BY sample_id
    HAVING base_failing > 0 AND candidate_passing > 0
       AND (NOT $limit_ids OR count(*) FILTER (WHERE run_id = $base AND fails AND list_contains($rollouts, rollout_id)) > 0)
    ORDER BY base_failing DESC, candidate_passing DESC, sample_id
    """


def samples_to_diff(con, base: str, candidate: str, pass_threshold: float | None = None,
                    rollouts: list[str] | None = None) -> pd.DataFrame:
    """The samples ``sample_diff`` has a pair for: a failing base attempt and a passing
    candidate attempt, most base failures first. ``rollouts``: only samples where one of these
    failed in the base (e.g. a mode's rollouts, from ``failure_mode_of``)."""
    base, candidate = resolve_runs(con, [base, candidate])
    return run_sql(con, samples_to_diff_sql(), {
        "base": base, "candidate": candidate, "threshold": threshold(pass_threshold),
        "limit_ids": rollouts is not None, "rollouts": [str(r) for r in (rollouts or [])]}).df()



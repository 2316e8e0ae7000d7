"""The report's first screen: the verdict in words (``verdict``, ``verdict_sentence``) with every caveat
the workbench knows, one line each linked to its section, and the headline table of differences.
"""
from __future__ import annotations

import duckdb
import pandas as pd
from scipy.stats import fisher_exact

from ... import config
from ...analysis.audit import audit, audit_counts
from ...analysis.compare import (GRADER_PREFIX, HIGHER_IS_BETTER, LOWER_IS_BETTER, MEAN_OF_SAMPLE_MEANS, RATIO_METRICS,
                                compare, compare_without, significance)
from ...analysis.metrics import grader_stats, summary
from ...analysis.metrics.costs import truncation, unknown_words_text
from ...analysis.readiness import check
from ...text import fmt
from ...text.fmt import unit_diff, unit_interval, unit_value
from ...text.htmltext import esc as _e, missing
from .page import _plain, _table, check_value
from .power import _power_p

# Truncated rollouts (stopped by a turn, token or time limit) count with the score they ended
# with: a caveat when more than this share of either run's rollouts were truncated.
TRUNCATED_WARN = 0.01
# Infra errors and never-graded rollouts are a caveat when their share differs between the runs at
# this p-value (Fisher's exact test over rollouts), or a readiness check warns on them.
INFRA_DIFFER_P = 0.05
# Readiness checks the verdict weighs in a line of their own (graders, infra errors; power: the
# headline's one detectable-difference line, from the two runs' observed correlation).
_OWN_TOPIC = {"graders", "infra_errors", "ungraded", "power"}


# --- the verdict ---------------------------------------------------------------------------------

VERDICT_COLUMNS = ["topic", "concern", "count", "line", "condition", "section", "section_title"]


def _share_of(n, total) -> str:
    return f"{fmt.count(n)} of {fmt.count(total)} ({fmt.share(n / total)})" if total else fmt.count(n)


def two_runs(con: duckdb.DuckDBPyConnection, base: str, candidate: str) -> tuple[str, str]:
    """``base`` and ``candidate`` as run names; a report of a run against itself is refused (its
    difference is 0 by construction, and a headline would read as a finding)."""
    from ...analysis.metrics.common import resolve_runs

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


def _headline(con, base, candidate, cmp, suspects, checks, power_line: tuple[str, bool]) -> str:
    v = verdict(con, base, candidate, cmp, suspects=suspects, checks=checks)
    return ("<h2>Headline</h2>" + verdict_html(v) + headline_html(cmp) + _power_p(*power_line)
            + "<details><summary>All metrics</summary>" + metrics_table(cmp) + "</details>")

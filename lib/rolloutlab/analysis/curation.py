"""What to train on next: samples chosen by learning signal (docs/metrics.md, "Curation").

``curate`` gives every sample of a run (or of a training run's steps) a verdict — keep,
too_easy, too_hard, outside_band, few_attempts, infra, suspect, duplicate — with its reason in
words, a ``group`` of prompts that are the same after normalisation or near-duplicates, and a
``split`` (train / validation) that no group straddles. ``forecast`` is ``signal_plan``'s
empirical-Bayes model (its own SQL, kept per sample) averaged over the kept samples;
``signal_by_step`` the share of samples all-fail / all-pass / mixed per step. Frames only:
``rolloutlab.exports.training_files`` writes the training files.
"""
from __future__ import annotations

import functools
import hashlib
import re
import shlex
from typing import Iterable, Sequence

import duckdb
import pandas as pd

from .. import config
from ..text import fmt
from .metrics.common import common_threshold, params, resolve_runs, run_sql, selected_sql, threshold
from .metrics.scores import per_sample_sql, signal_plan_sql
from .prompts import said as prompt_said
from ..config import CURATE_DEFAULTS, VALIDATION_SPLITS, SHINGLE_CHARS, FORECAST_KS, FORECAST_Z


VERDICTS = ("keep", "too_easy", "too_hard", "outside_band", "few_attempts", "infra", "suspect", "duplicate")
TRENDS = ("saturated", "never_moved", "moving", "one_step")


_DIGITS = re.compile(r"[0-9]+")


def prompt_keys(prompts: Iterable, mask_numbers: bool) -> tuple[list, list]:
    """(what each prompt says, its group key): ``prompts.said`` — the text of its user turns, NFKC,
    invisible characters removed, whitespace collapsed, case folded, so that plain text and the
    same question as a JSON chat list, or with zero-width spaces, are one prompt — and that with
    numbers masked when ``mask_numbers``. In Python: DuckDB has no NFKC, and curation reads one
    prompt per sample."""
    said = [prompt_said(p) for p in prompts]
    return said, [_DIGITS.sub("#", k) if mask_numbers and k is not None else k for k in said]


def curate_samples_sql() -> str:
    """Per sample of the runs in $runs (ordered by step): its rollouts at the latest run where it
    has counted attempts (else the latest run it appears in) — attempts, successes, scores — the
    band verdict, and across runs: steps with counted attempts, the first, whether it never passed
    or always passed. Its prompt from ``samples`` (the row of the run's split first)."""
    return f"""
    WITH sel AS ({selected_sql()}),
    per_run AS (
        SELECT o.run_id, o.sample_id, list_position($runs, o.run_id) AS pos, count(*) AS rollouts,
               count(*) FILTER (WHERE $include_errors OR NOT excluded) AS n,
               count(*) FILTER (WHERE ($include_errors OR NOT excluded) AND s >= pass_at) AS c,
               avg(s) FILTER (WHERE $include_errors OR NOT excluded) AS mean,
               min(s) FILTER (WHERE $include_errors OR NOT excluded) AS lo,
               max(s) FILTER (WHERE $include_errors OR NOT excluded) AS hi, any_value(floor) AS floor
        FROM sel o WHERE o.sample_id IS NOT NULL GROUP BY o.run_id, o.sample_id),
    ranked AS (
        SELECT *, row_number() OVER (PARTITION BY sample_id ORDER BY n > 0 DESC, pos DESC) AS last_rank,
                  row_number() OVER (PARTITION BY sample_id ORDER BY n > 0 DESC, pos) AS first_rank
        FROM per_run),
    across AS (
        SELECT sample_id, count(*) FILTER (WHERE n > 0) AS steps, sum(n)::BIGINT AS total_attempts,
               coalesce(bool_and(c = 0) FILTER (WHERE n > 0), false) AS never_passed,
               coalesce(bool_and(c = n) FILTER (WHERE n > 0), false) AS always_passed
        FROM per_run GROUP BY sample_id),
    last AS (
        SELECT l.*, f.run_id AS first_run, f.c / nullif(f.n, 0) AS first_pass_rate, a.steps, a.total_attempts,
               a.never_passed, a.always_passed, r.step, r.split AS run_split, fr.step AS first_step
        FROM ranked l JOIN ranked f ON f.sample_id = l.sample_id AND f.first_rank = 1
        JOIN across a ON a.sample_id = l.sample_id
        JOIN runs r ON r.run_id = l.run_id JOIN runs fr ON fr.run_id = f.run_id
        WHERE l.last_rank = 1),
    prompts AS (
        SELECT l.sample_id,
               arg_max(s.prompt, (s.split IS NOT DISTINCT FROM l.run_split)::INTEGER * 2
                                 + (nullif(trim(s.prompt), '') IS NOT NULL)::INTEGER) AS prompt
        FROM last l JOIN samples s ON s.sample_id = l.sample_id GROUP BY l.sample_id)
    SELECT l.sample_id, l.run_id AS run, l.step, l.rollouts, l.n AS attempts, l.c AS successes,
           l.c / nullif(l.n, 0) AS pass_rate, l.mean AS mean_score, l.lo AS min_score, l.hi AS max_score,
           l.floor AS reward_floor,
           l.first_run, l.first_step, l.first_pass_rate, l.steps, l.total_attempts, l.never_passed,
           l.always_passed,
           p.prompt,
           CASE WHEN l.n = 0 THEN 'infra'
                WHEN l.n < $min_attempts THEN 'few_attempts'
                WHEN l.c = l.n THEN 'too_easy'
                WHEN (NOT $on_mean AND l.c = 0) OR ($on_mean AND l.hi = l.lo) THEN 'too_hard'
                WHEN CASE WHEN $on_mean THEN l.mean ELSE l.c / l.n END BETWEEN $lo AND $hi THEN 'keep'
                ELSE 'outside_band' END AS band_verdict
    FROM last l LEFT JOIN prompts p USING (sample_id)
    ORDER BY l.sample_id
    """


def validation_samples_sql() -> str:
    """Samples other runs (not in $runs) evaluated on a validation split, with the prompt of their
    sample row (a validation row first) and the runs."""
    return """
    WITH ext AS (
        SELECT o.sample_id, list(DISTINCT o.run_id ORDER BY o.run_id) AS runs
        FROM rollouts o JOIN runs r ON r.run_id = o.run_id
        WHERE NOT list_contains($runs, o.run_id) AND o.sample_id IS NOT NULL
          AND list_contains($validation_splits, lower(r.split))
        GROUP BY o.sample_id),
    prompts AS (
        SELECT e.sample_id,
               arg_max(s.prompt, list_contains($validation_splits, lower(s.split))::INTEGER * 2
                                 + (nullif(trim(s.prompt), '') IS NOT NULL)::INTEGER) AS prompt
        FROM ext e JOIN samples s ON s.sample_id = e.sample_id GROUP BY e.sample_id)
    SELECT e.sample_id, e.runs, p.prompt
    FROM ext e LEFT JOIN prompts p USING (sample_id) ORDER BY e.sample_id
    """


def shingles_sql() -> str:
    """The distinct $width-character shingles (64-bit hashes) of each text of $texts (``i``: its
    1-based position), each text's shingle count ``n`` and the shingle's rank in it, rarest
    (fewest texts) first."""
    return """
    WITH texts AS (SELECT unnest($texts) AS t, unnest(range(1, len($texts) + 1)) AS i),
    pos AS (SELECT i, t, unnest(range(1, greatest(length(t) - $width + 1, 1) + 1)) AS p FROM texts),
    sh AS (SELECT DISTINCT i, hash(substr(t, p, $width)) AS h FROM pos),
    freq AS (SELECT h, count(*) AS f FROM sh GROUP BY h)
    SELECT s.i, s.h, row_number() OVER (PARTITION BY s.i ORDER BY q.f, s.h) AS r,
           count(*) OVER (PARTITION BY s.i) AS n
    FROM sh s JOIN freq q USING (h)
    """


def near_duplicate_candidates_sql() -> str:
    """Pairs of texts that may reach Jaccard $threshold, and no pair that does is left out
    (prefix filtering: Bayardo et al. 2007, "Scaling up all pairs similarity search"; Xiao et al.
    2008, PPJoin). With shingles ranked rarest first, two sets at Jaccard >= t share a shingle
    among the first |x| - ceil(t |x|) + 1 of each; and their overlap is at most the shingles they
    share there plus what follows the last of them in the shorter remainder (the positional
    filter), which must reach t (|x| + |y|) / (1 + t)."""
    return f"""
    WITH ranked AS MATERIALIZED ({shingles_sql()}),
    prefix AS (SELECT i, h, r, n FROM ranked WHERE r <= n - ceil($threshold * n) + 1)
    SELECT x.i AS i1, y.i AS i2
    FROM prefix x JOIN prefix y ON y.h = x.h AND x.i < y.i
    GROUP BY x.i, y.i
    HAVING count(*) + least(any_value(x.n) - max(x.r), any_value(y.n) - max(y.r))
           >= $threshold / (1 + $threshold) * (any_value(x.n) + any_value(y.n)) - 1e-9
    """


def near_duplicates(con: duckdb.DuckDBPyConnection, texts: Iterable[str],
                    threshold: float | None = None) -> pd.DataFrame:
    """Pairs of distinct texts (``key_a`` < ``key_b``) that are near-duplicates: the Jaccard
    similarity of their character 5-gram sets is at least ``threshold`` (default 0.8), exactly.
    DuckDB finds the candidates; each candidate's Jaccard is a set intersection here (a Python
    set intersection of ~100 hashes takes microseconds, DuckDB's list_intersect ~50 times more)."""
    texts = sorted({t for t in texts if _is_key(t)})
    thr = CURATE_DEFAULTS["near_duplicate_threshold"] if threshold is None else float(threshold)
    empty = pd.DataFrame({"key_a": pd.Series(dtype=object), "key_b": pd.Series(dtype=object),
                          "jaccard": pd.Series(dtype=float)})
    if len(texts) < 2 or thr >= 1:  # 1: exact matches only, which normalisation groups already
        return empty
    p = {"texts": texts, "width": SHINGLE_CHARS, "threshold": thr}
    cand = run_sql(con, near_duplicate_candidates_sql(), p).fetchnumpy()
    if not len(cand["i1"]):
        return empty
    rows = run_sql(con, "SELECT i, list(h) AS hs FROM (" + shingles_sql() + ") GROUP BY i",
                   {k: p[k] for k in ("texts", "width")}).fetchall()
    sets = {i: frozenset(hs) for i, hs in rows}
    pairs = []
    for i1, i2 in zip(cand["i1"].tolist(), cand["i2"].tolist()):
        a, b = sets[i1], sets[i2]
        shared = len(a & b)
        jaccard = shared / (len(a) + len(b) - shared)
        if jaccard >= thr:
            pairs.append((texts[i1 - 1], texts[i2 - 1], jaccard))
    return pd.DataFrame(sorted(pairs), columns=["key_a", "key_b", "jaccard"]) if pairs else empty


def ordered_runs(con: duckdb.DuckDBPyConnection, run: str | Sequence[str]) -> list[str]:
    """Run labels ordered as training went: by step (a run without a step first), then as given."""
    labels = resolve_runs(con, run)
    steps = dict(con.execute("SELECT run_id, step FROM runs WHERE list_contains(?, run_id)", [labels]).fetchall())
    return sorted(labels, key=lambda r: (steps.get(r) is not None, steps.get(r) or 0, labels.index(r)))


class _Components:
    """Union-find over hashable nodes."""

    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, x, y) -> None:
        rx, ry = self.find(x), self.find(y)
        if rx != ry:
            self.parent[max(rx, ry)] = min(rx, ry)


def _is_key(value) -> bool:
    return isinstance(value, str) and value != ""


def _groups(df: pd.DataFrame, external: pd.DataFrame, edges: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Group of every sample (named after its smallest sample id), whether validation elsewhere
    pins it, and the counts: samples sharing a prompt, near-duplicate pairs and samples."""
    comp = _Components()
    for sid, key in zip(df.sample_id, df.group_key):
        comp.find(("s", sid))
        if _is_key(key):
            comp.union(("s", sid), ("k", key))
    ext_runs = {}
    for sid, key, runs in zip(external.sample_id, external.group_key, external.runs):
        ext_runs[sid] = list(runs)
        comp.find(("s", sid))
        if _is_key(key):
            comp.union(("s", sid), ("k", key))
    for a, b in zip(edges.key_a, edges.key_b):
        comp.union(("k", a), ("k", b))
    roots = [comp.find(("s", sid)) for sid in df.sample_id]
    label: dict = {}
    for root, sid in zip(roots, df.sample_id):
        label[root] = min(label.get(root, sid), sid)
    pinned_by: dict = {}
    for sid, runs in ext_runs.items():
        pinned_by.setdefault(comp.find(("s", sid)), set()).update(runs)
    ext_keys = set(external.group_key[external.group_key.map(_is_key)])
    how = ["the sample is" if sid in ext_runs else "its prompt is" if key in ext_keys
           else "a near-duplicate of its prompt is" if root in pinned_by else None
           for sid, key, root in zip(df.sample_id, df.group_key, roots)]
    out = pd.DataFrame({"sample_id": df.sample_id.to_numpy(), "group": [label[r] for r in roots],
                        "pinned_by": [sorted(pinned_by.get(r, ())) for r in roots], "pinned_how": how})
    keys = df.group_key.dropna()
    own = set(keys)
    dup_keys = set(keys[keys.duplicated(keep=False)])
    near = edges[edges.key_a.isin(own) | edges.key_b.isin(own)]
    near_keys = set(near.key_a) | set(near.key_b)
    sizes = out.group.value_counts()
    counts = {"groups": int(out.group.nunique()),
              "groups_with_several_samples": int((sizes > 1).sum()),
              "same_prompt_samples": int(df.group_key.isin(dup_keys).sum()),
              "near_duplicate_pairs": int(len(near)),
              "near_duplicate_samples": int(df.group_key.isin(near_keys).sum())}
    return out, counts


def _split_by_group(df: pd.DataFrame, validation_share: float, seed: int) -> pd.Series:
    """train / validation for kept samples, by whole groups: a pinned group goes to validation;
    the others, in an order drawn from the seed, fill validation up to the share of kept samples."""
    kept = df[df.verdict == "keep"]
    split = pd.Series([None] * len(df), index=df.index, dtype=object)
    if kept.empty:
        return split
    target = round(validation_share * len(kept))
    pinned = kept.pinned_by.map(len) > 0
    sizes = kept[~pinned].groupby("group").size()
    order = sorted(sizes.index, key=lambda g: hashlib.md5(f"{seed}:{g}".encode()).hexdigest())
    validation, filled = set(), int(pinned.sum())
    for group in order:
        if filled >= target:
            break
        validation.add(group)
        filled += int(sizes[group])
    split[kept.index] = ["validation" if p or g in validation else "train" for p, g in zip(pinned, kept.group)]
    return split


def _suspects(con, runs: Iterable[str], audit_base: str | None, pass_threshold) -> dict[tuple[str, str], str]:
    from .audit import audit

    flagged = {}
    for run in runs:
        found = audit(con, run, base=audit_base if audit_base != run else None, pass_threshold=pass_threshold)
        for sid, reason in zip(found.sample_id, found.reason):  # most suspect first: its reasons win
            if sid is not None:
                flagged.setdefault((run, sid), reason)
    return flagged


def _value_text(row, on_mean: bool) -> str:
    if on_mean:
        return f"mean score {fmt.number(row.mean_score)} over {row.attempts} attempts"
    return f"passed {row.successes} of {row.attempts} attempts ({fmt.share(row.pass_rate)})"


def _reason(row, on_mean: bool, band: tuple[float, float], min_attempts: int, several: bool) -> str:
    lo, hi = band
    shown = (f"{fmt.number(lo)}–{fmt.number(hi)}" if on_mean else f"{fmt.share(lo)}–{fmt.share(hi)}")
    v = row.verdict
    if v == "infra":
        text = f"{row.rollouts} rollouts, all infra errors or never graded: unknown, not hard"
    elif v == "few_attempts":
        left = row.rollouts - row.attempts
        text = (f"{row.attempts} counted attempt{'s' if row.attempts != 1 else ''}, fewer than "
                f"min_attempts={min_attempts}" + (f" ({left} infra errors or never graded)" if left else ""))
    elif v == "suspect":
        text = f"flagged by the audit: {row.suspect_reason}"
    elif v == "too_easy":
        text = f"passed all {row.attempts} attempts: nothing left to learn"
    elif v == "too_hard":
        if on_mean:
            text = f"scored {fmt.number(row.min_score)} on all {row.attempts} attempts: no signal"
        else:
            text = f"never passed in {row.attempts} attempts" + (
                f" (partial credit only, best {fmt.number(row.max_score)})" if row.max_score > row.reward_floor else "")
    elif v == "outside_band":
        value = row.mean_score if on_mean else row.pass_rate
        text = f"{_value_text(row, on_mean)}: {'below' if value < lo else 'above'} the band {shown}"
    elif v == "duplicate":
        text = f"same prompt as {row.duplicate_of}"
    else:
        text = f"{_value_text(row, on_mean)}: inside the band {shown}"
    if several and v != "duplicate":
        text = f"at {_step_name(row.run, row.step)}: {text}"
        if row.trend == "saturated":
            text += (f"; saturated by the last checkpoint ({fmt.share(row.first_pass_rate)} at "
                     f"{_step_name(row.first_run, row.first_step)}): move it out of the curriculum")
        elif row.trend == "never_moved":
            text += (f"; never moved: {'passed every' if row.always_passed else 'failed every'} attempt at all "
                     f"{row.steps} steps ({row.total_attempts} attempts)")
    if row.split == "validation" and len(row.pinned_by):
        text += f"; stays in validation: {row.pinned_how} in the validation split of {', '.join(row.pinned_by[:3])}"
        text += f" and {len(row.pinned_by) - 3} more" if len(row.pinned_by) > 3 else ""
    return text


def _trend(row) -> str:
    """saturated: every attempt passed at the latest step, not at every step before; never_moved:
    every attempt failed (or passed) at every step; one_step: seen at one step only."""
    if row.steps < 2:
        return "one_step"
    if row.attempts > 0 and row.successes == row.attempts and not row.always_passed:
        return "saturated"
    return "never_moved" if row.always_passed or row.never_passed else "moving"


def _step_name(run: str, step) -> str:
    return f"step {int(step)} ({run})" if step is not None and not pd.isna(step) else run


def curate(con: duckdb.DuckDBPyConnection, run: str | Sequence[str], band: tuple[float, float] | None = None,
           on: str | None = None, min_attempts: int | None = None, drop_suspects: bool = False,
           audit_base: str | None = None, validation_share: float | None = None, seed: int | None = None,
           mask_numbers: bool | None = None, near_duplicate_threshold: float | None = None,
           keep_validation: bool = True, pass_threshold: float | None = None,
           include_errors: bool = False) -> pd.DataFrame:
    """One row per sample: ``sample_id, attempts, pass_rate, mean_score, verdict, reason, group,
    split``, then ``run, step`` (whose rollouts decided), ``rollouts, successes, min_score,
    max_score, has_prompt, duplicate_of, pinned_by``; with several runs (a training run's steps)
    also ``first_run, first_step, first_pass_rate, steps, trend`` (saturated / never_moved /
    moving). Deterministic for a seed. Defaults: ``CURATE_DEFAULTS``.

    ``run``: a label, or several (a training run's steps): each sample is judged on its latest
    run with counted attempts. ``band``: keep when the pass rate (``on="pass_rate"``) or the mean
    score (``on="mean_score"``) lies in [lo, hi]. ``drop_suspects``: samples with a rollout the
    audit flags (``audit_base``: its base run) are ``suspect``. ``validation_share`` of the kept
    samples go to validation by whole groups; ``keep_validation``: a group holding a sample that
    another run evaluated on a validation split goes to validation whatever the share.
    ``attrs``: the parameters, ``counts`` per verdict, ``splits``, the grouping counts."""
    d = CURATE_DEFAULTS
    band = tuple(float(x) for x in (d["band"] if band is None else band))
    on = d["on"] if on is None else on
    min_attempts = int(d["min_attempts"] if min_attempts is None else min_attempts)
    validation_share = float(d["validation_share"] if validation_share is None else validation_share)
    seed = int(d["seed"] if seed is None else seed)
    mask_numbers = bool(d["mask_numbers"] if mask_numbers is None else mask_numbers)
    near_thr = float(d["near_duplicate_threshold"] if near_duplicate_threshold is None else near_duplicate_threshold)
    if on not in ("pass_rate", "mean_score"):
        raise ValueError(f"on={on!r}: use 'pass_rate' or 'mean_score'")
    if len(band) != 2 or not band[0] <= band[1]:
        raise ValueError(f"band={band!r}: give (low, high) with low <= high")
    if not 0 <= validation_share <= 1:
        raise ValueError(f"validation_share={validation_share!r}: give a share from 0 to 1")
    if not 0 < near_thr <= 1:
        raise ValueError(f"near_duplicate_threshold={near_thr!r}: give a Jaccard similarity in (0, 1]")
    labels = ordered_runs(con, run)
    several = len(labels) > 1
    thr = common_threshold(con, labels, pass_threshold)  # None: each run's own
    p = params(labels, include_errors, threshold=thr, min_attempts=min_attempts, on_mean=on == "mean_score",
               lo=band[0], hi=band[1], mask_numbers=mask_numbers, validation_splits=list(VALIDATION_SPLITS))
    df = run_sql(con, curate_samples_sql(), p).df()
    df["norm_prompt"], df["group_key"] = prompt_keys(df.pop("prompt"), mask_numbers)
    external = (run_sql(con, validation_samples_sql(), p).df() if keep_validation
                else pd.DataFrame({"sample_id": [], "runs": [], "prompt": []}))
    external["group_key"] = prompt_keys(external.pop("prompt"), mask_numbers)[1]
    keys = set(df.group_key.dropna()) | set(external.group_key.dropna())
    edges = near_duplicates(con, keys, near_thr)
    groups, group_counts = _groups(df, external, edges)
    df = df.merge(groups, on="sample_id", how="left")
    df["has_prompt"] = df.norm_prompt.notna()

    verdict = df.band_verdict.copy()
    df["suspect_reason"] = None
    if drop_suspects and len(df):
        flagged = _suspects(con, sorted(set(df.run)), audit_base, thr)
        reasons = [flagged.get((r, s)) for r, s in zip(df.run, df.sample_id)]
        df["suspect_reason"] = reasons
        hit = pd.Series([r is not None for r in reasons], index=df.index) & ~verdict.isin(["infra", "few_attempts"])
        verdict[hit] = "suspect"
    # the same prompt twice trains on it twice: the first sample id keeps it
    first = df[verdict.eq("keep") & df.norm_prompt.notna()].groupby("norm_prompt").sample_id.transform("min")
    df["duplicate_of"] = None
    dup = first.index[first != df.loc[first.index, "sample_id"]]
    verdict[dup] = "duplicate"
    df.loc[dup, "duplicate_of"] = first[dup]
    df["verdict"] = verdict
    if not keep_validation:
        df["pinned_by"] = [[] for _ in range(len(df))]
    df["split"] = _split_by_group(df, validation_share, seed)
    if several:
        df["trend"] = [_trend(row) for row in df.itertuples(index=False)]
    else:
        df["trend"] = None
    on_mean = on == "mean_score"
    df["reason"] = [_reason(row, on_mean, band, min_attempts, several) for row in df.itertuples(index=False)]

    columns = ["sample_id", "attempts", "pass_rate", "mean_score", "verdict", "reason", "group", "split", "run", "step",
               "rollouts", "successes", "min_score", "max_score", "has_prompt", "duplicate_of", "pinned_by"]
    if several:
        columns += ["first_run", "first_step", "first_pass_rate", "steps", "trend"]
    out = df[columns].reset_index(drop=True)
    kept = out.verdict.eq("keep")
    out.attrs.update({
        "runs": labels, "run": labels[-1], "band": list(band), "on": on, "min_attempts": min_attempts,
        "drop_suspects": drop_suspects, "audit_base": audit_base, "validation_share": validation_share,
        "seed": seed, "mask_numbers": mask_numbers, "near_duplicate_threshold": near_thr,
        "keep_validation": keep_validation, "pass_threshold": thr, "include_errors": include_errors,
        "samples": int(len(out)),
        "counts": {v: int(out.verdict.eq(v).sum()) for v in VERDICTS},
        "splits": {s: int(out.split.eq(s).sum()) for s in ("train", "validation")},
        **group_counts,
        "pinned_validation": int((kept & (out.pinned_by.map(len) > 0)).sum()),
        "kept_without_prompt": int((kept & ~out.has_prompt).sum()),
    })
    out.attrs["advice"], out.attrs["next"] = training_advice(con, out)
    return out


def training_split_runs_sql() -> str:
    """Runs other than $runs whose split is not a validation split: where training samples are."""
    return """
    SELECT run_id FROM runs
    WHERE NOT list_contains($runs, run_id)
      AND (split IS NULL OR NOT list_contains($validation_splits, lower(split)))
    ORDER BY split IS NULL, step NULLS FIRST, run_id  -- a run that says it is training first
    """


def training_advice(con: duckdb.DuckDBPyConnection, curated: pd.DataFrame) -> tuple[str | None, str | None]:
    """Why a curation leaves nothing to train on, and the command that would (None, None when
    the train split has samples): a band nothing falls in, kept samples that are all another
    run's validation samples (an evaluation run curated: training on them would leak), or a
    validation share that takes every kept group."""
    a = curated.attrs
    if a["splits"]["train"]:
        return None, None
    runs, band = a["runs"], a["band"]
    label = " and ".join(runs)
    kept, counts = a["counts"]["keep"], a["counts"]
    if not kept:
        said = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
        return (f"No sample of {label} is inside the band {band[0]:g}–{band[1]:g} of its {a['on'].replace('_', ' ')} "
                f"({said or 'no samples'}): nothing to train on. Widen the band (--band 0.1 0.9), judge partial "
                "credit (--on mean_score), or give samples more attempts (rl.signal_plan says how many).", None)
    if a["pinned_validation"] == kept:
        others = sorted({r for pins in curated.pinned_by for r in (pins or [])})
        candidates = [r for (r,) in run_sql(con, training_split_runs_sql(), {
            "runs": runs, "validation_splits": list(VALIDATION_SPLITS)}).fetchall()]
        command = f"rolloutlab curate --run {shlex.quote(candidates[0])}" if candidates else None
        return (f"All {kept} kept samples of {label} are evaluated on a validation split (by {', '.join(others)}): "
                "training on them would leak into that evaluation, so none goes to train. Curate the rollouts of the "
                "training samples instead" + (f": {command} (runs of the training split: "
                                              f"{', '.join(candidates[:5])}{' …' if len(candidates) > 5 else ''})"
                                              if candidates else " (load them first)")
                + "; or, to train on these anyway, --no-keep-validation.", command)
    return (f"validation_share {a['validation_share']:g} takes every kept group of {label} ({kept} samples) into "
            "validation: lower it (--validation-share 0.1).", None)


@functools.cache
def per_sample_plan_sql() -> str:
    """``signal_plan_sql`` kept per (run, sample): the same prior, posterior and expression, with
    ``run_id, sample_id`` added to its last CTE and its grouping (rewritten on sqlglot's syntax
    tree, so the model stays defined once). A sample's ``expected_signal_share`` is then its own
    P(k attempts neither all succeed nor all fail)."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(signal_plan_sql(), read="duckdb")
    with_ = tree.find(exp.With)
    post = next((c for c in (with_.expressions if with_ else []) if c.alias == "post"), None)
    if post is None or not isinstance(tree, exp.Select):
        raise RuntimeError("signal_plan_sql() no longer ends in a 'post' CTE: update curate.per_sample_plan_sql")
    post.this.select("run_id", "sample_id", copy=False)
    tree.select("run_id", "sample_id", copy=False)
    tree.group_by("run_id", "sample_id", copy=False)
    return tree.sql(dialect="duckdb")


def forecast_sql() -> str:
    """Per k: the kept samples' mean expected signal share and its standard error as a mean of
    independent Bernoulli outcomes (sqrt(sum q(1 - q)) / n); the same over every picked sample
    (``all_*``: the run before curation)."""
    return f"""
    WITH per AS ({per_sample_plan_sql()}),
    picked AS (SELECT unnest($pick_runs) AS run_id, unnest($pick_samples) AS sample_id, unnest($pick_kept) AS kept)
    SELECT k, avg(expected_signal_share) FILTER (WHERE kept) AS expected_signal_share,
           sqrt(sum(expected_signal_share * (1 - expected_signal_share)) FILTER (WHERE kept))
               / nullif(count(*) FILTER (WHERE kept), 0) AS se,
           count(*) FILTER (WHERE kept) AS samples,
           avg(expected_signal_share) AS all_expected_signal_share, count(*) AS all_samples,
           any_value(prior_a) AS prior_a, any_value(prior_b) AS prior_b
    FROM per JOIN picked USING (run_id, sample_id) GROUP BY k ORDER BY k
    """


FORECAST_COLUMNS = ["k", "expected_signal_share", "ci_low", "ci_high", "se", "samples", "all_expected_signal_share",
                    "all_samples", "prior_a", "prior_b", "target", "reaches_target", "recommended"]


def forecast(con: duckdb.DuckDBPyConnection, curated: pd.DataFrame, ks: Iterable[int] = FORECAST_KS,
             target: float | None = None, split: str | None = None) -> pd.DataFrame:
    """Expected signal share of the curated set per attempts per sample: ``signal_plan``'s model
    (prior fitted to the curated runs' samples, posterior per sample) averaged over the kept
    samples (of ``split`` only, when given), with a 95% interval for the share a new round of k
    attempts will show; ``all_expected_signal_share``: every sample with counted attempts, as
    before curation. ``recommended`` marks the smallest k reaching ``target`` (the compute
    multiplier to ask for)."""
    target = config.CHECK_THRESHOLDS["signal_target"] if target is None else float(target)
    ks = [int(k) for k in ks]
    picked = curated[curated.attempts > 0]
    kept = picked.verdict.eq("keep") & (picked.split.eq(split) if split is not None else True)
    if picked.empty:
        df = pd.DataFrame({c: pd.Series(dtype=float) for c in FORECAST_COLUMNS})
    else:
        a = curated.attrs
        p = params(list(a.get("runs") or sorted(set(picked.run))), bool(a.get("include_errors", False)),
                   threshold=threshold(a.get("pass_threshold")), ks=ks, pick_runs=list(picked.run),
                   pick_samples=list(picked.sample_id), pick_kept=[bool(x) for x in kept])
        df = run_sql(con, forecast_sql(), p).df()
        z = FORECAST_Z * df.se
        df["ci_low"] = (df.expected_signal_share - z).clip(lower=0.0)
        df["ci_high"] = (df.expected_signal_share + z).clip(upper=1.0)
        df["samples"] = df.samples.astype(int)
    df["target"] = target
    df["reaches_target"] = df.expected_signal_share >= target
    df["recommended"] = False
    first = df.index[df.reaches_target.fillna(False).astype(bool)]
    if len(first):
        df.loc[first[0], "recommended"] = True
    return df[FORECAST_COLUMNS].reset_index(drop=True)


def signal_by_step_sql() -> str:
    """Per run (and per data source where the samples carry one: ``meta.data_source``): samples
    all-fail, all-pass and mixed among those with >= 2 counted attempts, and with no score
    variation at all (``zero_std``: GRPO's zero-advantage groups)."""
    counts = """count(*) AS samples, count(*) FILTER (WHERE n >= 2) AS samples_multi,
               count(*) FILTER (WHERE n = 1) AS single_attempt,
               count(*) FILTER (WHERE n >= 2 AND c = 0) AS all_fail,
               count(*) FILTER (WHERE n >= 2 AND c = n) AS all_pass,
               count(*) FILTER (WHERE n >= 2 AND c > 0 AND c < n) AS mixed,
               count(*) FILTER (WHERE n >= 2 AND max = min) AS zero_std"""
    return f"""
    WITH per_sample AS ({per_sample_sql()}),
    sources AS (SELECT sample_id, min(json_extract_string(meta, '$.data_source')) AS data_source
                FROM samples WHERE meta IS NOT NULL GROUP BY sample_id),
    tagged AS (SELECT p.*, s.data_source FROM per_sample p LEFT JOIN sources s USING (sample_id)),
    grouped AS (
        SELECT run_id, '(all)' AS data_source, {counts} FROM tagged GROUP BY run_id
        UNION ALL
        SELECT run_id, data_source, {counts} FROM tagged WHERE data_source IS NOT NULL GROUP BY run_id, data_source)
    SELECT r.label AS run, coalesce(r.split, '(no split)') AS split, coalesce(r.step, 0) AS step,
           r.step IS NOT NULL AS step_known, g.data_source, g.samples, g.samples_multi, g.single_attempt,
           g.all_fail, g.all_pass, g.mixed, g.zero_std,
           g.all_fail / nullif(g.samples_multi, 0) AS share_all_fail,
           g.all_pass / nullif(g.samples_multi, 0) AS share_all_pass,
           g.mixed / nullif(g.samples_multi, 0) AS share_mixed,
           g.zero_std / nullif(g.samples_multi, 0) AS share_zero_std
    FROM grouped g JOIN runs r ON r.run_id = g.run_id
    ORDER BY split, step, r.step IS NOT NULL, run, g.data_source <> '(all)', g.data_source
    """


def signal_by_step(con: duckdb.DuckDBPyConnection, runs: str | Iterable[str] | None = None,
                   pass_threshold: float | None = None, include_errors: bool = False) -> pd.DataFrame:
    """The learning signal along training: one row per run (``data_source`` ``(all)``) and per
    data source the samples carry, ordered by split then step. Among samples with >= 2 counted
    attempts: ``share_all_fail``, ``share_all_pass``, ``share_mixed`` (pass/fail outcomes at the
    pass threshold) and ``share_zero_std`` (every attempt the same score: TRL's
    ``frac_reward_zero_std``, verl's zero-advantage groups). A run without a step sits at step 0
    of its split with ``step_known`` False."""
    labels = resolve_runs(con, runs)
    return run_sql(con, signal_by_step_sql(), params(labels, include_errors, threshold=threshold(pass_threshold))).df()


__all__ = ["curate", "forecast", "signal_by_step", "near_duplicates", "ordered_runs", "CURATE_DEFAULTS",
           "VALIDATION_SPLITS", "VERDICTS"]

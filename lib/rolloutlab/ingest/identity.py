"""Which run a record loads into, and what the run is called.

A run is one checkpoint at one step on one split of one evaluation: its key is (label, evaluation,
step, split). ``label`` is what people type and group by (``--run``, a native record's ``run``, a
converted log's ``<model>/<task>``); ``evaluation`` is what the producer says identifies one
evaluation (an Inspect ``eval_id``, a tau2 results file's timestamp and setting; NULL where it
says nothing, and under ``--run``, which merges on purpose). ``run_keys`` maps every key to its run.

A run's name (``run_id``) is its label, qualified only by what varies among the label's keys:
``@<evaluation tag>`` when the label holds several evaluations of one step and split, ``-step<N>``
when several steps, ``-<split>`` when several splits (``job1-step2-valid``). Names follow the keys loaded, so a label
that gains a second step renames its first run (``job1`` -> ``job1-step1``). A name chosen by a
person (``merge_runs``, ``rename_run``) is kept across re-ingest. Everything is SQL over the small
``run_keys`` table; only the rows of runs whose name changes are touched in ``rollouts``.
"""
from __future__ import annotations

from typing import Iterable

import duckdb

from ..store import database as store
from ..store.database import run_sql

KEY = ("label", "evaluation", "step", "split")
SAME_KEY = " AND ".join(f"a.{c} IS NOT DISTINCT FROM b.{c}" for c in KEY)
KEYS_IN = "_rl_keys_in"  # (label, evaluation, step, split, tag, model, checkpoint, meta, source_id): keys of a load
RUN_MAP = "_rl_run_map"  # (label, evaluation, step, split, run_id): where each key of the load goes


class RunNameError(ValueError):
    """A merge or rename that cannot be done, with what to do instead."""


def new_keys_sql() -> str:
    """Keys of this load the store does not know yet."""
    return f"""INSERT INTO run_keys (label, evaluation, step, split, run_id, named, tag)
        SELECT DISTINCT ON (label, evaluation, step, split) label, evaluation, step, split, '', false, tag
        FROM {KEYS_IN} b WHERE NOT EXISTS (SELECT 1 FROM run_keys a WHERE {SAME_KEY})"""


def names_sql() -> str:
    """Each key of the labels in $labels with the name it should have now: a person's choice, else
    the label qualified by what varies among all the label's keys (a person's names included, so
    renaming one run never renames the others). An unnamed key whose name is another label, or
    another key's name, gets a short hash of its key: two keys never share a run unless a person
    merged them, and a label's own name is its own whichever loaded first."""
    return """
    CREATE OR REPLACE TEMP TABLE _rl_names AS
    WITH keys AS (SELECT * FROM run_keys WHERE list_contains($labels, label)),
    varies AS (
        SELECT label, count(DISTINCT coalesce(step::VARCHAR, chr(0))) > 1 AS by_step,
               count(DISTINCT coalesce(split, chr(0))) > 1 AS by_split
        FROM keys GROUP BY label),
    evaluations AS (  -- evaluations tell runs apart only where step and split do not
        SELECT label, step, split, count(DISTINCT coalesce(evaluation, chr(0))) > 1 AS by_evaluation
        FROM keys GROUP BY ALL),
    tags AS (  -- an evaluation as people read it: its tag (when it ran), else its id, shortened
        SELECT label, evaluation,
               coalesce(tag, CASE WHEN length(evaluation) <= 24 THEN evaluation
                                  ELSE left(evaluation, 16) || '~' || left(md5(evaluation), 6) END) AS shown
        FROM (SELECT DISTINCT label, evaluation, any_value(tag) OVER (PARTITION BY label, evaluation) AS tag
              FROM keys WHERE evaluation IS NOT NULL)),
    shown AS (  -- two evaluations shown alike are told apart by their ids
        SELECT label, evaluation, CASE WHEN count(*) OVER (PARTITION BY label, shown) > 1
                                       THEN shown || '~' || left(md5(evaluation), 6) ELSE shown END AS shown
        FROM tags),
    derived AS (
        SELECT k.label, k.evaluation, k.step, k.split, k.run_id AS old_id, k.named,
               CASE WHEN k.named THEN k.run_id ELSE k.label
                    || CASE WHEN e.by_evaluation AND k.evaluation IS NOT NULL THEN '@' || t.shown ELSE '' END
                    || CASE WHEN v.by_step AND k.step IS NOT NULL THEN '-step' || k.step ELSE '' END
                    || CASE WHEN v.by_split AND k.split IS NOT NULL THEN '-' || k.split ELSE '' END END AS name,
               left(md5(concat_ws(chr(31), k.label, k.evaluation, k.step::VARCHAR, k.split)), 6) AS key_hash
        FROM keys k LEFT JOIN varies v USING (label)
        LEFT JOIN evaluations e ON e.label = k.label AND e.step IS NOT DISTINCT FROM k.step
             AND e.split IS NOT DISTINCT FROM k.split
        LEFT JOIN shown t ON t.label = k.label AND t.evaluation IS NOT DISTINCT FROM k.evaluation),
    taken AS (  -- what an unnamed key may not be called: another label, another label's run, a named run
        SELECT label AS owner, label AS name FROM run_keys
        UNION SELECT label, run_id FROM run_keys WHERE NOT list_contains($labels, label)
        UNION SELECT NULL, run_id FROM run_keys WHERE named)
    SELECT d.label, d.evaluation, d.step, d.split, d.old_id,
           CASE WHEN d.named THEN d.name
                WHEN d.name = d.label  -- a label's own name is its own, unless a person gave it to a run
                THEN CASE WHEN EXISTS (SELECT 1 FROM run_keys n WHERE n.named AND n.run_id = d.name)
                          THEN d.name || '~' || d.key_hash ELSE d.name END
                WHEN EXISTS (SELECT 1 FROM taken t WHERE t.name = d.name AND t.owner IS DISTINCT FROM d.label)
                     OR count(*) OVER (PARTITION BY d.name) > 1
                THEN d.name || '~' || d.key_hash
                ELSE d.name END AS run_id
    FROM derived d
    """


def rename_sql() -> list[str]:
    """Apply _rl_names: rows of runs whose name changed move in two steps (through a name no run
    has), so that names may swap or shift within one load."""
    moved = "(SELECT DISTINCT old_id, run_id FROM _rl_names WHERE old_id <> '' AND old_id <> run_id)"
    return [
        # through a name no label can have (labels never hold control characters: see convert.readable)
        f"CREATE OR REPLACE TEMP TABLE _rl_moved AS SELECT old_id, run_id, chr(1) || 'moving' || chr(1) || old_id AS via "
        f"FROM {moved}",
        "UPDATE rollouts SET run_id = m.via FROM _rl_moved m WHERE rollouts.run_id = m.old_id",
        "UPDATE runs SET run_id = m.via FROM _rl_moved m WHERE runs.run_id = m.old_id",
        "UPDATE rollouts SET run_id = m.run_id FROM _rl_moved m WHERE rollouts.run_id = m.via",
        "UPDATE runs SET run_id = m.run_id FROM _rl_moved m WHERE runs.run_id = m.via",
        """UPDATE run_keys SET run_id = n.run_id FROM _rl_names n
           WHERE run_keys.label = n.label AND run_keys.evaluation IS NOT DISTINCT FROM n.evaluation
             AND run_keys.step IS NOT DISTINCT FROM n.step AND run_keys.split IS NOT DISTINCT FROM n.split""",
        "DROP TABLE _rl_moved",
        "DROP TABLE _rl_names",
    ]


def new_runs_sql() -> str:
    """A row in ``runs`` for every run this load brings that has none."""
    return f"""INSERT INTO runs (run_id, label, model, checkpoint, step, split, source_id, meta, evaluation)
        SELECT k.run_id, any_value(k.label), any_value(i.model), any_value(i.checkpoint), any_value(k.step),
               any_value(k.split), min(i.source_id), any_value(i.meta),
               CASE WHEN count(DISTINCT k.evaluation) = 1 THEN any_value(k.evaluation) END
        FROM {KEYS_IN} i JOIN run_keys k ON k.label = i.label AND k.evaluation IS NOT DISTINCT FROM i.evaluation
             AND k.step IS NOT DISTINCT FROM i.step AND k.split IS NOT DISTINCT FROM i.split
        WHERE k.run_id NOT IN (SELECT run_id FROM runs)
        GROUP BY k.run_id"""


def run_map_sql() -> str:
    return f"""CREATE OR REPLACE TEMP TABLE {RUN_MAP} AS
        SELECT b.label, b.evaluation, b.step, b.split, a.run_id
        FROM (SELECT DISTINCT label, evaluation, step, split FROM {KEYS_IN}) b JOIN run_keys a ON {SAME_KEY}"""


def assign(con: duckdb.DuckDBPyConnection) -> None:
    """Give every key of ``_rl_keys_in`` its run: record new keys, name (and rename) the runs of
    their labels, add the runs that are new, and leave ``_rl_run_map`` for the loader to join."""
    # the labels loaded, and those whose runs are named like one of them (a label's own name is its own)
    labels = [r[0] for r in con.execute(f"""SELECT DISTINCT label FROM {KEYS_IN}
                                            UNION SELECT label FROM run_keys WHERE run_id IN (SELECT label FROM {KEYS_IN})
                                            ORDER BY 1""").fetchall()]
    if not labels:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {RUN_MAP} (label VARCHAR, evaluation VARCHAR, step INTEGER, "
                    "split VARCHAR, run_id VARCHAR)")
        return
    con.execute(new_keys_sql())
    rename(con, labels)
    con.execute(new_runs_sql())
    con.execute(run_map_sql())


def rename(con: duckdb.DuckDBPyConnection, labels: list[str]) -> None:
    """Bring the names of the runs of ``labels`` in line with their keys."""
    run_sql(con, names_sql(), {"labels": labels})
    for sql in rename_sql():
        con.execute(sql)


def forget_empty_runs(con: duckdb.DuckDBPyConnection) -> None:
    """Runs left without rollouts go, with their keys (unless a person named them: a re-ingest
    brings their rollouts back under that name); the other runs of their labels are renamed."""
    labels = [r[0] for r in con.execute(
        "SELECT DISTINCT label FROM run_keys WHERE run_id NOT IN (SELECT DISTINCT run_id FROM rollouts)").fetchall()]
    con.execute("DELETE FROM runs WHERE run_id NOT IN (SELECT DISTINCT run_id FROM rollouts)")
    con.execute("DELETE FROM run_keys WHERE NOT named AND run_id NOT IN (SELECT DISTINCT run_id FROM rollouts)")
    if labels:
        rename(con, labels)


def keys_table_sql() -> str:
    return f"""CREATE OR REPLACE TEMP TABLE {KEYS_IN} (label VARCHAR, evaluation VARCHAR, step INTEGER,
        split VARCHAR, tag VARCHAR, model VARCHAR, checkpoint VARCHAR, meta JSON, source_id INTEGER)"""


# --- what people decide: these runs are one, this run is called so ------------------------------

def _existing(con, name: str) -> bool:
    return con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [name]).fetchone()[0] > 0


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip() or name != name.strip() or any(ord(c) < 32 for c in name):
        raise RunNameError(f"{name!r} cannot name a run: use a non-empty name without leading or trailing "
                           "spaces or control characters.")
    return name


def renumber_attempts_sql() -> str:
    """Within run $run, a (sample, attempt) held twice keeps it for its first rollout (by file and
    line); the others take the next free attempts. Their producer's number stays in attempt_raw."""
    return """
    UPDATE rollouts SET attempt = n.attempt FROM (
        WITH mine AS (SELECT rollout_id, sample_id, attempt, source_id, source_line FROM rollouts WHERE run_id = $run),
        ranked AS (SELECT *, row_number() OVER (PARTITION BY sample_id, attempt ORDER BY source_id, source_line,
                                                rollout_id) AS nth FROM mine),
        top AS (SELECT sample_id, max(attempt) AS top FROM mine GROUP BY sample_id)
        SELECT r.rollout_id, t.top + row_number() OVER (PARTITION BY r.sample_id ORDER BY r.source_id, r.source_line,
                                                        r.rollout_id) AS attempt
        FROM ranked r JOIN top t USING (sample_id) WHERE r.nth > 1) n
    WHERE rollouts.rollout_id = n.rollout_id AND rollouts.run_id = $run
    """


def named_meta_sql() -> str:
    """A run a person named says so in ``runs.meta`` with its keys (``named``, ``keys``), so that a
    lake, which carries ``runs`` but not ``run_keys``, brings the name and the merge back."""
    return """UPDATE runs SET meta = json_merge_patch(coalesce(meta, '{}'), json_object('named', true, 'keys',
                  (SELECT list({'label': label, 'evaluation': evaluation, 'step': step, 'split': split})
                   FROM run_keys WHERE run_id = $1)))
              WHERE run_id = $1"""


def merge_runs(con: duckdb.DuckDBPyConnection, runs: Iterable[str], as_: str) -> str:
    """Make ``runs`` one run called ``as_`` (which may be one of them), kept across re-ingest.

    For files that are one experiment but do not say so (shards of one evaluation, the same
    setting run at two times): their rollouts become one run; an attempt number two of them share
    is renumbered after the run's last (the producer's number stays in ``attempt_raw``). Runs of
    different steps or splits are never one run: that is refused. Returns the run's name."""
    from ..store.catalog import resolve_runs

    store.require_writer(con, "merging runs")
    names = list(dict.fromkeys(resolve_runs(con, list(runs), expand=True)))
    as_ = _check_name(as_)
    if len(names) < 2 and as_ in names:
        raise RunNameError(f"merging needs two runs or more; got {', '.join(map(repr, names))}.")
    if _existing(con, as_) and as_ not in names:
        raise RunNameError(f"run {as_!r} exists and is not among the runs merged: merge it too "
                           f"(rolloutlab runs merge {' '.join(names)} {as_} --as {as_}), or choose another name.")
    steps, splits = con.execute("SELECT coalesce(list(DISTINCT step) FILTER (WHERE step IS NOT NULL), []), "
                                "coalesce(list(DISTINCT split) FILTER (WHERE split IS NOT NULL), []) "
                                "FROM runs WHERE list_contains(?, run_id)",
                                [names]).fetchone()
    if len(steps) > 1 or len(splits) > 1:  # a run that names no step or split may join one that does
        shown = ", ".join(f"step {s}" for s in steps) + "; " + ", ".join(f"split {p}" for p in splits)
        raise RunNameError(f"runs {', '.join(map(repr, names))} are of different steps or splits ({shown}): a run is "
                           "one checkpoint at one step on one split. Compare them instead (rl.compare, rl.by_step).")
    with store.transaction(con):
        labels = [r[0] for r in con.execute("SELECT DISTINCT label FROM run_keys WHERE list_contains(?, run_id) "
                                            "ORDER BY label", [names]).fetchall()]
        row = con.execute("""SELECT any_value(model), any_value(checkpoint), max(step), max(split),
                                    min(source_id), any_value(meta) FROM runs WHERE list_contains(?, run_id)""",
                          [names]).fetchone()
        con.execute("UPDATE run_keys SET run_id = ?, named = true WHERE list_contains(?, run_id)", [as_, names])
        con.execute("UPDATE rollouts SET run_id = ? WHERE list_contains(?, run_id)", [as_, names])
        con.execute("DELETE FROM runs WHERE list_contains(?, run_id)", [names])
        con.execute("INSERT INTO runs (run_id, label, model, checkpoint, step, split, source_id, meta, evaluation) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)", [as_, labels[0] if len(labels) == 1 else as_, *row])
        con.execute(named_meta_sql(), [as_])
        run_sql(con, renumber_attempts_sql(), {"run": as_})
        rename(con, labels)
    return as_


def rename_run(con: duckdb.DuckDBPyConnection, run: str, name: str) -> str:
    """Call run ``run`` ``name`` from now on, across re-ingest. Returns the new name."""
    from ..store.catalog import resolve_run

    store.require_writer(con, "renaming a run")
    old = resolve_run(con, run)
    name = _check_name(name)
    if name == old:
        return name
    if _existing(con, name):
        raise RunNameError(f"run {name!r} exists already: to make the two one run, merge them "
                           f"(rolloutlab runs merge {old} {name} --as {name}).")
    with store.transaction(con):
        con.execute("UPDATE run_keys SET run_id = ?, named = true WHERE run_id = ?", [name, old])
        con.execute("UPDATE rollouts SET run_id = ? WHERE run_id = ?", [name, old])
        con.execute("UPDATE runs SET run_id = ? WHERE run_id = ?", [name, old])
        con.execute(named_meta_sql(), [name])
        labels = [r[0] for r in con.execute("SELECT DISTINCT label FROM run_keys WHERE run_id = ?", [name]).fetchall()]
        rename(con, labels)
    return name

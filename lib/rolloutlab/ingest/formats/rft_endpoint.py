"""rft-endpoint: what a team's tool endpoint and grader endpoint log during Agent RFT.

JSONL files, in any number and order, one event per line: tool events, grade events, sample
events (docs/formats.md). Events are kept in ``endpoint_events``; once all files of an ingest
call are in (``finish``), each rollout they touched is assembled again from all of its events,
whichever file or ingest call brought them. Everything is SQL.
"""
from __future__ import annotations

from ...store import database as store
from ...store.database import run_sql
from .. import identity
from ..context import LoadContext, LoadResult
from ..convert import INFRA_MARKERS
from ..fields import Field, first_problem_sql, lit, struct_type, type_checks
from ..lines import LINES_TABLE, STAGED_REJECTS, Staged, drop_lines, stage_lines

FORMAT = "rft-endpoint"
FILE_TYPES = (("jsonl", "rft-endpoint"),)  # what ingest reads of it (formats.file_types)
KINDS = ("tool", "grade", "sample")
UNAUTHENTICATED = "(401, 403, 407)"  # statuses of a call refused before the endpoint ran it

FIELDS = [
    Field("event", "string", choices=KINDS),
    Field("rollout_id", "string"),
    Field("tool", "string"),
    Field("arguments", "json"),
    Field("started_at", "timestamp"),
    Field("ended_at", "timestamp"),
    Field("status", "string"),
    Field("http_status", "integer", bits=32),
    Field("error", "text"),
    Field("output_chars", "integer", minimum=0),
    Field("run", "string"),
    Field("step", "integer", bits=32),
    Field("split", "string"),
    Field("sample_id", "string"),
    Field("final_answer", "text"),
    Field("score", "number"),
    Field("grades", "object"),
    Field("ts", "timestamp"),
    Field("prompt", "text"),
    Field("reference", "text"),
    Field("grader_latency_s", "number", minimum=0),
]


def sniff(path, head: str, first_record) -> bool:
    """An explicit ``event``; or what only endpoint events have: ``tool``, ``http_status``, ``ts``,
    ``grades`` as an object. (A bare {rollout_id, run, sample_id, score} line is native: pass
    --format rft-endpoint for such files.)"""
    if not isinstance(first_record, dict) or "trace" in first_record or "tool_calls" in first_record:
        return False
    return (first_record.get("event") in KINDS or "tool" in first_record or "http_status" in first_record
            or "ts" in first_record or isinstance(first_record.get("grades"), dict))


def _v(name: str) -> str:
    field = next(f for f in FIELDS if f.name == name)
    return field.value_sql(f'r."{name}"')


def events_sql(has_run_override: bool, staged: Staged) -> str:
    """Parse, classify and check every line: (line_no, reason, kind, typed fields)."""
    truncated = staged.truncated_sql()
    kind = (f"coalesce({_v('event')}, CASE WHEN r.tool IS NOT NULL THEN 'tool' "
            "WHEN r.score IS NOT NULL OR r.grades IS NOT NULL THEN 'grade' "
            "WHEN r.rollout_id IS NULL AND r.sample_id IS NOT NULL THEN 'sample' "
            "WHEN r.rollout_id IS NOT NULL AND r.sample_id IS NOT NULL THEN 'grade' END)")  # a failed grader
    checks = type_checks(FIELDS, "r") + [
        (f"{kind} IS NULL", "'cannot tell the event''s kind: a tool event has ''tool'', a grade event "
                            "''score'' or ''grades'', a sample event ''sample_id'' and no ''rollout_id''; or add "
                            "an ''event'' field'"),
        (f"{kind} IN ('tool', 'grade') AND r.rollout_id IS NULL", f"'missing required field ''rollout_id'' in a ' || {kind} || ' event'"),
        (f"{kind} = 'tool' AND r.tool IS NULL", "'missing required field ''tool'' in a tool event'"),
        (f"{_v('http_status')} IN {UNAUTHENTICATED}",
         f"'an unauthenticated call (HTTP ' || {_v('http_status')} || '): not counted, neither as a call nor as a grade "
         "(the endpoint never ran it; log calls only after authenticating them)'"),
        (f"{kind} = 'tool' AND {_v('ended_at')} < {_v('started_at')}",
         "'ended_at precedes started_at: the event''s clock is wrong'"),
        (f"{kind} IN ('grade', 'sample') AND r.sample_id IS NULL", f"'missing required field ''sample_id'' in a ' || {kind} || ' event'"),
        (f"{kind} = 'grade' AND r.score IS NULL AND r.grades IS NULL AND r.error IS NULL AND r.http_status IS NULL",
         "'a grade event needs ''score'' or ''grades'' (or, when the grader failed, ''error'' or ''http_status'')'"),
    ]
    if not has_run_override:
        checks.append((f"{kind} = 'grade' AND r.run IS NULL", "'missing required field ''run'' in a grade event (or pass --run LABEL)'"))
    values = ", ".join(f"{_v(f.name)} AS \"{f.name}\"" for f in FIELDS if f.name != "event")
    return f"""
    CREATE OR REPLACE TEMP TABLE _rl_ev AS
    SELECT line_no,
        CASE {truncated}
             WHEN r IS NULL THEN 'invalid JSON: fix the line or remove it'
             WHEN NOT is_object THEN 'not a JSON object: each line must be one event'
             ELSE {first_problem_sql(checks)} END AS reason,
        {kind} AS kind, {values}
    FROM (SELECT line_no, left(ltrim(left(line, 256)), 1) = '{{' AS is_object,
                 try(from_json(line, {lit(struct_type(FIELDS))})) AS r FROM {LINES_TABLE})
    """


# A grade event that scored the rollout: a score, or grades of which none failed (a null grade is a
# grader that failed: a retry that scores them all supersedes it).
SCORED = ("(score IS NOT NULL OR (grades IS NOT NULL AND NOT EXISTS ("
          "SELECT 1 FROM json_each(grades) j WHERE json_type(j.value) = 'NULL')))")


def grade_values_sql() -> str:
    """A grade event whose ``grades`` hold a value that is neither a finite number nor null (a
    grader that failed) is a reject naming the grader: 1e400 reads as infinity."""
    return """
    UPDATE _rl_ev SET reason = b.reason FROM (
        SELECT e.line_no, min('field ''grades.' || j.key || ''' must be a finite number (or null for a grader '
                              || 'that failed), got ' || left(j.value::VARCHAR, 60)) AS reason
        FROM _rl_ev e, json_each(e.grades) j
        WHERE e.reason IS NULL AND e.grades IS NOT NULL AND json_type(j.value) <> 'NULL'
          AND NOT coalesce(isfinite(try_cast(j.value AS DOUBLE)), false)
        GROUP BY e.line_no) b
    WHERE _rl_ev.line_no = b.line_no"""


def conflicts_sql() -> str:
    """Grade events of this file that score a rollout already scored (earlier here, or in another
    file). A grade event without a score (the grader failed) conflicts with nothing: a retry that
    scores supersedes it, and both stay visible (assemble_sql)."""
    return """
    WITH graded AS (
        SELECT source_id, line_no, rollout_id, score, grades::VARCHAR AS grades FROM endpoint_events
        WHERE kind = 'grade' AND """ + SCORED + """
        UNION ALL
        SELECT $sid, line_no, rollout_id, score, grades::VARCHAR FROM _rl_ev
        WHERE reason IS NULL AND kind = 'grade' AND """ + SCORED + """),
    ranked AS (
        SELECT *, first_value(source_id) OVER w AS first_source, first_value(line_no) OVER w AS first_line,
               first_value(score) OVER w AS first_score, first_value(grades) OVER w AS first_grades,
               row_number() OVER w AS rn
        FROM graded WINDOW w AS (PARTITION BY rollout_id ORDER BY source_id, line_no))
    SELECT k.line_no,
        CASE WHEN k.score IS NOT DISTINCT FROM k.first_score AND k.grades IS NOT DISTINCT FROM k.first_grades
             THEN 'duplicate grade event for rollout ''' || k.rollout_id || ''' (same as ' || s.path || ' line ' || k.first_line || ')'
             ELSE 'conflicting grade event for rollout ''' || k.rollout_id || ''': score '
                  || coalesce(k.score::VARCHAR, k.grades, 'none') || ' here, '
                  || coalesce(k.first_score::VARCHAR, k.first_grades, 'none') || ' at ' || s.path || ' line '
                  || k.first_line || ' (kept)' END AS reason
    FROM ranked k LEFT JOIN sources s ON s.source_id = k.first_source
    WHERE k.rn > 1 AND k.source_id = $sid
    """


def clashes_sql() -> str:
    """Events of this file whose rollout id is a rollout another format loaded (a native file, an
    Inspect log): events never replace it; the reject names both places."""
    return """
    SELECT e.line_no, 'rollout_id ''' || e.rollout_id || ''' is already a rollout loaded from ' || s.path
           || ' line ' || coalesce(r.source_line::VARCHAR, '?') || ' (' || s.format || '): endpoint events never '
           || 'replace a rollout of another file; give the endpoint''s rollouts ids of their own' AS reason
    FROM _rl_ev e JOIN rollouts r USING (rollout_id) JOIN sources s ON s.source_id = r.source_id
    WHERE e.reason IS NULL AND s.format <> 'rft-endpoint'
    """


def _infra_condition() -> str:
    markers = " OR ".join(f"contains(lower(coalesce(error, '')), {lit(m)})" for m in INFRA_MARKERS)
    return f"(coalesce(http_status, 0) >= 500 OR {markers})"


def assemble_sql() -> list[str]:
    """Rebuild every rollout touched by this file (or left without its rollout) from its events."""
    infra = _infra_condition()
    failed = ("(coalesce(status, 'ok') NOT IN ('ok', 'success') OR coalesce(http_status, 0) >= 400 "
              "OR error IS NOT NULL)")
    children = [f"DELETE FROM {t} WHERE rollout_id IN (SELECT rollout_id FROM _rl_affected)"
                for t in store.ROLLOUT_CHILD_TABLES]
    return [
        """CREATE OR REPLACE TEMP TABLE _rl_affected AS
           SELECT DISTINCT rollout_id FROM _rl_touched
           UNION  -- events whose rollout is gone (a replaced file took it)
           SELECT DISTINCT e.rollout_id FROM endpoint_events e
           WHERE e.rollout_id IS NOT NULL AND e.rollout_id NOT IN (SELECT rollout_id FROM rollouts)
           UNION  -- ungraded rollouts: their run may be known now that more grade events are in
           SELECT rollout_id FROM rollouts WHERE status = 'ungraded'
             AND rollout_id IN (SELECT rollout_id FROM endpoint_events)""",
        # a rollout another format loaded is never rebuilt from events (clashes_sql rejects them)
        """DELETE FROM _rl_affected WHERE rollout_id IN (
             SELECT r.rollout_id FROM rollouts r JOIN sources s USING (source_id) WHERE s.format <> 'rft-endpoint')""",
        *children,
        "DELETE FROM rollouts WHERE rollout_id IN (SELECT rollout_id FROM _rl_affected)",
        f"""CREATE OR REPLACE TEMP TABLE _rl_calls AS
        WITH flagged AS (  -- a call opens a turn when every earlier call has ended (so none runs beside it)
            SELECT *, row_number() OVER w - 1 AS call_idx,
                   coalesce(started_at >= max(ended_at) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
                            true) AS opens_turn
            FROM endpoint_events WHERE kind = 'tool' AND rollout_id IN (SELECT rollout_id FROM _rl_affected)
            WINDOW w AS (PARTITION BY rollout_id ORDER BY started_at NULLS LAST, source_id, line_no))
        -- one window order throughout, so the calls are sorted once
        SELECT *, sum(opens_turn::INTEGER) OVER (PARTITION BY rollout_id ORDER BY started_at NULLS LAST, source_id,
                                                 line_no ROWS UNBOUNDED PRECEDING) - 1 AS turn_idx,
               CASE WHEN NOT {failed} THEN 'ok' WHEN {infra} THEN 'infra_error' ELSE 'model_error' END AS outcome
        FROM flagged""",
        """INSERT INTO tool_calls
        SELECT rollout_id, call_idx, turn_idx, tool, arguments, started_at, ended_at,
               epoch(ended_at) - epoch(started_at),
               CASE WHEN outcome = 'ok' THEN 'ok' ELSE 'error' END,
               coalesce(error, CASE WHEN http_status >= 400 THEN 'HTTP ' || http_status END,
                        CASE WHEN outcome <> 'ok' THEN 'status ' || status END),
               output_chars
        FROM _rl_calls""",
        # A rollout's grade: the first event that scored it (file order); without one, the last
        # failed attempt. Failed attempts before a score are kept in the grade's details.
        """CREATE OR REPLACE TEMP TABLE _rl_grade AS
        WITH g AS (SELECT *, """ + SCORED + """ AS scored FROM endpoint_events
                   WHERE kind = 'grade' AND rollout_id IN (SELECT rollout_id FROM _rl_affected)),
        failed AS (SELECT rollout_id, list({'ts': ts, 'http_status': http_status, 'error': error,
                                            'grades': grades::VARCHAR} ORDER BY source_id, line_no) AS attempts
                   FROM g WHERE NOT scored GROUP BY rollout_id),
        ranked AS (SELECT *, row_number() OVER (PARTITION BY rollout_id ORDER BY scored DESC,
                             CASE WHEN scored THEN source_id ELSE -source_id END,
                             CASE WHEN scored THEN line_no ELSE -line_no END) AS rn FROM g)
        SELECT k.*, CASE WHEN k.scored AND f.attempts IS NOT NULL THEN to_json({'failed_attempts': f.attempts}) END
                    AS retries
        FROM ranked k LEFT JOIN failed f USING (rollout_id) WHERE k.rn = 1""",
        # a grader that failed keeps a row: NULL score and the event's error
        """INSERT INTO grades
        SELECT g.rollout_id, k.key, try_cast(k.value AS DOUBLE), 1.0, NULL, g.retries,
               CASE WHEN try_cast(k.value AS DOUBLE) IS NULL THEN coalesce(g.error, 'HTTP ' || g.http_status, 'no score') END,
               g.grader_latency_s
        FROM _rl_grade g, json_each(g.grades) k WHERE g.grades IS NOT NULL
        UNION ALL
        SELECT rollout_id, 'grader', NULL, 1.0, NULL, NULL, coalesce(error, 'HTTP ' || http_status, 'no score'),
               grader_latency_s
        FROM _rl_grade WHERE grades IS NULL AND score IS NULL
        UNION ALL  -- a score alone: one grade row when its latency or its failed attempts are worth keeping
        SELECT rollout_id, 'grader', score, 1.0, NULL, retries, NULL, grader_latency_s
        FROM _rl_grade WHERE grades IS NULL AND score IS NOT NULL
          AND (grader_latency_s IS NOT NULL OR retries IS NOT NULL)""",
        """INSERT INTO rollouts
        WITH calls AS (
            SELECT rollout_id, count(*) AS n_calls, count(DISTINCT turn_idx) AS n_turns,
                   min(started_at) AS first_start, max(ended_at) AS last_end, min(source_id) AS source_id,
                   arg_min(line_no, (source_id, line_no)) AS line_no, any_value(sample_id) AS sample_id,
                   any_value(run) AS run, bool_or(outcome = 'infra_error') AS infra,
                   bool_or(outcome = 'model_error') AS model_err,
                   string_agg(CASE WHEN outcome <> 'ok' THEN tool || ': ' || coalesce(error, 'HTTP ' || http_status, status) END, '; ')
                       AS errors
            FROM _rl_calls GROUP BY rollout_id),
        run_spans AS (  -- when each run's graded rollouts ran: training steps follow one another
            SELECT g.run, min(coalesce(f.first_start, g.started_at, g.ts)) AS span_start, max(g.ts) AS span_end
            FROM endpoint_events g LEFT JOIN (SELECT rollout_id, min(started_at) AS first_start FROM endpoint_events
                                              WHERE kind = 'tool' GROUP BY rollout_id) f USING (rollout_id)
            WHERE g.kind = 'grade' AND g.run IS NOT NULL GROUP BY g.run),
        timed_run AS (  -- an ungraded rollout belongs to the run that was running when it started
            SELECT c.rollout_id, arg_max(s.run, s.span_start) AS run
            FROM calls c JOIN run_spans s ON c.first_start BETWEEN s.span_start AND s.span_end
            GROUP BY c.rollout_id),
        usual_run AS (  -- the run most graded rollouts of a file belong to
            SELECT source_id, mode(run) AS run FROM endpoint_events WHERE kind = 'grade' GROUP BY source_id),
        any_run AS (SELECT mode(run) AS run FROM endpoint_events WHERE kind = 'grade'),
        mean_grade AS (SELECT rollout_id, avg(score) AS score, bool_or(score IS NULL) AS grader_failed,
                              string_agg('grader ' || grader || ': ' || error, '; ') AS errors
                       FROM grades WHERE rollout_id IN (SELECT rollout_id FROM _rl_grade) GROUP BY rollout_id),
        ids AS (SELECT rollout_id FROM _rl_affected WHERE rollout_id IN (SELECT rollout_id FROM calls)
                                                      OR rollout_id IN (SELECT rollout_id FROM _rl_grade))
        SELECT i.rollout_id,
               coalesce($run, g.run, c.run, t.run, u.run, (SELECT run FROM any_run), 'unknown') AS run_id,
               coalesce(g.sample_id, c.sample_id) AS sample_id,
               NULL AS attempt,
               coalesce(g.started_at, c.first_start) AS started_at,
               -- a rollout ends once graded, after its last call and never before it started: a
               -- grader host whose clock is behind the tool endpoint's gave negative latencies
               greatest(coalesce(g.ts, c.last_end), c.last_end, coalesce(g.started_at, c.first_start)) AS ended_at,
               epoch(greatest(coalesce(g.ts, c.last_end), c.last_end, coalesce(g.started_at, c.first_start)))
                   - epoch(coalesce(g.started_at, c.first_start)) AS latency_s,
               CASE WHEN coalesce(c.infra, false) OR coalesce(m.grader_failed, false) THEN 'infra_error'
                    WHEN g.rollout_id IS NULL THEN 'ungraded'
                    WHEN coalesce(c.model_err, false) THEN 'model_error' ELSE 'ok' END AS status,
               CASE WHEN g.rollout_id IS NULL THEN 'unknown' ELSE 'stop' END AS stop_reason,
               g.final_answer, coalesce(g.score, m.score) AS score, coalesce(c.n_turns, 0), coalesce(c.n_calls, 0),
               NULL, NULL, NULL, NULL, nullif(concat_ws('; ', c.errors, m.errors), ''),
               coalesce(g.source_id, c.source_id), coalesce(g.line_no, c.line_no),
               CASE WHEN g.rollout_id IS NULL THEN 'no grade event' ELSE 'graded' END AS stop_reason_raw,
               NULL AS cached_input_tokens, NULL AS attempt_raw, NULL AS fingerprint
        FROM ids i LEFT JOIN _rl_grade g USING (rollout_id) LEFT JOIN calls c USING (rollout_id)
        LEFT JOIN mean_grade m USING (rollout_id) LEFT JOIN usual_run u ON u.source_id = c.source_id
        LEFT JOIN timed_run t USING (rollout_id)""",
    ]


def run_keys_sql() -> str:
    """The run key of every rollout just assembled: its label (in run_id until named), and the
    step and split of the grade event that scored it; an ungraded rollout takes those of its
    label when the label's grade events name one step and split."""
    return f"""
    INSERT INTO {identity.KEYS_IN} (label, step, split, source_id)
    SELECT label, step, split, min(source_id) FROM _rl_ep_keys GROUP BY ALL
    """


def endpoint_keys_sql() -> str:
    return """
    CREATE OR REPLACE TEMP TABLE _rl_ep_keys AS
    WITH spans AS (  -- when each (label, step, split)'s graded rollouts ran
        SELECT g.run, g.step, g.split, min(coalesce(f.first_start, g.started_at, g.ts)) AS span_start,
               max(g.ts) AS span_end
        FROM endpoint_events g LEFT JOIN (SELECT rollout_id, min(started_at) AS first_start FROM endpoint_events
                                          WHERE kind = 'tool' GROUP BY rollout_id) f USING (rollout_id)
        WHERE g.kind = 'grade' AND g.run IS NOT NULL GROUP BY ALL),
    single AS (SELECT run, any_value(step) AS step, any_value(split) AS split FROM spans GROUP BY run
               HAVING count(*) = 1),
    timed AS (  -- an ungraded rollout: the step its label was at when it started
        SELECT r.rollout_id, arg_max(s.step, s.span_start) AS step, arg_max(s.split, s.span_start) AS split
        FROM rollouts r JOIN spans s ON s.run = r.run_id AND r.started_at BETWEEN s.span_start AND s.span_end
        WHERE r.rollout_id IN (SELECT rollout_id FROM _rl_affected) GROUP BY r.rollout_id)
    SELECT r.rollout_id, r.run_id AS label, r.source_id,
           CASE WHEN g.rollout_id IS NOT NULL THEN g.step WHEN t.rollout_id IS NOT NULL THEN t.step ELSE o.step END
               AS step,
           CASE WHEN g.rollout_id IS NOT NULL THEN g.split WHEN t.rollout_id IS NOT NULL THEN t.split ELSE o.split END
               AS split
    FROM rollouts r LEFT JOIN _rl_grade g USING (rollout_id) LEFT JOIN timed t USING (rollout_id)
    LEFT JOIN single o ON o.run = r.run_id
    WHERE r.rollout_id IN (SELECT rollout_id FROM _rl_affected)
    """


def named_runs_sql() -> str:
    return f"""
    UPDATE rollouts SET run_id = m.run_id FROM _rl_ep_keys k JOIN {identity.RUN_MAP} m
        ON m.label = k.label AND m.evaluation IS NULL AND m.step IS NOT DISTINCT FROM k.step
       AND m.split IS NOT DISTINCT FROM k.split
    WHERE rollouts.rollout_id = k.rollout_id
    """


def attempts_sql() -> str:
    """The endpoint's rollouts of a (run, sample) in order of start, after the attempts other
    formats gave that run (the producer numbers none)."""
    return """UPDATE rollouts SET attempt = a.attempt FROM (
            WITH runs_touched AS (SELECT DISTINCT run_id FROM rollouts WHERE rollout_id IN (SELECT rollout_id FROM _rl_affected)),
            mine AS (SELECT r.* FROM rollouts r JOIN sources s USING (source_id)
                     WHERE s.format = 'rft-endpoint' AND r.run_id IN (SELECT run_id FROM runs_touched)),
            others AS (SELECT r.run_id, r.sample_id, max(r.attempt) + 1 AS base FROM rollouts r JOIN sources s USING (source_id)
                       WHERE s.format <> 'rft-endpoint' AND r.run_id IN (SELECT run_id FROM runs_touched)
                       GROUP BY r.run_id, r.sample_id)
            SELECT m.rollout_id, coalesce(o.base, 0) + row_number() OVER (
                       PARTITION BY m.run_id, m.sample_id ORDER BY m.started_at NULLS LAST, m.rollout_id) - 1 AS attempt
            FROM mine m LEFT JOIN others o ON o.run_id = m.run_id AND o.sample_id IS NOT DISTINCT FROM m.sample_id) a
        WHERE rollouts.rollout_id = a.rollout_id AND rollouts.rollout_id IN (SELECT rollout_id FROM _rl_affected)"""


def samples_sql() -> str:
    """The dataset's samples named by this file's sample events (once per sample and split)."""
    return """INSERT INTO samples
        SELECT sample_id, split, any_value(prompt), any_value(reference), NULL, $sid
        FROM _rl_ev e WHERE reason IS NULL AND kind = 'sample'
          AND NOT EXISTS (SELECT 1 FROM samples s WHERE s.sample_id = e.sample_id AND s.split IS NOT DISTINCT FROM e.split)
        GROUP BY sample_id, split"""


def sample_sources_sql() -> str:
    """This file provides the samples its sample events name (store.SAMPLE_SOURCES_DDL)."""
    return """INSERT INTO sample_sources
        SELECT DISTINCT sample_id, split, $sid FROM _rl_ev e WHERE reason IS NULL AND kind = 'sample'
          AND NOT EXISTS (SELECT 1 FROM sample_sources l WHERE l.sample_id = e.sample_id
                          AND l.split IS NOT DISTINCT FROM e.split AND l.source_id = $sid)"""


def load(ctx: LoadContext) -> LoadResult:
    con = ctx.con
    staged = stage_lines(con, ctx.source, ctx.line_offset)
    con.execute(events_sql(ctx.run is not None, staged))
    con.execute(grade_values_sql())
    p = {"sid": ctx.source_id}
    con.execute(f"CREATE OR REPLACE TEMP TABLE _rl_conflicts AS {conflicts_sql()} UNION ALL {clashes_sql()}", p)
    con.execute(f"""INSERT INTO {STAGED_REJECTS}
        SELECT e.line_no, l.line, coalesce(e.reason, c.reason)
        FROM _rl_ev e JOIN {LINES_TABLE} l USING (line_no) LEFT JOIN _rl_conflicts c USING (line_no)
        WHERE e.reason IS NOT NULL OR c.reason IS NOT NULL""")
    columns = ", ".join(f'"{f.name}"' for f in FIELDS if f.name != "event")
    con.execute(f"""INSERT INTO endpoint_events (source_id, line_no, kind, {columns})
        SELECT $sid, line_no, kind, {columns} FROM _rl_ev
        WHERE reason IS NULL AND line_no NOT IN (SELECT line_no FROM _rl_conflicts)""", {"sid": ctx.source_id})
    con.execute(samples_sql(), {"sid": ctx.source_id})
    con.execute(sample_sources_sql(), {"sid": ctx.source_id})
    # the rollouts these events touch are assembled once, after every file of the ingest call
    con.execute("CREATE TEMP TABLE IF NOT EXISTS _rl_touched (rollout_id VARCHAR)")
    con.execute("""INSERT INTO _rl_touched SELECT DISTINCT rollout_id FROM _rl_ev
                   WHERE reason IS NULL AND rollout_id IS NOT NULL
                     AND line_no NOT IN (SELECT line_no FROM _rl_conflicts)""")
    for table in ("_rl_ev", "_rl_conflicts"):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    n_rejected = con.execute(f"SELECT count(*) FROM {STAGED_REJECTS}").fetchall()[0][0]
    drop_lines(con)
    return LoadResult(n_records=staged.n_records, n_rejected=n_rejected)


def finish(con, run: str | None) -> None:
    """Assemble every rollout the call's files touched, from all of its events (whichever file
    or call brought them), once for the whole call."""
    con.execute("CREATE TEMP TABLE IF NOT EXISTS _rl_touched (rollout_id VARCHAR)")
    for sql in assemble_sql():
        run_sql(con, sql, {"run": run})
    # the runs they belong to: each (label, step, split) one run (ingest.identity)
    con.execute(endpoint_keys_sql())
    con.execute(identity.keys_table_sql())
    con.execute(run_keys_sql())
    identity.assign(con)
    con.execute(named_runs_sql())
    con.execute(attempts_sql())
    for table in ("_rl_touched", "_rl_affected", "_rl_calls", "_rl_grade", "_rl_ep_keys", identity.KEYS_IN,
                  identity.RUN_MAP):
        con.execute(f"DROP TABLE IF EXISTS {table}")


def appendable(path) -> bool:
    """Lines are independent records: a file that grew loads only its new lines."""
    return True

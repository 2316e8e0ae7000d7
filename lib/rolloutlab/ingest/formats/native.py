"""rolloutlab's own JSONL: one rollout per line (docs/formats.md, schemas/native-rollout.schema.json).

Everything runs in DuckDB, over a batch of lines of one file or of many (``ingest.batch``): each
line is parsed once into a STRUCT whose leaves are JSON text (text fields: their text); nested
arrays (tool calls, grades, messages) are unnested into typed rows with the first problem of each
item; every line gets the reason of its first problem, or none. These statements run where the
batch stages its lines (``STAGE``). The lines without a reason then get their rollout id, run and
attempt against what the store holds, and are inserted (``MAIN``: the ingest's transaction).
"""
from __future__ import annotations

import tempfile
from dataclasses import replace

from ... import config
from ...store import database as store
from .. import identity
from ..context import LoadContext, LoadResult
from ..filescan import line_chunks
from ..fields import Field, first_problem_sql, lit, required_checks, type_checks
from ..lines import TRUNCATED_REASON, gathered_rejects
from ...store.stop_reasons import stop_reason_sql

FORMAT = "native"
FILE_TYPES = (("jsonl", "native"),)  # what ingest reads of it (formats.file_types)
FORMAT_VERSION = 1
BATCHED = True  # a small file's lines load with other files' (ingest.batch)

# Top-level leaves (containers are below).
ROLLOUT_FIELDS = [
    Field("rollout_id", "string"),
    Field("run", "string"),
    Field("model", "string"),
    Field("checkpoint", "string"),
    Field("step", "integer", bits=32),
    Field("split", "string"),
    Field("sample_id", "string"),
    Field("attempt", "integer", bits=32, minimum=0),
    Field("started_at", "timestamp"),
    Field("ended_at", "timestamp"),
    Field("latency_s", "number", minimum=0),
    Field("status", "string", choices=store.STATUSES),
    Field("stop_reason", "string"),
    Field("final_answer", "text"),
    Field("score", "number"),
    Field("cost_usd", "number", minimum=0),
    Field("error", "text"),
    Field("prompt", "text"),
    Field("reference", "text"),
    Field("meta", "object"),
    # what the sample expects (samples.meta): expected_actions [{tool, arguments}], expected_outputs, assertions
    Field("sample_meta", "object"),
    # what identifies the experiment a converted file's run is (runs.meta), e.g. an Inspect eval's run_id
    Field("run_meta", "object"),
]
USAGE_FIELDS = [
    Field("input_tokens", "integer", minimum=0),
    Field("output_tokens", "integer", minimum=0),
    Field("reasoning_tokens", "integer", minimum=0),
    Field("cached_input_tokens", "integer", minimum=0),  # of input_tokens, read from a prompt cache
]
# the token counts may also stand at the top level, as the rollouts table names them: read and
# checked as in usage (never ignored as unknown fields)
ROLLOUT_FIELDS += USAGE_FIELDS
TOOL_CALL_FIELDS = [
    Field("call_id", "string"),
    Field("turn", "integer", bits=32, minimum=0),
    Field("tool", "string", required=True),
    Field("arguments", "json"),
    Field("started_at", "timestamp"),
    Field("ended_at", "timestamp"),
    Field("latency_s", "number", minimum=0),
    Field("status", "string"),
    Field("error", "text"),
    Field("output_chars", "integer", minimum=0),
]
# A grade whose score is null is a grader that failed (timeout, server error): it loads, with
# its error, and makes a rollout without a status an infra_error.
GRADE_FIELDS = [
    Field("grader", "string", required=True),
    Field("score", "number"),
    Field("weight", "number", minimum=0, maximum=1e6),
    Field("passed", "boolean"),
    Field("details", "json"),
    Field("error", "text"),
    Field("latency_s", "number", minimum=0),
]
MESSAGE_FIELDS = [
    Field("role", "string"),
    Field("content", "text"),
    Field("turn", "integer", bits=32, minimum=0),
    Field("ts", "timestamp"),
]
# name -> (JSON kind it must be, fields of its items); parsed as typed lists / a struct.
ARRAYS = {"tool_calls": TOOL_CALL_FIELDS, "grades": GRADE_FIELDS, "messages": MESSAGE_FIELDS}
OBJECTS = {"usage": USAGE_FIELDS}

# Statuses under which a rollout legitimately has no score.
SCORELESS_STATUSES = ("infra_error", "model_error", "ungraded")


def sniff(path, head: str, first_record: object) -> bool:
    """A native record names its sample and carries a run, a score or tool calls at top level."""
    return (isinstance(first_record, dict) and "sample_id" in first_record and "trace" not in first_record
            and any(k in first_record for k in ("run", "score", "tool_calls", "rollout_id")))


# Fields a chat transcript ({messages, score}) has too; any other native field means the record
# is native, and reading it as a chat would drop that field.
CHAT_SHARED = {"messages", "score", "sample_id", "run", "attempt", "rollout_id", "status"}
NATIVE_MESSAGE_KEYS = {f.name for f in MESSAGE_FIELDS} - {"role", "content"}
CHAT_MESSAGE_KEYS = {"tool_calls", "tool_call_id", "name", "function_call"}


def prefers(record: object) -> bool:
    """True when openai-chat would claim ``record`` but only native keeps all of it. A record whose
    messages carry tool calls is a chat transcript (native records keep their calls at top level;
    the chat reader keeps the native fields it finds too). Otherwise a record that names its
    sample and carries native fields (grades, usage, latency, ...), native message fields (turn,
    ts), or names its run (then native keeps its plain messages as they are) is native."""
    if not isinstance(record, dict) or "sample_id" not in record or "trace" in record:
        return False
    messages = record.get("messages") if isinstance(record.get("messages"), list) else []
    keys = set().union(*(m for m in messages if isinstance(m, dict))) if messages else set()
    if keys & CHAT_MESSAGE_KEYS or any(isinstance(m, dict) and m.get("role") == "tool" for m in messages):
        return False
    fields = {f.name for f in ROLLOUT_FIELDS} | set(ARRAYS) | set(OBJECTS)
    return bool((set(record) & fields) - CHAT_SHARED) or bool(keys & NATIVE_MESSAGE_KEYS) or "run" in record


def leaf_type(f: Field) -> str:
    """How the parse keeps a leaf: as JSON text (its kind is seen from its first character), or,
    for a field any value suits (``text``), as the text it loads as (a string's characters, any
    other value's JSON): nothing to check, and a long message is never quoted and unquoted again."""
    return "VARCHAR" if f.kind == "text" else "JSON"


def leaf_value_sql(f: Field, ref: str) -> str:
    """The typed value of a parsed leaf."""
    return ref if leaf_type(f) == "VARCHAR" else f.value_sql(ref)


def struct_of(fields: list[Field]) -> str:
    return "{" + ", ".join(f'"{f.name}": "{leaf_type(f)}"' for f in fields) + "}"


def top_structure() -> str:
    """Every leaf, the arrays as lists of structs of leaves: one parse of the line gives the
    rollout and its tool calls, grades and messages (parsing a line again per array cost about as
    much as the first parse, and it is the largest cost of a load)."""
    parts = [f'"{f.name}": "{leaf_type(f)}"' for f in ROLLOUT_FIELDS]
    parts += [f'"{name}": {struct_of(fields)}' for name, fields in OBJECTS.items()]
    parts += [f'"{name}": [{struct_of(fields)}]' for name, fields in ARRAYS.items()]
    return "{" + ", ".join(parts) + "}"


# --- STAGE: where the batch's lines are (ingest.batch) ---------------------------------------------

PARSED = "_rl_parsed"  # (pos, seg, line_no, blank, is_object, r, container_problem, line_md5, bad_line)
SEGS = "_rl_segs"  # (seg, source_id, run, step, split, scope, cut_line): each file of the batch, with --run ...
# A line's place in its batch: its file (segment) and line number in one sortable number.
POSITION = "(seg::BIGINT << 40) + line_no"


def parse_sql(lines: str, create: bool) -> str:
    """Lines ``(seg, line_no, line)`` parsed once: whether each is blank, an object, its
    structure, a container of the wrong kind (which parses to NULL: looked at closer only where
    its key appears in the text), the hash of its text, and the text itself where it does not
    parse (its reject's raw)."""
    head = f"CREATE OR REPLACE TEMP TABLE {PARSED} AS" if create else f"INSERT INTO {PARSED}"
    blank = "(line IS NULL OR (strlen(line) <= 64 AND trim(line) = ''))"  # cheap on long lines
    return f"""{head}
    SELECT {POSITION} AS pos, seg, line_no, blank, is_object, r,
           CASE WHEN r IS NOT NULL THEN {_container_problem_sql()} END AS container_problem,
           CASE WHEN NOT blank THEN md5(line) END AS line_md5, CASE WHEN r IS NULL THEN line END AS bad_line
    FROM (SELECT seg, line_no, line, {blank} AS blank, left(ltrim(left(line, 256)), 1) = '{{' AS is_object,
                 CASE WHEN NOT {blank} THEN try(from_json(line, {lit(top_structure())})) END AS r
          FROM ({lines}))
    """


def _container_problem_sql() -> str:
    """A container of the wrong kind parses to NULL; look closer only where its key appears."""
    checks = []
    for name, kind, want in ([(n, "ARRAY", "a JSON array") for n in ARRAYS]
                             + [(n, "OBJECT", "a JSON object") for n in OBJECTS]):
        path = lit(f"$.{name}")
        checks.append((
            f"r.\"{name}\" IS NULL AND contains(line, {lit(chr(34) + name + chr(34))}) "
            f"AND json_type(line, {path}) NOT IN ('{kind}', 'NULL')",
            f"'field ''{name}'' must be {want}, got ' || lower(json_type(line, {path})) || ' ' "
            f"|| left(json_extract(line, {path})::VARCHAR, 60)"))
    return first_problem_sql(checks)


def items_sql(name: str, typed: dict[str, str]) -> str:
    """One array of every line (parsed with the line, parse_sql) as typed rows with the first problem of each item."""
    fields = ARRAYS[name]
    where = f"'{name}[' || (idx - 1) || '].'"
    checks = required_checks(fields, "it", where) + type_checks(fields, "it", where)
    if "started_at" in typed and "ended_at" in typed:  # a negative duration is a broken clock
        checks.append((f"{typed['ended_at']} < {typed['started_at']}",
                       f"'field ''' || {where} || 'ended_at'' precedes its ''started_at'': the clock is wrong'"))
    values = ", ".join(f"{expr} AS \"{col}\"" for col, expr in typed.items())
    return f"""
    CREATE OR REPLACE TEMP TABLE _rl_{name} AS
    SELECT pos, (idx - 1)::INTEGER AS idx, {values}, {first_problem_sql(checks)} AS problem
    FROM (SELECT pos, unnest(r."{name}") AS it, generate_subscripts(r."{name}", 1) AS idx
          FROM {PARSED} WHERE len(r."{name}") > 0)
    """


def _typed(fields: list[Field], prefix: str = "it") -> dict[str, str]:
    return {f.name: leaf_value_sql(f, f'{prefix}."{f.name}"') for f in fields}


def tool_call_values() -> dict[str, str]:
    v = _typed(TOOL_CALL_FIELDS)
    v["latency_s"] = f"coalesce({v['latency_s']}, epoch({v['ended_at']}) - epoch({v['started_at']}))"
    v["status"] = f"coalesce({v['status']}, CASE WHEN it.error IS NULL THEN 'ok' ELSE 'error' END)"
    return v


def grade_values() -> dict[str, str]:
    v = _typed(GRADE_FIELDS)
    v["weight"] = f"coalesce({v['weight']}, 1.0)"
    return v


def rows_sql() -> str:
    """One row per record: typed top-level values and its reject reason (NULL when it loads). What
    the user gave with the file (--run, --step, --split: ``s``) overrides the record's own."""
    checks = type_checks(ROLLOUT_FIELDS, "r") + type_checks(USAGE_FIELDS, "r.usage", "'usage.'")
    checks.append(("s.run IS NULL AND r.run IS NULL", "'missing required field ''run'' (or pass --run LABEL)'"))
    checks.append(("r.sample_id IS NULL", "'missing required field ''sample_id'''"))
    v = _typed(ROLLOUT_FIELDS, "r")
    checks.append((f"{v['ended_at']} < {v['started_at']}",
                   "'field ''ended_at'' precedes ''started_at'': the rollout''s clock is wrong'"))
    scoreless = ", ".join(lit(s) for s in SCORELESS_STATUSES)
    checks.append((
        f"r.score IS NULL AND r.grades IS NULL AND coalesce(r.status->>'$', 'ok') NOT IN ({scoreless})",
        "'missing required field ''score'' (required unless status is infra_error, model_error or "
        "ungraded)'"))
    for f in USAGE_FIELDS:
        usage_leaf, top_leaf = f'r.usage."{f.name}"', f'r."{f.name}"'
        checks.append((f"{usage_leaf} IS NOT NULL AND {top_leaf} IS NOT NULL AND "
                       f"{f.value_sql(usage_leaf)} IS DISTINCT FROM {f.value_sql(top_leaf)}",
                       f"'field ''{f.name}'' and ''usage.{f.name}'' differ: give the count once'"))
    usage = {name: f"coalesce({value}, {v[name]})" for name, value in _typed(USAGE_FIELDS, "r.usage").items()}
    return f"""
    CREATE OR REPLACE TEMP TABLE _rl_rows AS
    SELECT pos, seg, line_no,
        CASE
        WHEN r IS NULL AND line_no = s.cut_line THEN {TRUNCATED_REASON}
        WHEN r IS NULL THEN 'invalid JSON: fix the line or remove it'
        WHEN NOT is_object THEN 'not a JSON object: each line must be one rollout object'
        ELSE coalesce(container_problem, {first_problem_sql(checks)})
        END AS reason,
        {v['rollout_id']} AS id_given,
        -- what the rollout holds, in the run it ends up in (the record's, or --run, --step, --split)
        md5(concat_ws(chr(31), coalesce(s.run, {v['run']}, ''), coalesce(coalesce(s.step, {v['step']})::VARCHAR, ''),
                      coalesce(s.split, {v['split']}, ''), line_md5)) AS fingerprint,
        coalesce(s.run, {v['run']}) AS label,
        CASE WHEN s.run IS NULL THEN {v['run_meta']}->>'evaluation' END AS evaluation,
        CASE WHEN s.run IS NULL THEN {v['run_meta']}->>'tag' END AS tag,
        {v['model']} AS model, {v['checkpoint']} AS checkpoint,
        coalesce(s.step, {v['step']}) AS step, coalesce(s.split, {v['split']}) AS split,
        {v['sample_id']} AS sample_id, {v['attempt']} AS attempt_given,
        {v['started_at']} AS started_at, {v['ended_at']} AS ended_at,
        coalesce({v['latency_s']}, epoch({v['ended_at']}) - epoch({v['started_at']})) AS latency_s,
        {v['status']} AS status_given, {stop_reason_sql(v['stop_reason'])} AS stop_reason,
        {v['stop_reason']} AS stop_reason_raw,
        {v['final_answer']} AS final_answer, {v['score']} AS score_given,
        {usage['input_tokens']} AS input_tokens, {usage['output_tokens']} AS output_tokens,
        {usage['reasoning_tokens']} AS reasoning_tokens, {usage['cached_input_tokens']} AS cached_input_tokens,
        {v['cost_usd']} AS cost_usd, {v['error']} AS error,
        {v['prompt']} AS prompt, {v['reference']} AS reference, {v['sample_meta']} AS sample_meta,
        {v['run_meta']} AS run_meta
    FROM {PARSED} JOIN {SEGS} s USING (seg)
    WHERE NOT blank
    """


def rejected_lines_sql() -> str:
    """Lines that do not load, by what they hold: their own problem, else the first problem of
    their items (arrays in field order)."""
    item_problems = " UNION ALL ".join(
        f"SELECT pos, {i} AS arr, idx, problem FROM _rl_{name} WHERE problem IS NOT NULL"
        for i, name in enumerate(ARRAYS))
    return f"""
    CREATE OR REPLACE TEMP TABLE _rl_rejected AS
    WITH item_problem AS (
        SELECT pos, arg_min(problem, (arr, idx)) AS problem FROM ({item_problems}) GROUP BY pos)
    SELECT w.pos, w.seg, w.line_no, coalesce(w.reason, p.problem) AS reason
    FROM _rl_rows w LEFT JOIN item_problem p USING (pos)
    WHERE coalesce(w.reason, p.problem) IS NOT NULL
    """


LIVE_COLUMNS = ("pos, seg, line_no, id_given, fingerprint, label, evaluation, tag, model, checkpoint, run_meta, "
                "step, split, sample_id, attempt_given")


def live_sql() -> str:
    """What the ingest needs of each line that passed its checks to give it an id, a run and an
    attempt (a few small columns: the lines' values stay where they were parsed)."""
    return f"SELECT {LIVE_COLUMNS} FROM _rl_rows WHERE pos NOT IN (SELECT pos FROM _rl_rejected)"


def rollout_values_sql() -> str:
    """The typed values of every rollout that passed its checks (joined in MAIN with its id)."""
    return """
    WITH calls AS (
        SELECT pos, count(*) AS n_calls, count(DISTINCT coalesce(turn, idx)) AS n_turns
        FROM _rl_tool_calls GROUP BY pos),
    graded AS (
        SELECT pos, sum(score * weight) / nullif(sum(weight) FILTER (WHERE score IS NOT NULL), 0) AS weighted,
               bool_or(score IS NULL) AS grader_failed
        FROM _rl_grades GROUP BY pos)
    SELECT w.pos, w.started_at, w.ended_at, w.latency_s,
        coalesce(w.status_given, CASE WHEN g.grader_failed THEN 'infra_error' ELSE 'ok' END) AS status,
        w.stop_reason, w.final_answer, coalesce(w.score_given, g.weighted) AS score,
        coalesce(c.n_turns, 0) AS n_turns, coalesce(c.n_calls, 0) AS n_calls,
        w.input_tokens, w.output_tokens, w.reasoning_tokens, w.cost_usd, w.error, w.stop_reason_raw,
        w.cached_input_tokens
    FROM _rl_rows w LEFT JOIN calls c USING (pos) LEFT JOIN graded g USING (pos)
    WHERE w.reason IS NULL
    """


def sample_text_sql() -> str:
    return ("SELECT pos, prompt, reference, sample_meta FROM _rl_rows WHERE reason IS NULL "
            "AND (prompt IS NOT NULL OR reference IS NOT NULL OR sample_meta IS NOT NULL)")


def item_values_sql(name: str) -> str:
    return f"SELECT * EXCLUDE (problem) FROM _rl_{name}"


STAGE_TABLES = (PARSED, "_rl_rows", "_rl_tool_calls", "_rl_grades", "_rl_messages", "_rl_rejected")


def stage_sql() -> list[str]:
    """Statements that check every line staged in _rl_parsed."""
    return [rows_sql(), items_sql("tool_calls", tool_call_values()), items_sql("grades", grade_values()),
            items_sql("messages", _typed(MESSAGE_FIELDS)), rejected_lines_sql()]


# --- MAIN: the ingest's transaction, with the store -------------------------------------------------
# _rl_live (LIVE_COLUMNS) holds the lines that passed their checks; _rl_segs maps their seg to a source.

def clashes_sql() -> str:
    """Lines whose rollout id endpoint events already use (events never merge with a rollout of
    another format): rejects."""
    return """
    CREATE OR REPLACE TEMP TABLE _rl_clashes AS
    SELECT w.pos, 'rollout_id ''' || w.id_given || ''' is already logged as endpoint events in ' || s.path
           || ' line ' || ev.first_event || ': a rollout loads from one format (give this file''s rollouts ids '
           || 'of their own, or leave rollout_id out)' AS reason
    FROM _rl_live w
    JOIN (SELECT rollout_id, min(source_id) AS source_id, arg_min(line_no, (source_id, line_no)) AS first_event
          FROM endpoint_events WHERE rollout_id IN (SELECT id_given FROM _rl_live) GROUP BY rollout_id) ev
         ON ev.rollout_id = w.id_given
    JOIN sources s ON s.source_id = ev.source_id
    """


# A producer's id that looks globally unique (a UUID; a long token of letters and digits, as
# Inspect's sample uuids are): seen again with other content, it is the same rollout rescored.
UNIQUE_ID = ("(regexp_matches({x}, '^[0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}$', 'i') "
             "OR (length({x}) >= 20 AND regexp_matches({x}, '^[A-Za-z0-9_-]+$') AND regexp_matches({x}, '[0-9]') "
             "AND regexp_matches({x}, '[A-Za-z]')))")


def ids_sql() -> str:
    """Every line that loads gets its rollout id. Without a producer's id: ``rl-`` and 20 hex of
    what it holds, scoped by its evaluation where the record names one, else by its file's name
    (the segment's ``scope``): the same rollout gets the same id from a twin or a copy of its file,
    and identical records of two files that name no evaluation (a deterministic agent run twice)
    stay two. Identical lines of one file are different rollouts: the k-th copy gets ``.k``,
    counted across the file's earlier chunks and batches and the lines loaded before it grew. A
    producer's id is kept — unless it is not globally unique (``UNIQUE_ID``) and already holds
    other content (in the store, or on an earlier line of the batch): ids a producer reuses across
    steps, runs or files never merge two rollouts; the later one is ``<id>~<8 hex of what it
    holds>``."""
    unique = UNIQUE_ID.format(x="l.id_given")
    return f"""
    CREATE OR REPLACE TEMP TABLE _rl_ids AS
    WITH live AS (SELECT w.pos, w.seg, w.line_no, s.source_id, s.scope, w.id_given, w.fingerprint,
                         w.evaluation IS NOT NULL AS scoped
                  FROM _rl_live w JOIN {SEGS} s USING (seg) WHERE w.pos NOT IN (SELECT pos FROM _rl_clashes)),
    earlier AS (
        SELECT source_id, fingerprint, count(*) AS n FROM (
            SELECT source_id, fingerprint FROM rollouts WHERE source_id IN (SELECT source_id FROM {SEGS})
            UNION ALL SELECT source_id, fingerprint FROM duplicates WHERE source_id IN (SELECT source_id FROM {SEGS}))
        WHERE fingerprint IN (SELECT fingerprint FROM live) GROUP BY ALL),
    nth AS (SELECT l.*, coalesce(e.n, 0)
                        + row_number() OVER (PARTITION BY l.source_id, l.fingerprint ORDER BY l.pos) - 1 AS k,
                   first_value(l.fingerprint) OVER (PARTITION BY l.id_given ORDER BY l.pos) AS first_with_id
            FROM live l LEFT JOIN earlier e USING (source_id, fingerprint)),
    reused AS (  -- a producer's id that is not unique, already holding other content
        SELECT l.pos, NOT {unique} AND (o.fingerprint IS DISTINCT FROM l.fingerprint AND o.rollout_id IS NOT NULL
                                        OR l.first_with_id <> l.fingerprint) AS reused
        FROM nth l LEFT JOIN rollouts o ON o.rollout_id = l.id_given WHERE l.id_given IS NOT NULL)
    SELECT n.pos, n.seg, n.line_no, n.fingerprint,
           CASE WHEN n.id_given IS NULL
                THEN 'rl-' || left(md5(CASE WHEN n.scoped THEN '' ELSE n.scope END || chr(31) || n.fingerprint), 20)
                     || CASE WHEN n.k > 0 THEN '.' || n.k ELSE '' END
                WHEN coalesce(u.reused, false) THEN n.id_given || '~' || left(n.fingerprint, 8)
                ELSE n.id_given END AS rollout_id
    FROM nth n LEFT JOIN reused u USING (pos)
    """


def duplicates_sql() -> str:
    """Lines that are rollouts already loaded — from another file, a twin of this one, or an
    earlier line (of this file or of a file before it in the batch) with the same id — and
    whether they hold the same as the rollout loaded first (a unique id seen again with other
    content is a rescored copy: the rollout loaded first is kept)."""
    return """
    CREATE OR REPLACE TEMP TABLE _rl_dupes AS
    SELECT i.pos, i.seg, i.line_no, i.rollout_id, i.fingerprint,
           coalesce(o.fingerprint, i.first_fingerprint) = i.fingerprint AS same_content
    FROM (SELECT *, first_value(pos) OVER w AS first_pos, first_value(fingerprint) OVER w AS first_fingerprint
          FROM _rl_ids WINDOW w AS (PARTITION BY rollout_id ORDER BY pos)) i
    LEFT JOIN rollouts o USING (rollout_id)
    WHERE o.rollout_id IS NOT NULL OR i.first_pos < i.pos
    """


def keys_sql() -> str:
    """The run keys of the lines that load (``ingest.identity`` names their runs)."""
    return f"""
    INSERT INTO {identity.KEYS_IN}
    SELECT w.label, w.evaluation, w.step, w.split, any_value(w.tag), any_value(w.model), any_value(w.checkpoint),
           any_value(w.run_meta), min(s.source_id)
    FROM _rl_live w JOIN {SEGS} s USING (seg)
    WHERE w.pos IN (SELECT pos FROM _rl_ids) AND w.pos NOT IN (SELECT pos FROM _rl_dupes)
    GROUP BY w.label, w.evaluation, w.step, w.split
    """


def ok_sql() -> str:
    """The lines that load, with their rollout id and run."""
    return f"""
    CREATE OR REPLACE TEMP TABLE _rl_ok AS
    SELECT w.pos, w.seg, w.line_no, w.sample_id, w.split, w.attempt_given, i.fingerprint, i.rollout_id, m.run_id
    FROM _rl_live w JOIN _rl_ids i USING (pos)
    JOIN {identity.RUN_MAP} m ON m.label = w.label AND m.evaluation IS NOT DISTINCT FROM w.evaluation
         AND m.step IS NOT DISTINCT FROM w.step AND m.split IS NOT DISTINCT FROM w.split
    WHERE w.pos NOT IN (SELECT pos FROM _rl_dupes)
    """


def spanning_sql() -> str:
    """(run, sample) groups that lines of several files of the batch hold: numbered one file at a
    time, as if the files had been loaded one after the other."""
    return """CREATE OR REPLACE TEMP TABLE _rl_spanning AS
        SELECT run_id, sample_id FROM _rl_ok WHERE sample_id IS NOT NULL
        GROUP BY run_id, sample_id HAVING count(DISTINCT seg) > 1"""


def attempts_sql(rows: str) -> str:
    """The attempt of every rollout of ``rows`` (a selection of _rl_ok). A producer's number is
    kept unless the run holds it already for that sample (from another file, an earlier line, an
    earlier chunk or batch, or rows numbered before in this batch): then — and for lines that give
    none — the rollout takes the next free attempts of its (run, sample), in line order. Two
    different rollouts are never one because their numbers collide; the producer's number stays in
    ``attempt_raw``."""
    same = "o.run_id = l.run_id AND o.sample_id = l.sample_id AND o.attempt = l.attempt_given"
    return f"""
    INSERT INTO _rl_attempts
    WITH mine AS (SELECT * FROM _rl_ok WHERE {rows}),
    taken AS (
        SELECT run_id, sample_id, attempt FROM rollouts
        WHERE run_id IN (SELECT DISTINCT run_id FROM mine) AND sample_id IS NOT NULL
        UNION ALL
        SELECT o.run_id, o.sample_id, a.attempt FROM _rl_attempts a JOIN _rl_ok o USING (pos)
        WHERE a.reason IS NULL AND o.run_id IN (SELECT DISTINCT run_id FROM mine)),
    given AS (
        SELECT l.pos, l.run_id, l.sample_id, l.attempt_given,
               coalesce(l.attempt_given IS NOT NULL AND NOT EXISTS (SELECT 1 FROM taken o WHERE {same})
                        AND row_number() OVER (PARTITION BY l.run_id, l.sample_id, l.attempt_given
                                               ORDER BY l.pos) = 1, false) AS keeps
        FROM mine l),
    top AS (
        SELECT run_id, sample_id, max(a) + 1 AS base FROM (
            SELECT run_id, sample_id, attempt AS a FROM taken
            UNION ALL SELECT run_id, sample_id, attempt_given FROM given WHERE keeps)
        GROUP BY run_id, sample_id),
    numbered AS (
        SELECT g.pos, g.attempt_given::HUGEINT AS attempt FROM given g WHERE keeps
        UNION ALL
        SELECT g.pos, coalesce(t.base, 0)::HUGEINT
               + row_number() OVER (PARTITION BY g.run_id, g.sample_id ORDER BY g.pos) - 1
        FROM given g LEFT JOIN top t USING (run_id, sample_id) WHERE NOT keeps)
    SELECT n.pos, least(n.attempt, 2147483647)::INTEGER AS attempt,
        CASE WHEN n.attempt > 2147483647
             THEN 'attempt ' || n.attempt || ' of sample ''' || l.sample_id || ''' (numbered after the run''s '
                  || 'attempts) is too large for its column: give the line its attempt' END AS reason
    FROM numbered n JOIN mine l USING (pos)
    """


def assign_attempts(con) -> None:
    """_rl_attempts for every line of _rl_ok: in one statement, unless a (run, sample) is held by
    lines of several files of the batch — those are numbered file by file, in the batch's order,
    so the numbers are those the files would get loaded one at a time."""
    con.execute("CREATE OR REPLACE TEMP TABLE _rl_attempts (pos BIGINT, attempt INTEGER, reason VARCHAR)")
    con.execute(spanning_sql())
    segs = [r[0] for r in con.execute(
        "SELECT DISTINCT seg FROM _rl_ok JOIN _rl_spanning USING (run_id, sample_id) ORDER BY seg").fetchall()]
    spanning = "(run_id, sample_id) IN (SELECT (run_id, sample_id) FROM _rl_spanning)"
    con.execute(attempts_sql(f"NOT coalesce({spanning}, false)" if segs else "true"))
    for seg in segs:
        con.execute(attempts_sql(f"seg = {int(seg)} AND {spanning}"))
    con.execute("DROP TABLE _rl_spanning")


ROLLOUT_COLUMNS = ("rollout_id, run_id, sample_id, attempt, started_at, ended_at, latency_s, status, stop_reason, "
                   "final_answer, score, n_turns, n_tool_calls, input_tokens, output_tokens, reasoning_tokens, cost_usd, "
                   "error, source_id, source_line, stop_reason_raw, cached_input_tokens, attempt_raw, fingerprint")


def final_sql() -> str:
    """The lines that load, with everything the inserts need of the store's side."""
    return f"""
    CREATE OR REPLACE TEMP TABLE _rl_final AS
    SELECT o.*, a.attempt, s.source_id FROM _rl_ok o JOIN _rl_attempts a USING (pos) JOIN {SEGS} s USING (seg)
    WHERE a.reason IS NULL
    """


SOURCE = "$SOURCE"  # where an insert reads its values from the staging side


def insert_sql() -> list[tuple[str, str | None]]:
    """Statements filling the canonical tables from the lines that load, each with the query of
    the staging side it reads (where SOURCE stands), if any."""
    return [
        (f"""INSERT INTO rollouts ({ROLLOUT_COLUMNS})
        SELECT f.rollout_id, f.run_id, f.sample_id, f.attempt, v.started_at, v.ended_at, v.latency_s, v.status,
            v.stop_reason, v.final_answer, v.score, v.n_turns, v.n_calls, v.input_tokens, v.output_tokens,
            v.reasoning_tokens, v.cost_usd, v.error, f.source_id, f.line_no, v.stop_reason_raw,
            v.cached_input_tokens, f.attempt_given, f.fingerprint
        FROM {SOURCE} v JOIN _rl_final f USING (pos)""", rollout_values_sql()),
        (f"""INSERT INTO tool_calls
        SELECT f.rollout_id, t.idx, coalesce(t.turn, t.idx), t.tool, t.arguments, t.started_at, t.ended_at,
               t.latency_s, t.status, t.error, t.output_chars
        FROM {SOURCE} t JOIN _rl_final f USING (pos)""", item_values_sql("tool_calls")),
        (f"""INSERT INTO grades
        SELECT f.rollout_id, t.grader, t.score, t.weight, t.passed, t.details, t.error, t.latency_s
        FROM {SOURCE} t JOIN _rl_final f USING (pos)""", item_values_sql("grades")),
        (f"""INSERT INTO messages
        SELECT f.rollout_id, t.idx, t.role, t.content, t.turn, t.ts
        FROM {SOURCE} t JOIN _rl_final f USING (pos)""", item_values_sql("messages")),
        # a sample is the first file's that names it (its prompt: the first given)
        (f"""INSERT INTO samples
        SELECT f.sample_id, f.split, arg_min(v.prompt, f.pos) FILTER (WHERE v.prompt IS NOT NULL),
               arg_min(v.reference, f.pos) FILTER (WHERE v.reference IS NOT NULL),
               arg_min(v.sample_meta, f.pos) FILTER (WHERE v.sample_meta IS NOT NULL), min(f.source_id)
        FROM _rl_final f LEFT JOIN {SOURCE} v USING (pos)
        WHERE NOT EXISTS (SELECT 1 FROM samples s WHERE s.sample_id = f.sample_id
                                                 AND s.split IS NOT DISTINCT FROM f.split)
        GROUP BY f.sample_id, f.split""", sample_text_sql()),
        # every file that names a sample provides it, not only the first (store.SAMPLE_SOURCES_DDL)
        ("""INSERT INTO sample_sources
        SELECT DISTINCT sample_id, split, source_id FROM _rl_final f
        WHERE NOT EXISTS (SELECT 1 FROM sample_sources l WHERE l.sample_id = f.sample_id
                          AND l.split IS NOT DISTINCT FROM f.split AND l.source_id = f.source_id)""", None),
        (f"""INSERT INTO duplicates SELECT s.source_id, d.line_no, d.rollout_id, d.fingerprint, d.same_content
            FROM _rl_dupes d JOIN {SEGS} s USING (seg)""", None),
    ]


MAIN_TABLES = ("_rl_live", "_rl_clashes", "_rl_ids", "_rl_dupes", "_rl_ok", "_rl_attempts", "_rl_final",
               identity.KEYS_IN, identity.RUN_MAP)


def settle_sql(con) -> None:
    """Give the checked lines (_rl_live) ids, runs and attempts: _rl_final holds those that load,
    _rl_dupes those that repeat a rollout, _rl_clashes and _rl_attempts' reasons those that do not."""
    con.execute(clashes_sql())
    con.execute(ids_sql())
    con.execute(duplicates_sql())
    con.execute(identity.keys_table_sql())
    con.execute(keys_sql())
    identity.assign(con)
    con.execute(ok_sql())
    assign_attempts(con)
    con.execute(final_sql())


def load(ctx: LoadContext) -> LoadResult:
    """Lines of a native file (or records a format converted: ``ctx.converted``) into a batch:
    the ingest's shared one (``ctx.batch``), loaded with other files' lines when it is full or the
    call ends; or one of their own, loaded now. A file larger than ``config.NATIVE_CHUNK_BYTES``
    loads a chunk of lines at a time (line numbers, ids, attempts and duplicates continue across
    chunks), all in the caller's transaction, each chunk parsed and checked apart from it (what a
    transaction creates it keeps until the commit): memory stays that of a chunk however large
    the file."""
    from ..batch import Batch

    if ctx.batch is not None:
        if ctx.converted is not None:
            ctx.batch.add_converted(ctx.target, ctx)
        else:
            ctx.batch.add_file(ctx.target, ctx)
        return LoadResult(0, 0)  # counted when the batch loads (ctx.target)
    if ctx.converted is not None:
        return Batch.alone(ctx).add_converted(None, ctx).finish()
    size = ctx.source.stat().st_size
    if size <= config.NATIVE_CHUNK_BYTES:
        return _alone(ctx, apart=False, large=size > config.BATCH_FILE_MAX_BYTES)
    total = LoadResult(0, 0)
    offset = ctx.line_offset
    with tempfile.TemporaryDirectory(prefix="rolloutlab-") as tmp, gathered_rejects(ctx.con) as keep:
        for chunk, newlines in line_chunks(ctx.source, tmp, config.NATIVE_CHUNK_BYTES):
            result = _alone(replace(ctx, read_path=chunk, line_offset=offset), apart=True, large=True)
            keep()
            add_result(total, result)
            offset += newlines
    return total


def _alone(ctx: LoadContext, apart: bool, large: bool) -> LoadResult:
    """A file (or a chunk of one) loaded by itself; a large one under config.STAGING_MEMORY_LIMIT
    (ingest.batch: what the transaction stages spills past it, instead of growing with the file)."""
    from ..batch import Batch

    batch = Batch.alone(ctx, apart=apart)
    if large:
        batch.staging_memory_limit = config.STAGING_MEMORY_LIMIT
    return batch.add_file(None, ctx).finish()


def add_result(total: LoadResult, part: LoadResult) -> None:
    total.n_records += part.n_records
    total.n_rejected += part.n_rejected
    total.n_duplicates += part.n_duplicates
    total.notes += part.notes


def appendable(path) -> bool:
    """Lines are independent records: a file that grew loads only its new lines."""
    return True

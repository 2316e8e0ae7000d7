"""The trajectory explorer: filter rollouts, page through them in DuckDB, open one trajectory.

The logic (filters -> parameterized SQL, one page at a time; HTML rendering with every log
string escaped) is plain functions, tested without a browser; ``explore()`` wires them to
ipywidgets. Nothing loads more than a page of rollouts into the widget.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, replace

import duckdb
import pandas as pd

from ..text import fmt
from ..analysis.labelling import LabelError, label as store_label, labels as stored_labels
from ..text.htmltext import esc, missing as _missing
from ..analysis.metrics.common import resolve_runs, sample_texts_sql

PAGE_SIZE = 20
SORTABLE = {"score": "score", "tool calls": "n_tool_calls", "latency": "latency_s", "sample": "sample_id",
            "attempt": "attempt", "run": "run_id", "suspicion": None}  # suspicion: the order of Filters.ranked
STATUSES = ("ok", "model_error", "infra_error", "truncated", "ungraded")


@dataclass(frozen=True)
class Filters:
    runs: tuple[str, ...] = ()
    score_min: float | None = None
    score_max: float | None = None
    statuses: tuple[str, ...] = ()
    calls_min: int | None = None
    calls_max: int | None = None
    search: str = ""  # matched against sample id, rollout id and final answer (case-insensitive)
    only: tuple[str, ...] | None = None  # only these rollouts (e.g. the audit's suspects); None: no limit
    samples: tuple[str, ...] | None = None  # only these samples (exact ids); None: no limit
    sort: str = "score"
    descending: bool = False
    ranked: tuple[str, ...] = ()  # rollout ids, most suspect first: the order of sort="suspicion"
    page: int = 0
    page_size: int = PAGE_SIZE


def _where() -> str:
    return """
    list_contains($runs, run_id)
    AND ($score_min IS NULL OR score >= $score_min) AND ($score_max IS NULL OR score <= $score_max)
    AND (len($statuses) = 0 OR list_contains($statuses, status))
    AND ($calls_min IS NULL OR n_tool_calls >= $calls_min) AND ($calls_max IS NULL OR n_tool_calls <= $calls_max)
    AND (NOT $limit_ids OR list_contains($only, rollout_id))
    AND (NOT $limit_samples OR list_contains($samples, sample_id))
    AND ($search = '' OR contains(lower(sample_id), lower($search)) OR contains(lower(rollout_id), lower($search))
         OR contains(lower(coalesce(final_answer, '')), lower($search)))
    """


def _params(f: Filters) -> dict:
    return {"runs": list(f.runs), "score_min": f.score_min, "score_max": f.score_max, "statuses": list(f.statuses),
            "calls_min": f.calls_min, "calls_max": f.calls_max, "search": f.search or "",
            "limit_ids": f.only is not None, "only": list(f.only or ()),
            "limit_samples": f.samples is not None, "samples": list(f.samples or ())}


def page_sql(f: Filters) -> str:
    if f.sort not in SORTABLE:
        raise ValueError(f"sort by one of {', '.join(SORTABLE)}")
    key = "list_position($ranked, rollout_id)" if SORTABLE[f.sort] is None else f'"{SORTABLE[f.sort]}"'
    order = f'{key} {"DESC" if f.descending else "ASC"} NULLS LAST, run_id, sample_id, attempt, rollout_id'
    return f"""
    SELECT rollout_id, run_id AS run, sample_id, attempt, status, score, n_tool_calls, n_turns, latency_s,
           final_answer
    FROM rollouts WHERE {_where()}
    ORDER BY {order} LIMIT $limit OFFSET $offset
    """


def count_sql() -> str:
    return f"SELECT count(*) FROM rollouts WHERE {_where()}"


def page(con: duckdb.DuckDBPyConnection, f: Filters) -> tuple[pd.DataFrame, int]:
    """One page of matching rollouts, and how many match in all."""
    p = _params(f)
    total = con.execute(count_sql(), p).fetchall()[0][0]
    order = {"ranked": list(f.ranked)} if SORTABLE.get(f.sort, "") is None else {}
    rows = con.execute(page_sql(f), {**p, **order, "limit": int(f.page_size), "offset": int(f.page * f.page_size)}).df()
    return rows, int(total)


@dataclass
class Trajectory:
    rollout: dict
    calls: pd.DataFrame
    messages: pd.DataFrame
    grades: pd.DataFrame = field(default_factory=pd.DataFrame)
    sample: dict = field(default_factory=dict)  # its sample's prompt and reference, where the logs hold them


def sample_of_sql() -> str:
    """The prompt and reference of $rollout's sample (``sample_texts_sql``)."""
    return (f"WITH one AS (SELECT rollout_id, sample_id, run_id, source_id FROM rollouts WHERE rollout_id = $rollout) "
            f"{sample_texts_sql('one')}")


def trajectory(con: duckdb.DuckDBPyConnection, rollout_id: str) -> Trajectory:
    """Everything about one rollout: its row, tool calls, messages, grades and its sample's texts."""
    rollout = con.execute("SELECT * FROM rollouts WHERE rollout_id = ?", [rollout_id]).df()
    if rollout.empty:
        raise KeyError(f"no rollout {rollout_id!r}")
    calls = con.execute("SELECT * FROM tool_calls WHERE rollout_id = ? ORDER BY call_idx", [rollout_id]).df()
    messages = con.execute("SELECT * FROM messages WHERE rollout_id = ? ORDER BY msg_idx", [rollout_id]).df()
    grades = con.execute("SELECT grader, score, weight, passed FROM grades WHERE rollout_id = ? ORDER BY grader",
                         [rollout_id]).df()
    texts = con.execute(sample_of_sql(), {"rollout": rollout_id}).df()
    sample = {} if texts.empty else {k: v for k, v in texts.iloc[0].items() if k != "rollout_id" and not _missing(v)}
    return Trajectory(rollout.iloc[0].to_dict(), calls, messages, grades, sample)


def attempts_sql() -> str:
    return """SELECT rollout_id, run_id AS run, attempt, status, score, n_tool_calls, latency_s, final_answer
              FROM rollouts WHERE sample_id = $sample AND list_contains($runs, run_id)
              ORDER BY list_position($runs, run_id), attempt"""


def attempts(con: duckdb.DuckDBPyConnection, sample_id: str, runs: list[str]) -> pd.DataFrame:
    """The attempts at one sample under each run (compare mode)."""
    return con.execute(attempts_sql(), {"sample": sample_id, "runs": list(runs)}).df()


# ---- HTML (every string from the logs goes through htmltext.esc) ----------------------------

def _num(value) -> str:
    """A number for people (fmt); empty when the log did not carry it."""
    return "" if _missing(value) else fmt.number(value)


COLUMNS = (("run", 12), ("sample", 14), ("#", 3), ("status", 11), ("score", 6), ("calls", 5), ("latency", 8),
           ("final answer", 60))


def _cells(r) -> list[str]:
    return ["" if _missing(r.run) else str(r.run), "" if _missing(r.sample_id) else str(r.sample_id),
            "" if _missing(r.attempt) else str(r.attempt), str(r.status), _num(r.score),
            "" if _missing(r.n_tool_calls) else str(r.n_tool_calls), _num(r.latency_s),
            "" if _missing(r.final_answer) else " ".join(str(r.final_answer).split())]


def _fixed(cells: list[str]) -> str:
    return " ".join(c[:w].ljust(w) for c, (_, w) in zip(cells, COLUMNS)).rstrip()


def row_labels(rows: pd.DataFrame) -> list[tuple[str, str]]:
    """(label, rollout_id) per row: fixed-width columns for the clickable row list. Labels are
    plain text (ipywidgets never renders them as HTML)."""
    return [(_fixed(_cells(r)), r.rollout_id) for r in rows.itertuples()]


def header_html(total: int, f: Filters) -> str:
    pages = max(1, -(-total // f.page_size))
    header = esc(_fixed([name for name, _ in COLUMNS]))
    return (f"<div class='rl-count'>{total} rollouts match · page {f.page + 1} of {pages} · click a row to open it</div>"
            f"<pre class='rl-head'>{header}</pre>")


TIMELINE_GUTTER = 56  # px left of the bars: "turn N"
CHAR_PX = 6.2  # the width of one character of the bars' 10px font, to tell whether a label fits


def nice_ticks(span: float, target: int = 6) -> list[float]:
    """Round tick positions (1, 2 or 5 × 10^k apart) from 0 to ``span``, about ``target`` of them."""
    import math

    if span <= 0:
        return [0.0]
    raw = span / target
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(span / step + 1e-9) + 1)]


def timeline_html(calls: pd.DataFrame, width: int = 640) -> str:
    """Tool calls as bars on a time axis with ticks, one row per turn (calls of a turn side by
    side); errors in red. A bar names its tool when the name fits; every bar says tool, turn,
    start, latency and error on hover. Without timestamps, calls are drawn one slot each in order."""
    if calls.empty:
        return "<p>No tool calls.</p>"
    timed = calls.started_at.notna().all() and calls.ended_at.notna().all()
    if timed:
        t0 = calls.started_at.min()
        start = (calls.started_at - t0).dt.total_seconds()
        end = (calls.ended_at - t0).dt.total_seconds()
    else:
        start = pd.Series(range(len(calls)), dtype=float)
        end = start + 0.8
    span = max(float(end.max()), 1e-9)
    turns = [0 if _missing(t) else int(t) for t in calls.turn_idx]
    rows = {t: i for i, t in enumerate(sorted(set(turns)))}  # a row per turn that called, in order
    lanes: dict[int, int] = {}
    bars, labels = [], []
    for i, call in enumerate(calls.itertuples()):  # one bar per call of one rollout
        turn = turns[i]
        lane = lanes.get(turn, -1) + 1
        lanes[turn] = lane
        x = TIMELINE_GUTTER + float(start.iloc[i]) / span * width
        w = max(float(end.iloc[i] - start.iloc[i]) / span * width, 3)
        top = rows[turn] * 24 + lane * 6
        color = "#D55E00" if call.status != "ok" else "#0072B2"
        when = f"{fmt.seconds(start.iloc[i])} → {fmt.seconds(end.iloc[i])}" if timed else f"call {i + 1}"
        tip = " · ".join(x for x in (str(call.tool), f"turn {turn}", when,
                                     "" if _missing(call.latency_s) else f"latency {fmt.seconds(call.latency_s)}",
                                     "" if _missing(call.error) else str(call.error)) if x)
        name = esc(call.tool) if len(str(call.tool)) * CHAR_PX + 4 <= w else ""
        bars.append(f"<div class='rl-bar' title='{esc(tip)}' style='left:{x:.1f}px;width:{w:.1f}px;"
                    f"top:{top}px;background:{color}'>{name}</div>")
    for turn, row in rows.items():
        labels.append(f"<div class='rl-lane' style='top:{row * 24}px'>turn {turn}</div>")
    height = len(rows) * 24 + max(lanes.values()) * 6 + 4
    if timed:
        ticks = "".join(f"<div class='rl-tick' style='left:{TIMELINE_GUTTER + t / span * width:.1f}px'>"
                        f"{esc(fmt.seconds(t))}</div>" for t in nice_ticks(span))
        axis = f"<div class='rl-axis' style='position:relative;height:18px;width:{width + TIMELINE_GUTTER}px'>{ticks}</div>"
    else:
        axis = "<div class='rl-axis'>call order (no timestamps in this format)</div>"
    return (f"<div class='rl-timeline' style='position:relative;width:{width + TIMELINE_GUTTER}px;height:{height}px'>"
            f"{''.join(labels)}{''.join(bars)}</div>{axis}")


def _call_html(call, output) -> str:
    """One tool call where it happened: tool, arguments, status, latency, output size, the
    output's start."""
    args = "" if _missing(call.arguments) else str(call.arguments)
    facts = [esc(call.status), f"{_num(call.latency_s)} s" if not _missing(call.latency_s) else "",
             f"{fmt.count(call.output_chars)} chars out" if not _missing(call.output_chars) else ""]
    error = "" if _missing(call.error) else f" <span class='rl-error'>{esc(call.error, 200)}</span>"
    shown = "" if output is None else f"<pre class='rl-out'>{esc(output, OUTPUT_START)}</pre>"
    cls = "rl-call" if call.status == "ok" else "rl-call rl-failed"
    return (f"<div class='{cls}'><code>{esc(call.tool)}({esc(args, 300)})</code> · "
            f"{' · '.join(x for x in facts if x)}{error}{shown}</div>")


OUTPUT_START = 300  # characters of a tool's output shown under its call


def _turn_calls_html(turn_calls: list, outputs: list[str]) -> str:
    """A turn's calls in order, the i-th with the turn's i-th tool output (when logged)."""
    return "".join(_call_html(c, outputs[i] if i < len(outputs) else None) for i, c in enumerate(turn_calls))


def transcript_html(messages: pd.DataFrame, calls: pd.DataFrame) -> str:
    """Messages in order, each assistant turn followed by the tool calls it made (with the start
    of each output, taken from the turn's tool messages in order); calls of turns without a
    message are listed by turn."""
    by_turn = {int(t): list(g.itertuples()) for t, g in calls.groupby("turn_idx")} if len(calls) else {}
    outputs: dict[int, list[str]] = {}
    for m in messages.itertuples():  # columns as in store.SCHEMA_DDL's messages table
        if m.role == "tool" and not _missing(m.turn_idx):
            outputs.setdefault(int(m.turn_idx), []).append(m.content)
    shown_turns: set[int] = set()
    parts = []
    for m in messages.itertuples():
        turn = None if _missing(m.turn_idx) else int(m.turn_idx)
        if m.role == "tool" and turn in by_turn:
            continue  # shown under its call
        text = "" if _missing(m.content) else str(m.content)
        body = f"<pre>{esc(text)}</pre>" if text.strip() else ""
        calls_html = ""
        if m.role == "assistant" and turn in by_turn and turn not in shown_turns:
            shown_turns.add(turn)
            calls_html = _turn_calls_html(by_turn[turn], outputs.get(turn, []))
            if not body:
                body = f"<span class='rl-note'>called {len(by_turn[turn])} tool(s)</span>"
        parts.append(f"<div class='rl-msg rl-{esc(m.role)}'><span class='rl-role'>{esc(m.role)}</span> "
                     f"{body}{calls_html}</div>")
    for turn, turn_calls in sorted(by_turn.items()):
        if turn not in shown_turns:
            parts.append(f"<div class='rl-msg rl-assistant'><span class='rl-role'>turn {turn}</span> "
                         f"{_turn_calls_html(turn_calls, outputs.get(turn, []))}</div>")
    return "".join(parts)


def facts_html(r: dict) -> str:
    """The rollout's facts, each only where the log gave its value (no unit without a number)."""
    def given(key):
        return not _missing(r.get(key))

    tokens = ""
    if given("input_tokens") or given("output_tokens"):
        tokens = f"tokens in/out {fmt.count(r.get('input_tokens'))}/{fmt.count(r.get('output_tokens'))}"
    calls = f"{fmt.count(r['n_tool_calls'])} tool calls" if given("n_tool_calls") else ""
    if calls and given("n_turns"):
        calls += f" in {fmt.count(r['n_turns'])} turns"
    parts = [f"<b>{esc(r['run_id'])}</b>", f"sample <b>{esc(r['sample_id'])}</b>" if given("sample_id") else "",
             f"attempt {esc(r['attempt'])}" if given("attempt") else "", f"status <b>{esc(r['status'])}</b>",
             f"score {_num(r['score'])}" if given("score") else "", calls,
             f"latency {fmt.seconds(r['latency_s'])}" if given("latency_s") else "", tokens]
    return " · ".join(p for p in parts if p)


SAMPLE_TEXT_SHOWN = 4000  # characters of a sample's prompt or reference in the explorer
EXPECTED_SHOWN = 50  # expected actions (outputs, checks) of a sample shown


def expected_html(meta: object) -> str:
    """What the benchmark expects of the agent (``samples.meta``: tau-bench's and tau2's task
    actions, what it must say, what a judge checks), one line each."""
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            return ""
    if not isinstance(meta, dict):
        return ""
    parts = []
    actions = [a for a in meta.get("expected_actions") or [] if isinstance(a, dict)][:EXPECTED_SHOWN]
    if actions:
        items = "".join(
            f"<li><code>{esc(a.get('tool'))}({esc(json.dumps(a.get('arguments'), ensure_ascii=False, sort_keys=True), SAMPLE_TEXT_SHOWN) if a.get('arguments') else ''})</code></li>"
            for a in actions)
        parts.append(f"<p>expected actions:</p><ol class='rl-expected'>{items}</ol>")
    for key, title in (("expected_outputs", "expected to say"), ("assertions", "a judge checks")):
        values = [v for v in meta.get(key) or [] if isinstance(v, (str, int, float))][:EXPECTED_SHOWN]
        if values:
            parts.append(f"<p>{title}:</p><ul>{''.join(f'<li>{esc(v, SAMPLE_TEXT_SHOWN)}</li>' for v in values)}</ul>")
    return "".join(parts)


def sample_html(sample: dict) -> str:
    """The sample's reference (what a right answer looks like), the actions, outputs and checks
    the benchmark expects, and its prompt (folded), where the logs hold them."""
    parts = []
    if sample.get("reference"):
        parts.append(f"<p>reference (expected):</p><pre class='rl-reference'>"
                     f"{esc(sample['reference'], SAMPLE_TEXT_SHOWN)}</pre>")
    parts.append(expected_html(sample.get("meta")))
    if sample.get("prompt"):
        parts.append(f"<details><summary>prompt</summary><pre>{esc(sample['prompt'], SAMPLE_TEXT_SHOWN)}</pre></details>")
    return "".join(parts) or "<p class='rl-note'>The logs hold no prompt, reference or expected actions for this sample.</p>"


def trajectory_html(t: Trajectory, suspect: str | None = None) -> str:
    """One rollout: its facts, the final answer beside the sample's reference, grades, a timeline
    of its tool calls, then the transcript with each turn's calls in place. ``suspect``: the audit's
    reason, shown on top."""
    r = t.rollout
    flag = "" if not suspect else f"<p class='rl-suspect'>audit: {esc(suspect)}</p>"
    error = "" if _missing(r.get("error")) else f"<p class='rl-error'>error: {esc(r['error'])}</p>"
    grades = "".join(f"<li>{esc(g.grader)}: {_num(g.score)}</li>" for g in t.grades.itertuples())
    transcript = transcript_html(t.messages, t.calls)
    answer = fmt.MISSING if _missing(r.get("final_answer")) else esc(r["final_answer"])
    return (f"<div class='rl-trajectory'>{flag}<p>{facts_html(r)}</p>{error}"
            f"<p>final answer: <code class='rl-answer'>{answer}</code></p>{sample_html(t.sample)}"
            f"<p>grades:</p><ul>{grades or '<li>none</li>'}</ul><h4>tool calls</h4>{timeline_html(t.calls)}"
            f"<h4>transcript</h4>{transcript or '<p>No messages or tool calls logged.</p>'}</div>")


def attempts_html(rows: pd.DataFrame, runs: list[str]) -> str:
    cols = []
    for run in runs:
        sub = rows[rows.run == run]
        items = "".join(f"<li>attempt {esc(a.attempt)}: {esc(a.status)}, score {_num(a.score)}, "
                        f"{esc(a.n_tool_calls)} calls, {_num(a.latency_s)} s — "
                        f"<code>{esc(a.final_answer, 60)}</code></li>" for a in sub.itertuples())
        cols.append(f"<div class='rl-col'><h4>{esc(run)}</h4><ul>{items or '<li>no attempts</li>'}</ul></div>")
    return f"<div class='rl-compare' style='display:flex;gap:24px'>{''.join(cols)}</div>"


# ---- labelling the open rollout, failure modes, the aligned diff of compare mode --------------

LABEL_ORIGIN = "explorer"  # the origin of judgements made in the explorer (labels.label)
LABEL_NOTE_SHOWN = 1000  # characters of a label's note shown under the buttons


def _verdict(r) -> tuple[str, str]:
    """(word, css class) of one judgement: pass / fail, or the score it gave."""
    if not _missing(r.passed):
        return ("pass", "rl-pass") if bool(r.passed) else ("fail", "rl-fail")
    return f"score {_num(r.value)}", "rl-score"


def labels_html(frame: pd.DataFrame) -> str:
    """The judgements of a rollout (``labels.labels`` rows), oldest first; note, who and origin
    escaped (people wrote them)."""
    if frame.empty:
        return "<p class='rl-note'>No labels yet.</p>"
    items = []
    for r in frame.itertuples():
        word, cls = _verdict(r)
        who = esc(r.who) if not _missing(r.who) and str(r.who).strip() else "anonymous"
        when = "" if _missing(r.labelled_at) else f" · {pd.Timestamp(r.labelled_at):%Y-%m-%d %H:%M} UTC"
        origin = "" if _missing(r.origin) else f" · {esc(r.origin)}"
        note = "" if _missing(r.note) or not str(r.note).strip() else \
            f" — <span class='rl-label-note'>{esc(r.note, LABEL_NOTE_SHOWN)}</span>"
        items.append(f"<li><b class='{cls}'>{word}</b> · {who}{when}{origin}{note}</li>")
    return f"<p>labels of this rollout ({len(frame)}):</p><ul class='rl-labels'>{''.join(items)}</ul>"


NO_MODE = ""  # the mode dropdown's value for "no mode filter"


def failure_mode_choices(con: duckdb.DuckDBPyConnection, runs) -> tuple[dict[str, tuple[str, ...]], list]:
    """The failure modes of ``runs`` (fitted together, ``failures.failure_mode_of``): mode ->
    its rollout ids, and the mode dropdown's options ((plain-text label, mode); model modes F1,
    F2 ... then infra modes I1 ..., after the "all rollouts" entry)."""
    from ..analysis import failure_modes as failures

    a = failures.failure_mode_of(con, list(runs))
    ids: dict[str, tuple[str, ...]] = {}
    label: dict[str, str] = {}
    kind: dict[str, str] = {}
    for mode, group in a.groupby("mode", sort=False):
        ids[str(mode)] = tuple(map(str, group.rollout_id))
        label[str(mode)] = "" if _missing(group.label.iloc[0]) else " ".join(str(group.label.iloc[0]).split())
        kind[str(mode)] = str(group.kind.iloc[0])

    def order(mode: str):
        number = mode[1:]
        return (kind[mode] != "model", int(number) if number.isdigit() else 10**9, mode)

    modes = sorted(ids, key=order)
    options = [("all rollouts (no mode filter)", NO_MODE)] + [
        (f"{m} · {label[m][:80]} · {len(ids[m])} rollouts", m) for m in modes]
    return {m: ids[m] for m in modes}, options


def modes_note_html(ids_by_mode: dict[str, tuple[str, ...]], runs) -> str:
    failing = sum(len(v) for v in ids_by_mode.values())
    if not failing:
        return f"<span class='rl-note'>no failing rollouts in {esc(_runs_text(runs))}</span>"
    return (f"<span class='rl-note'>{len(ids_by_mode)} modes over {failing} failing rollouts of "
            f"{esc(_runs_text(runs))}</span>")


def diff_html(con: duckdb.DuckDBPyConnection, sample_id, runs: list[str], prefer=None, suspects=None) -> str:
    """Compare mode's aligned diff: a failing attempt of the first run (A; one of ``prefer``
    first, e.g. the open rollout) against a passing attempt of the second (B) that is no audit
    suspect (``suspects``: default the second run's audit) at one sample
    (``trajectories.sample_diff``); its sentence when there is no such pair."""
    if len(runs) < 2:
        return ("<p class='rl-note'>Select two runs to see the aligned diff of a failing attempt of the "
                "first against a passing attempt of the second.</p>")
    if _missing(sample_id):
        return "<p class='rl-note'>This rollout has no sample id: no attempts to pair.</p>"
    from ..analysis import trajectories
    from . import failures_html

    base, candidate = runs[0], runs[1]
    diff = trajectories.sample_diff(con, str(sample_id), base, candidate,
                                    prefer=None if prefer is None else list(prefer), suspects=suspects)
    more = f" (the first two of the {len(runs)} selected runs)" if len(runs) > 2 else ""
    return (f"<div class='rl-sample-diff'><h4>aligned diff: a failing {esc(base)} attempt (A) vs a passing "
            f"{esc(candidate)} attempt (B){esc(more)}</h4>{failures_html.trajectory_diff_html(diff)}</div>")


NO_MATH = "tex2jax_ignore mathjax_ignore"  # log text holds dollar amounts: never typeset it as math

STYLE = """<style>
.rl-table{border-collapse:collapse;font-size:12px}.rl-table td,.rl-table th{border-bottom:1px solid #ddd;padding:2px 6px}
.rl-bar{position:absolute;height:5px;font-size:10px;color:#fff;overflow:hidden;white-space:nowrap;min-height:16px;line-height:16px;padding-left:2px;box-sizing:border-box}
.rl-lane{position:absolute;left:0;font-size:10px;color:#777;line-height:16px}
.rl-axis{font-size:10px;color:#555;border-top:1px solid #999}.rl-tick{position:absolute;top:0;border-left:1px solid #999;padding-left:2px;height:14px}
.rl-reference{background:#f3f8ff;padding:4px;max-height:200px;overflow:auto;white-space:pre-wrap}
.rl-msg pre{white-space:pre-wrap;margin:2px 0 8px 0;max-height:240px;overflow:auto}.rl-role{font-weight:bold}
.rl-error{color:#D55E00}.rl-count{margin:4px 0}.rl-head{margin:0;font-size:12px}
.rl-rows select{font-family:monospace;font-size:12px}.rl-call{margin:2px 0 6px 18px;font-size:12px}
.rl-call pre.rl-out{max-height:120px;color:#555;margin:2px 0}.rl-failed code{color:#D55E00}
.rl-suspect{background:#fff3e0;padding:4px}.rl-note{color:#777}
.rl-pass{color:#009E73}.rl-fail{color:#D55E00}.rl-labels{margin:2px 0;font-size:12px}
</style>"""


def suspects(con: duckdb.DuckDBPyConnection, runs: list[str]) -> dict[str, str]:
    """rollout_id -> the audit's reasons, over the given runs (each audited on its own), most
    suspect first (the audit's ``suspicion``, across the runs)."""
    from ..analysis.audit import audit

    flagged = [audit(con, run) for run in runs]
    flagged = [f for f in flagged if len(f)]
    if not flagged:
        return {}
    ranked = pd.concat(flagged).sort_values(["suspicion", "rollout_id"], ascending=[False, True], kind="stable")
    return dict(zip(ranked.rollout_id, ranked.reason))


def focus_html(what: str | None) -> str:
    """The line above the list: what a figure opened (escaped), or how to open something."""
    if not what:
        return ("<div class='rl-focus rl-note'>Click a point or bar of a linked figure to open it here; "
                "the list shows the explorer's filters.</div>")
    return (f"<div class='rl-focus'><b>Opened from a figure:</b> {esc(what)} · the filters are set aside "
            "until you change one or press <i>show all</i></div>")


def _runs_text(runs) -> str:
    return ", ".join(map(str, runs))


def error_html(what: str, exc: BaseException) -> str:
    """A callback's error as a short escaped message for the widget (its text may hold log text)."""
    return (f"{STYLE}<div class='{NO_MATH}'><p class='rl-error'>Could not {esc(what)}: "
            f"{esc(type(exc).__name__)}: {esc(exc, 500)}</p></div>")


def _errors_shown_in(pane, what: str):
    """Decorate a widget callback so that its error shows in ``pane``: raised in a callback, it
    would only reach JupyterLab's log console, and the click would seem to do nothing."""
    def decorate(callback):
        @functools.wraps(callback)
        def run(*args, **kwargs):
            try:
                return callback(*args, **kwargs)
            except Exception as exc:
                pane.value = error_html(what, exc)
        return run
    return decorate


def explore(con: duckdb.DuckDBPyConnection, runs=None):
    """An ipywidgets app: filters (including the audit's suspects), a paged sortable list of
    rollouts where a click opens one, the trajectory with each turn's tool calls in place, and
    compare mode (the same sample's attempts under every selected run, and the aligned diff of a
    failing attempt of the first run against a passing attempt of the second). Under an opened
    rollout, "pass" / "fail" buttons with a note and who label it (``labels.label``; on a
    ``SharedReader`` through a short-lived writer) and list its labels. "find failure modes" fits
    the selected runs' failure modes (``failures.failure_mode_of``, on demand: it takes seconds)
    and fills a dropdown that narrows the list to one mode's rollouts.

    ``runs``: the runs selected at the start (e.g. a comparison's base and candidate); every
    loaded run can be added in the run list. None: all of them.

    The returned box also opens things from code (what ``plots.linked`` calls on a click):
    ``open_rollout(rollout_id, note=None)``, ``open_sample(sample_id, runs=None)`` (its attempts,
    under each run side by side when several), ``open_calls(runs, low, high)`` (the rollouts with
    ``low <= tool calls < high``) and ``show_all()``; ``.panel`` is the part without the filters
    (the list and the trajectory), shown under a linked figure.
    """
    import ipywidgets as w

    loaded = resolve_runs(con, None)
    chosen = resolve_runs(con, runs)
    state = {"filters": Filters(runs=tuple(chosen)), "suspects": {}, "focus": None, "notes": {}, "open": None,
             "noted": None, "modes": None, "quiet": False}  # modes: (runs, mode -> rollout ids) once found
    run_pick = w.SelectMultiple(options=loaded, value=tuple(chosen), description="runs",
                                rows=min(6, max(len(loaded), 1)))
    score = w.FloatRangeSlider(value=(0.0, 1.0), min=0.0, max=1.0, step=0.05, description="score")
    status = w.SelectMultiple(options=STATUSES, value=(), description="status", rows=3)
    max_calls = int(con.execute("SELECT coalesce(max(n_tool_calls), 0) FROM rollouts").fetchall()[0][0])
    calls = w.IntRangeSlider(value=(0, max_calls), min=0, max=max(max_calls, 1), description="tool calls")
    search = w.Text(placeholder="sample id, rollout id or answer text", description="search")
    search.add_class("rl-search")  # a stable handle for browser tests
    sort = w.Dropdown(options=list(SORTABLE), value="score", description="sort by")
    whole = {"style": {"description_width": "initial"}, "indent": False, "layout": w.Layout(width="auto")}
    desc = w.Checkbox(value=False, description="descending", **whole)
    only_suspects = w.Checkbox(value=False, description="reward-hacking suspects only (rl.audit), most suspect first",
                               **whole)
    find_modes_b = w.Button(description="find failure modes",
                            tooltip="group the selected runs' failing rollouts into modes (rl.failure_mode_of); "
                                    "takes a few seconds")
    mode_pick = w.Dropdown(options=[("all rollouts (no mode filter)", NO_MODE)], value=NO_MODE,
                           description="failure mode", disabled=True, layout=w.Layout(width="480px"))
    mode_note = w.HTML()
    prev_b, next_b = w.Button(description="◀ previous"), w.Button(description="next ▶")
    focus = w.HTML(focus_html(None))
    show_all_b = w.Button(description="show all", tooltip="the list as the filters say",
                          layout=w.Layout(display="none"))
    table = w.HTML()
    pick = w.Select(options=[], rows=PAGE_SIZE, layout=w.Layout(width="100%"))
    pick.add_class("rl-rows")
    compare = w.Checkbox(value=False, description="compare runs on this sample", **whole)
    detail = w.HTML()
    pass_b = w.Button(description="pass", button_style="success", tooltip="label the open rollout a pass")
    fail_b = w.Button(description="fail", button_style="danger", tooltip="label the open rollout a fail")
    # text areas, not Text: the panel is also shown under linked figures, above the explorer's filters, and
    # the first text input of the page stays the explorer's search (tests/test_lab.py finds it so)
    note = w.Textarea(placeholder="why (optional)", description="note", rows=2, layout=w.Layout(width="50%"))
    who = w.Textarea(placeholder="your name (optional)", description="who", rows=1)
    label_out = w.HTML()
    label_box = w.VBox([w.HBox([pass_b, fail_b, note, who]), label_out], layout=w.Layout(display="none"))
    label_box.add_class("rl-label")

    guarded = functools.partial(_errors_shown_in, detail)  # every callback below (labelling: label_out)

    def suspects_of(selected) -> dict[str, str]:
        key = tuple(selected)
        if key not in state["suspects"]:
            state["suspects"][key] = suspects(con, list(key))
        return state["suspects"][key]

    @guarded("update the list")
    def refresh(*_):
        f = state["filters"]
        rows, total = page(con, f)
        state["total"] = total
        table.value = f"{STYLE}<div class='{NO_MATH}'>{header_html(total, f)}</div>"
        pick.options = row_labels(rows)
        pick.value = None
        detail.value = ""  # the rows changed: nothing is open (and an earlier error is gone)
        show_labelling(None)

    def set_focus(what: str | None) -> None:
        state["focus"] = what
        focus.value = f"{STYLE}<div class='{NO_MATH}'>{focus_html(what)}</div>"
        show_all_b.layout.display = None if what else "none"

    def set_modes(found, options, note_html: str = "") -> None:
        """Fill (or empty) the mode dropdown without the list following each step."""
        state["modes"] = found
        state["quiet"] = True
        try:
            mode_pick.options = options
            mode_pick.value = NO_MODE
            mode_pick.disabled = len(options) <= 1
        finally:
            state["quiet"] = False
        mode_note.value = note_html

    @guarded("find failure modes")
    def on_find_modes(*_):
        key = tuple(run_pick.value)
        if not key:
            raise ValueError("select a run first")
        ids_by_mode, options = failure_mode_choices(con, key)
        narrowed = mode_pick.value != NO_MODE
        set_modes((key, ids_by_mode), options, modes_note_html(ids_by_mode, key))
        if narrowed:  # the list was one (old) mode's: it follows the dropdown back to all
            on_filter()

    @guarded("update the list")
    def on_filter(*_):
        if state["quiet"]:
            return
        if state["modes"] is not None and state["modes"][0] != tuple(run_pick.value):
            set_modes(None, [("all rollouts (no mode filter)", NO_MODE)])  # the modes were of other runs
        # a slider at its full range filters nothing (unscored rollouts stay visible)
        lo, hi = score.value
        c_lo, c_hi = calls.value
        full_score, full_calls = (lo, hi) == (score.min, score.max), (c_lo, c_hi) == (calls.min, calls.max)
        ranked = tuple(suspects_of(run_pick.value)) if only_suspects.value or sort.value == "suspicion" else ()
        if only_suspects.value != state.get("suspects_on", False):  # turned on: most suspect first; off: back
            state["suspects_on"] = only_suspects.value
            state["quiet"] = True
            try:
                if only_suspects.value:
                    state["sort_before"] = sort.value
                    sort.value = "suspicion"
                elif sort.value == "suspicion":
                    sort.value = state.get("sort_before", "score")
            finally:
                state["quiet"] = False
        only = ranked if only_suspects.value else None
        if mode_pick.value != NO_MODE and state["modes"] is not None:
            in_mode = state["modes"][1][mode_pick.value]
            only = in_mode if only is None else tuple(sorted(set(only) & set(in_mode)))
        set_focus(None)  # a filter changed: the list follows the filters again
        state["filters"] = replace(state["filters"], runs=tuple(run_pick.value),
                                   score_min=None if full_score else lo, score_max=None if full_score else hi,
                                   statuses=tuple(status.value), calls_min=None if full_calls else c_lo,
                                   calls_max=None if full_calls else c_hi, only=only, samples=None,
                                   search=search.value.strip(), sort=sort.value, descending=desc.value, page=0,
                                   ranked=ranked)
        refresh()

    @guarded("turn the page")
    def on_page(step):
        f = state["filters"]
        last = max(0, (state.get("total", 0) - 1) // f.page_size)
        state["filters"] = replace(f, page=min(max(f.page + step, 0), last))
        refresh()

    labelled = functools.partial(_errors_shown_in, label_out)  # the trajectory above stays in view

    @labelled("show this rollout's labels")
    def show_labels(rollout_id: str) -> None:
        found = stored_labels(con, rollout_ids=[rollout_id])
        label_out.value = f"{STYLE}<div class='{NO_MATH}'>{labels_html(found)}</div>"

    def show_labelling(rollout_id: str | None) -> None:
        """The buttons under the open rollout (hidden while none is open) and its labels."""
        if rollout_id is not None and rollout_id != state["noted"]:
            note.value = ""  # a note is about one rollout (reopening it, e.g. in compare mode, keeps it)
            state["noted"] = rollout_id
        state["open"] = rollout_id
        label_box.layout.display = None if rollout_id is not None else "none"
        label_out.value = ""
        if rollout_id is not None:
            show_labels(rollout_id)

    @labelled("label this rollout")
    def on_label(value: str) -> None:
        rollout_id = state["open"]
        if rollout_id is None:
            raise LabelError("no rollout is open")
        store_label(con, rollout_id, value, note=note.value.strip() or None, who=who.value.strip() or None,
                    origin=LABEL_ORIGIN)
        note.value = ""
        show_labels(rollout_id)

    @guarded("open this rollout")
    def on_pick(*_):
        show_labelling(None)
        if pick.value is None:
            detail.value = ""
            return
        t = trajectory(con, pick.value)
        reason = state["notes"].get(pick.value)
        if reason is None and only_suspects.value:
            reason = suspects_of(run_pick.value).get(pick.value)
        body = trajectory_html(t, suspect=reason)
        if compare.value:
            shown = list(state["filters"].runs)
            try:  # the attempts and the trajectory stay in view when the diff fails
                aligned = diff_html(con, t.rollout["sample_id"], shown, prefer=[pick.value])
            except Exception as exc:
                aligned = error_html("diff this sample", exc)
            body = attempts_html(attempts(con, t.rollout["sample_id"], shown), shown) + aligned + body
        detail.value = f"{STYLE}<div class='{NO_MATH}'>{body}</div>"
        show_labelling(pick.value)

    def show(what: str, first: str | None = None, with_compare: bool | None = None, **filters) -> None:
        """Narrow the list to ``filters`` (the widgets' filters set aside), say so, and open
        ``first`` (or the first row)."""
        f = state["filters"]
        if with_compare is not None:
            compare.value = with_compare
        state["filters"] = Filters(sort=filters.pop("sort", f.sort), descending=f.descending, page_size=f.page_size,
                                   **filters)
        set_focus(what)
        refresh()
        ids = [rid for _, rid in pick.options]
        target = first if first in ids else (ids[0] if ids else None)
        if target is not None:
            pick.value = target

    @guarded("open this rollout")
    def open_rollout(rollout_id: str, note: str | None = None) -> None:
        if note:
            state["notes"][rollout_id] = note
        row = con.execute("SELECT run_id, sample_id FROM rollouts WHERE rollout_id = ?", [rollout_id]).fetchall()
        if not row:
            raise KeyError(f"no rollout {rollout_id!r}")
        run, sample = row[0]
        show(f"rollout {rollout_id} (sample {sample}, {run})", first=rollout_id, runs=(run,), only=(rollout_id,))

    @guarded("open this sample")
    def open_sample(sample_id: str, runs=None) -> None:
        shown = tuple(resolve_runs(con, runs)) if runs else tuple(run_pick.value)
        show(f"sample {sample_id} in {_runs_text(shown)}", with_compare=len(shown) > 1, runs=shown,
             samples=(sample_id,), sort="run")

    @guarded("open these rollouts")
    def open_calls(runs, low: int, high: int) -> None:
        shown = tuple(resolve_runs(con, runs))
        calls_text = f"{low}" if high - low <= 1 else f"{low} to {high - 1}"
        show(f"rollouts with {calls_text} tool calls in {_runs_text(shown)}", runs=shown, calls_min=int(low),
             calls_max=int(high) - 1)

    def show_all(*_) -> None:
        on_filter()

    for widget in (run_pick, score, status, calls, search, sort, desc, only_suspects, mode_pick):
        widget.observe(on_filter, names="value")
    find_modes_b.on_click(on_find_modes)
    pass_b.on_click(lambda _: on_label("pass"))
    fail_b.on_click(lambda _: on_label("fail"))
    prev_b.on_click(lambda _: on_page(-1))
    next_b.on_click(lambda _: on_page(1))
    show_all_b.on_click(show_all)
    pick.observe(on_pick, names="value")
    compare.observe(on_pick, names="value")
    on_filter()
    filters = w.VBox([w.HBox([run_pick, status]), score, calls, search, w.HBox([sort, desc]), only_suspects,
                      w.HBox([find_modes_b, mode_pick, mode_note])])
    panel = w.VBox([w.HBox([focus, show_all_b]), table, pick, w.HBox([prev_b, next_b, compare]), detail,
                    label_box])
    panel.add_class("rl-panel")
    box = w.VBox([filters, panel])
    box.add_class("rl-explorer")
    box.panel = panel
    box.open_rollout, box.open_sample, box.open_calls, box.show_all = open_rollout, open_sample, open_calls, show_all
    box.current_filters = lambda: state["filters"]  # what the list shows now
    box.parts = {"runs": run_pick, "search": search, "rows": pick, "detail": detail, "focus": focus,
                   "compare": compare, "table": table, "show_all": show_all_b, "suspects_only": only_suspects,
                   "find_modes": find_modes_b, "modes": mode_pick, "modes_note": mode_note, "pass": pass_b,
                   "fail": fail_b, "note": note, "who": who, "labels": label_out, "labelling": label_box}
    return box

"""Inspect AI logs: ``.eval`` (a zip: header.json, samples/<id>_epoch_<n>.json, ...) and ``.json``.

One rollout per sample x epoch; the sample is ``task:id``. A log is one evaluation of one task by
one model: its label is ``<model>/<task>`` (a model or task that says nothing — ``...``, ``NaN`` —
is left out), and the evaluation is identified by its ``eval_id``, else by its ``run_id``,
``task_id`` and ``created`` together (``ingest.identity``: evaluations of one label are runs of
their own, ``<model>/<task>@<created>``; a ``task_id`` is reused across evaluations and never
joins them). A ``.json`` and an ``.eval`` of one log are one evaluation: the second's samples are
duplicates, loaded once. Rollout ids are the sample's ``uuid``, else made of what the rollout holds
and its evaluation. A trainer's folder named ``<step>_<split>`` (``005_val``, ``003_rollout``)
gives the step and split. Scores may be letters (C = 1, P = 0.5, I = 0, N = 0), numbers or
booleans; each scorer becomes a grade and the score is their mean; the header's first metric is
kept as the producer's own figure (``rl.runs``: ``reported_score``). A sample ``error`` is the
harness's failure (an exception in a solver, scorer, sandbox or the model API), never the
model's 0: ``infra_error``, no score unless scorers gave one, the message kept; a sample that hit
a ``limit`` (messages, tokens, time, context) is ``truncated``. Tool calls are timed by the
transcript's tool events (``timestamp``, ``completed``, ``working_time``). ``.eval`` files are read
one sample at a time (memory bounded by the largest sample), whether the zip stores its members
with deflate or, as current inspect_ai does, with Zstandard; inspect_ai itself is not needed.
Logs written by R (vitals) load too: scalars boxed in one-element arrays, ``[]`` for ``{}``.

A sample member is decoded into ``SampleFields`` (msgspec): the fields a rollout is made of are
built as ``json.loads`` builds them, and of the rest only each event's timing — the transcript's
inputs and outputs, most of each member, are skipped without being built. JSON msgspec refuses
(NaN, numbers past a double, not an object, bad UTF-8) is left to ``json.loads``, which reads it
or says why not, as before.
"""
from __future__ import annotations

import hashlib
import json
import re
import zipfile
from datetime import datetime
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UNSET
from tqdm.auto import tqdm

from ... import config

from ..chat import convert_messages
from ..context import LoadContext, LoadResult
from ..convert import (BadField, Evaluation, Item, dumps, field, guarded, label_of, lenient_obj, lenient_str, load_items,
                       loads_file, obj, preview, readable, step_split_of, text_of)
from ..jsonscan import loads_lenient
from ..ziparchive import Archive
from ...config import INSPECT_PROGRESS_MIN_SAMPLES

FORMAT = "inspect"
FILE_TYPES = (("json", "inspect"), ("eval", "inspect"))  # what ingest reads of it (formats.file_types)
BATCHED = True  # records only staged through convert.load_items: they load with other files' (ingest.batch)
LETTERS = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}
# what reading one zip member can raise (MemberError is a ValueError, as is bad JSON)
UNREADABLE = (ValueError, zipfile.BadZipFile, OSError, EOFError, RecursionError)
SAMPLE_NAME = re.compile(r"^samples/(?P<id>.+)_epoch_(?P<epoch>\d+)\.json$")
JOURNAL_SUMMARY = re.compile(r"^_journal/summaries/(?P<n>\d+)\.json$")


class EventTiming(msgspec.Struct):
    """Of each transcript event, what times a tool call: its kind, the call's id, when it started
    and completed, and its working time. The rest of the event (inputs, outputs) is skipped."""
    event: Any = None
    id: Any = None
    timestamp: Any = None
    completed: Any = None
    working_time: Any = None


class SampleFields(msgspec.Struct):
    """What a rollout is made of, in the order Inspect writes a sample. Decoding a member into it
    skips every other field (``store``, ``attachments``, ``metadata`` ...) unbuilt, and of the
    transcript (``events``) keeps only the timing of each event."""
    id: Any = UNSET
    epoch: Any = UNSET
    input: Any = UNSET
    target: Any = UNSET
    messages: Any = UNSET
    output: Any = UNSET
    scores: Any = UNSET
    model_usage: Any = UNSET
    total_time: Any = UNSET
    uuid: Any = UNSET
    error: Any = UNSET
    limit: Any = UNSET
    started_at: Any = UNSET
    completed_at: Any = UNSET
    events: list[EventTiming] | msgspec.UnsetType = UNSET


_TIMING = EventTiming.__struct_fields__


class SummaryKey(msgspec.Struct):
    """What summaries.json is read for: which samples the log holds."""
    id: Any = None
    epoch: Any = None


_KEPT = SampleFields.__struct_fields__
_decode_sample = msgspec.json.Decoder(SampleFields).decode
_decode_summaries = msgspec.json.Decoder(list[SummaryKey]).decode


def decode_sample(data: bytes) -> object:
    """A sample member as ``json.loads`` reads it, less the fields no rollout reads (absent fields
    stay absent). Members msgspec refuses go to ``json.loads``, which reads them or raises."""
    try:
        sample = _decode_sample(data)
    except (ValueError, RecursionError):  # msgspec's errors are ValueErrors
        whole = json.loads(data)
        return {k: v for k, v in whole.items() if k in _KEPT} if isinstance(whole, dict) else whole
    out = {name: value for name in _KEPT if (value := getattr(sample, name)) is not UNSET}
    if "events" in out:
        out["events"] = [{k: getattr(e, k) for k in _TIMING} for e in out["events"]]
    return out


def summary_keys(data: bytes) -> set[tuple[str, int]]:
    """(id, epoch) of every sample a summaries list names."""
    try:
        summaries = [{"id": s.id, "epoch": s.epoch} for s in _decode_summaries(data)]
    except (ValueError, RecursionError):
        summaries = json.loads(data)
    return {(str(s.get("id")), int(s.get("epoch") or 1)) for s in summaries if isinstance(s, dict)}


def sniff(path, head: str, first_record) -> bool:
    if path.suffix == ".eval":
        return zipfile.is_zipfile(path)
    return path.suffix == ".json" and '"eval"' in head and ('"plan"' in head or '"version"' in head)


def score_value(value) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        if value.upper() in LETTERS:
            return LETTERS[value.upper()]
        try:
            return float(value)
        except ValueError:
            return None
    return None


def grades_of(scores: dict) -> tuple[list[dict], list[str]]:
    """Each scorer (each metric of a scorer returning a dict) as a grade; a null value is a scorer
    that failed (a grade without a score); values that are neither letters nor numbers are listed."""
    grades, unreadable = [], []
    for scorer, score in scores.items():
        raw_value = score.get("value") if isinstance(score, dict) else score
        values = ({f"{scorer}.{k}": v for k, v in raw_value.items()} if isinstance(raw_value, dict)
                  else {scorer: raw_value})
        for name, v in values.items():
            val = score_value(v)
            if v is None:
                grades.append({"grader": name, "score": None, "error": "the scorer returned no value"})
            elif val is None:
                unreadable.append(f"{name}={preview(v)}")
            else:
                answer = score.get("answer") if isinstance(score, dict) and name == scorer else None
                grades.append({"grader": name, "score": val,
                               "details": {"answer": answer} if answer is not None else None})
    return grades, unreadable


@dataclass(frozen=True)
class EvalRun:
    """What every sample of one log shares."""
    model: str | None
    task: str
    run_fields: dict  # the native record's run, run_meta (evaluation), step and split


# A tool event's working time is believed when it fits in its wall time (vitals writes 100000 as a
# placeholder); else the wall time; else none.
WORKING_TIME_SLACK_S = 1.0


def tool_timings(events: object) -> dict[str, dict]:
    """Each tool call's start, end and latency from the transcript's tool events, by call id
    (``ToolEvent.id`` is the assistant's ``tool_calls[].id``). Inspect's messages carry no times."""
    timings: dict[str, dict] = {}
    for e in events if isinstance(events, list) else ():
        if not isinstance(e, dict) or e.get("event") != "tool" or not isinstance(e.get("id"), str):
            continue
        start, end, working = e.get("timestamp"), e.get("completed"), e.get("working_time")
        start = start if isinstance(start, str) else None
        end = end if isinstance(end, str) else None
        wall = _seconds_between(start, end)
        latency = None
        if isinstance(working, (int, float)) and not isinstance(working, bool) and working >= 0 and \
                wall is not None and working <= wall + WORKING_TIME_SLACK_S:
            latency = float(working)
        elif wall is not None and wall >= 0:
            latency = wall
        timings[e["id"]] = {"started_at": start, "ended_at": end if wall is not None and wall >= 0 else None,
                            "latency_s": latency}
    return timings


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except (ValueError, TypeError):  # a time the native loader then names in its reject
        return None


def sample_record(sample: dict, run: EvalRun) -> dict:
    model, task = run.model, run.task
    grades, unreadable = grades_of(obj(sample, "scores"))
    if unreadable and not any(g["score"] is not None for g in grades):
        raise BadField(f"scores that are neither letters (C, P, I, N) nor numbers: {', '.join(unreadable)}")
    error = sample.get("error")
    error_text = (error.get("message") if isinstance(error, dict) else error if isinstance(error, str)
                  else preview(error)) if error else None
    calls, messages, answer = convert_messages(sample.get("messages"))
    timings = tool_timings(sample.get("events"))
    for call in calls:
        call.update(timings.get(call.get("call_id"), {}))
    output = obj(sample, "output")
    completion = output.get("completion") if isinstance(output.get("completion"), str) else None
    choices = output.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    if completion is None and first:
        message = first.get("message")
        completion = text_of(message.get("content")) if isinstance(message, dict) else None
    model_stop = first.get("stop_reason") if isinstance(first.get("stop_reason"), str) else None
    usage = [u for u in obj(sample, "model_usage").values() if isinstance(u, dict)]

    def numbers(key):
        return [u.get(key) for u in usage if isinstance(u.get(key), (int, float)) and not isinstance(u.get(key), bool)]

    def total(key):
        values = numbers(key)
        return int(sum(values)) if values else None

    # Inspect's input_tokens leave out prompt-cache reads and writes (each provider's usage is
    # normalised so); ours count every input token, the cached ones among them.
    fresh, read, written = total("input_tokens"), total("input_tokens_cache_read"), total("input_tokens_cache_write")
    input_tokens = None if fresh is None else fresh + (read or 0) + (written or 0)
    costs = numbers("total_cost")  # dollars, when Inspect priced the model (every model of the sample)
    cost_usd = float(sum(costs)) if costs and len(costs) == len(usage) else None

    epoch = field(sample, "epoch", "integer") or 1
    sample_id = field(sample, "id", ("string", "integer"))
    target = sample.get("target")
    limit = obj(sample, "limit")
    record = {
        # a sample's uuid is the rollout's; without one, its content and its evaluation are (ingest.identity)
        "rollout_id": field(sample, "uuid", "string"),
        # sample ids restart at 1 in every task: qualify them, as tau2 does with its domain
        **run.run_fields, "model": model, "sample_id": f"{task}:{sample_id}", "attempt": epoch - 1,
        "latency_s": field(sample, "total_time", "number"),
        "started_at": field(sample, "started_at", "string"), "ended_at": field(sample, "completed_at", "string"),
        # a limit the sample hit, else why the model's last output stopped (stop, max_tokens, model_length)
        "stop_reason": f"limit: {field(limit, 'type', 'string', 'limit.')}" if limit else model_stop,
        "final_answer": completion if completion is not None else answer,
        "reference": target if isinstance(target, str) or target is None else dumps(target),
        "prompt": text_of(sample.get("input")) if not isinstance(sample.get("input"), list) else None,
        "usage": {"input_tokens": input_tokens, "output_tokens": total("output_tokens"),
                  "reasoning_tokens": total("reasoning_tokens"),
                  "cached_input_tokens": read if input_tokens is not None else None},
        "cost_usd": cost_usd,
        "tool_calls": calls, "messages": messages, "grades": grades, "error": error_text,
    }
    if error_text:
        record["status"] = "infra_error"  # the harness raised: unknown, not the model's failure
    elif limit:
        record["status"] = "truncated"
    elif not grades:
        record["status"] = "ungraded"  # never scored: counted, not a score of 0
    if not any(g["score"] is not None for g in grades):
        record["score"] = None
    return record


def sample_item(sample: object, run: EvalRun, loc: str) -> Item:
    if not isinstance(sample, dict):
        return Item(loc, reason="not a JSON object", raw=sample)
    return guarded(loc, sample, lambda: Item(loc, record=sample_record(sample, run)))


def _eval_items(ctx: LoadContext, zf: Archive, notes: list):
    """The samples of an open ``.eval``, one at a time: a batch of them is held, never the log."""
    names = zf.names()
    header = {}
    if "header.json" in names:
        try:
            header = json.loads(zf.read("header.json"))
        except UNREADABLE as exc:
            notes.append(f"{ctx.path}: header.json unreadable ({exc}); run label from the file name")
    elif "_journal/start.json" in names:
        try:
            header = json.loads(zf.read("_journal/start.json"))
        except UNREADABLE:
            header = {}
    header = header if isinstance(header, dict) else {}
    ev = header.get("eval") if isinstance(header.get("eval"), dict) else {}
    present = {}
    for name in names:
        m = SAMPLE_NAME.match(name)
        if m:
            present[(m["id"], int(m["epoch"]))] = name
    run = _run(ctx, ev, header.get("results"), notes)
    expected, listing = _expected(ctx, zf, names, notes) if "summaries.json" in names else (set(), "")
    keys = sorted(present, key=lambda k: (k[1], _natural(k[0])))
    bar = tqdm(total=len(keys), desc=ctx.path.name[:30], unit="sample", leave=False, mininterval=0.5,
               disable=not _progress_shown(len(keys)))
    try:
        with zf.reading_ahead([present[key] for key in keys]):  # decompressed on another core meanwhile
            for key in keys:
                name = present[key]
                loc = f"sample {key[0]} epoch {key[1]}"
                try:
                    sample = decode_sample(zf.read(name))
                except UNREADABLE as exc:
                    yield Item(loc, reason=f"{name} in the zip is unreadable ({type(exc).__name__}: {exc})", raw=name)
                    continue
                finally:
                    bar.update()
                yield sample_item(sample, run, loc)
    finally:
        bar.close()
    for key in sorted(expected - set(present), key=lambda k: (k[1], _natural(k[0]))):
        yield Item(f"sample {key[0]} epoch {key[1]}", raw="", reason=f"listed in {listing} but missing from the zip")


def _expected(ctx: LoadContext, zf: Archive, names: list[str], notes: list) -> tuple[set[tuple[str, int]], str]:
    """The (id, epoch) pairs summaries.json lists, and where they were read. Where it cannot be
    read (past the zip limits: 200,000 samples of a browser agent's summaries are 530 MB), the
    summaries of the journal inspect_ai keeps beside it, one file per flush, read one at a time;
    neither: none (samples missing from the zip cannot be told), and a note says so."""
    try:
        return summary_keys(zf.read("summaries.json")), "summaries.json"
    except (*UNREADABLE, TypeError) as exc:
        problem = f"{type(exc).__name__}: {str(exc)[:200]}"
    journal = sorted((n for n in names if JOURNAL_SUMMARY.match(n)), key=lambda n: int(JOURNAL_SUMMARY.match(n)["n"]))
    expected = set()
    try:
        for name in journal:
            expected |= summary_keys(zf.read(name))
    except (*UNREADABLE, TypeError):
        journal = []
    notes.append(f"{ctx.path}: summaries.json is unreadable ({problem}): " + (
        f"the samples the log holds are read from its journal ({len(journal)} summary files)" if journal else
        "samples missing from the zip cannot be told"))
    return (expected, "the journal's summaries") if journal else (set(), "")


def _progress_shown(n_samples: int) -> bool:
    """A bar of samples for a large log, while ingest shows its bar of files (progress on, not CI)."""
    if n_samples < INSPECT_PROGRESS_MIN_SAMPLES or config.progress_disabled():
        return False
    return any(getattr(bar, "desc", None) == "ingest" and not bar.disable for bar in list(tqdm._instances))


def _natural(text: str):
    return (0, int(text), "") if text.isascii() and text.isdigit() else (1, 0, text)  # '²' is a digit, not an int


def evaluation(ctx: LoadContext, ev: dict, results: object) -> Evaluation:
    """The log's evaluation (``ingest.identity``): label ``<model>/<task>``; identity its
    ``eval_id``, else — as inspect_ai's own reader derives one — its ``run_id``, ``task_id`` and
    ``created`` together (a ``task_id`` alone is reused across evaluations, and a ``run_id`` is
    shared by the tasks of one ``inspect eval``); tag its start time; the producer's own figure
    (its first scorer's first metric); a step and split where the trainer's folder names them."""
    model = readable(lenient_str(ev, "model"))
    task = readable(lenient_str(ev, "task")) or ctx.path.stem
    created = lenient_str(ev, "created")
    ident = lenient_str(ev, "eval_id")
    if not ident:
        parts = [lenient_str(ev, k) for k in ("run_id", "task_id")] + [created]
        ident = hashlib.sha256("\x1f".join(p or "" for p in parts).encode()).hexdigest()[:22] if any(parts) else None
    step, split = step_split_of(ctx.path)
    return Evaluation(label_of(model, task, fallback=ctx.path.stem), f"inspect:{ident}" if ident else None,
                      created[:19] if created else None, reported_figure(results), step, split)


def reported_figure(results: object) -> dict | None:
    """What the log's header says its first scorer's first metric was (``accuracy`` 0.63), to be
    shown beside the mean of its samples."""
    scores = results.get("scores") if isinstance(results, dict) else None
    first = scores[0] if isinstance(scores, list) and scores and isinstance(scores[0], dict) else {}
    metrics = lenient_obj(first, "metrics")
    for name, metric in metrics.items():
        value = metric.get("value") if isinstance(metric, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) < 1e300:
            return {"metric": f"{lenient_str(first, 'name') or 'score'}/{name}", "value": float(value)}
    return None


def _run(ctx: LoadContext, ev: dict, results: object, notes: list) -> EvalRun:
    found = evaluation(ctx, ev, results)
    return EvalRun(readable(lenient_str(ev, "model")), readable(lenient_str(ev, "task")) or ctx.path.stem,
                   found.run_fields(ctx))


BOXED = (str, int, float, bool, type(None))


def unboxed(value: object) -> object:
    """A log whose writer put every scalar in a one-element array (R's jsonlite: ``"epoch": [1]``)
    read as the log it means. Only for logs that box their ``version``."""
    if isinstance(value, list):
        if len(value) == 1 and isinstance(value[0], BOXED):
            return value[0]
        return [unboxed(v) for v in value]
    if isinstance(value, dict):
        return {k: unboxed(v) for k, v in value.items()}
    return value


def load(ctx: LoadContext) -> LoadResult:
    notes: list[str] = []
    if ctx.path.suffix == ".eval":
        try:
            archive = Archive(ctx.path)
        except (zipfile.BadZipFile, OSError) as exc:
            return load_items(ctx, [Item("file", reason=f"not a readable zip ({exc}): re-export the log", raw="")], notes)
        with archive:
            return load_items(ctx, _eval_items(ctx, archive, notes), notes)
    data, damage = loads_lenient(loads_file(ctx.path), depth=2)
    data = data if isinstance(data, dict) else {}
    if isinstance(data.get("version"), list):  # every scalar boxed in an array (vitals, early 2025)
        data = unboxed(data)
        notes.append(f"{ctx.path}: every value is written as a one-element array (an R writer): read as the values")
    ev = data.get("eval") if isinstance(data.get("eval"), dict) else {}
    samples = data.get("samples") if isinstance(data.get("samples"), list) else []
    run = _run(ctx, ev, data.get("results"), notes)
    if not samples and not damage:
        notes.append(f"{ctx.path}: no samples in the log (status {data.get('status')!r}): nothing to load")

    def found():  # converted a batch at a time, as they load
        for i, s in enumerate(samples):
            yield sample_item(s, run, f"sample {s.get('id')!s:.40} epoch {s.get('epoch')!s:.20}"
                              if isinstance(s, dict) else f"sample {i}")
        if damage:
            yield Item(f"sample {len(samples)}", reason=damage.describe(), raw="")
    return load_items(ctx, found(), notes)

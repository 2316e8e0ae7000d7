"""OpenAI fine-tuning jobs (RFT and Agent RFT): job events, the job object, checkpoints.

What ``GET /v1/fine_tuning/jobs/{id}/events`` (and ``.../checkpoints``, ``GET .../jobs/{id}``)
return, saved as they come: JSONL with one object per line, or the API's list pages
(``{"object": "list", "data": [...], "has_more": ...}``, one per file or one per line), newest
first or in any order. These are step-level metrics, not rollouts: every number of a ``metrics``
event lands in ``training_metrics`` as (job, step, split, grader, metric, value) — ``train_`` /
``valid_`` / ``full_valid_`` / ``eval_`` prefixes give the split, per-grader entries the grader,
and a ``mean_x`` name is written ``x_mean`` so the flat keys (``train_mean_reward``) and the
structured ones (``scores.train_reward_mean``) meet as one metric (``reward_mean``). Other events
(messages) are read and counted; they hold no metrics.
"""
from __future__ import annotations

import math
import re

from ..context import LoadContext, LoadResult
from ..convert import BadField, Item, dumps, field, guarded, int32, json_kind, obj, preview
from .. import step_metrics
from ..api_pages import Broken, api_objects, object_of, pages_with_more

FORMAT = "openai-finetune"
FILE_TYPES = (("jsonl", "openai-finetune"), ("json", "openai-finetune"))  # what ingest reads of it (formats.file_types)
EVENT, JOB, CHECKPOINT = "fine_tuning.job.event", "fine_tuning.job", "fine_tuning.job.checkpoint"
OBJECTS = (EVENT, JOB, CHECKPOINT)
# full_valid_ is the whole validation set, valid_ one validation batch: two measurements, two splits
SPLIT_PREFIXES = (("full_valid_", "full_valid"), ("valid_", "valid"), ("eval_", "valid"), ("train_", "train"))
NOT_METRICS = {"step", "total_steps"}
JOB_ID = re.compile(r"ftjob-[A-Za-z0-9]{6,}")
SIBLINGS = 50  # files of the same folder looked at for the job id an events page does not carry


def sniff(path, head: str, first_record) -> bool:
    if object_of(first_record) in OBJECTS:
        return True
    # a whole-file JSON (list page or job) does not parse from its first line
    return path.suffix == ".json" and any(f'"object": "{o}"' in head or f'"object":"{o}"' in head for o in OBJECTS)


def _number(value) -> bool:
    """A metric value: a finite number (a JSON 1e400 reads as infinity: no metric)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def split_metric(key: str, default: str = "train") -> tuple[str, str]:
    """('valid', 'reward_mean') from 'full_valid_mean_reward'; unprefixed keys are the training
    step's (``default``)."""
    split, name = default, key
    for prefix, which in SPLIT_PREFIXES:
        if key.startswith(prefix):
            split, name = which, key[len(prefix):]
            break
    if name.startswith("mean_"):
        name = name[len("mean_"):] + "_mean"
    return split, name


def event_metrics(data: dict) -> dict[tuple[str, str, str], float]:
    """Every number of a metrics event as {(split, grader, metric): value}. Structured sections
    first; a flat key that repeats one of them adds nothing."""
    out: dict[tuple[str, str, str], float] = {}

    def put(key: str, value, grader: str = "", default: str = "train", rename=None):
        if not _number(value) or key in NOT_METRICS:
            return
        split, metric = split_metric(key, default)
        out.setdefault((split, grader, rename(metric) if rename else metric), float(value))

    def graders(section: dict, where: str, rename=None):
        entries = section.get("graders")
        if entries is None:
            return
        if not isinstance(entries, list):
            raise BadField(f"field '{where}.graders' must be a JSON array, got {json_kind(entries)} {preview(entries)}")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise BadField(f"'{where}.graders[{i}]' must be a JSON object, got {preview(entry)}")
            name = field(entry, "name", "string", f"{where}.graders[{i}].") or f"grader {i}"
            for key, value in entry.items():
                put(key, value, grader=name, rename=rename)

    for section in ("scores", "errors", "usage", "timing"):
        part = obj(data, section)
        graders(part, section)
        for key, value in part.items():
            put(key, value)
    samples = obj(obj(data, "usage"), "samples", "usage.")
    for key, value in samples.items():
        put(key, value)
    for phase, seconds in obj(obj(data, "timing"), "step", "timing.").items():
        put(phase, seconds, rename=lambda m: f"step_{m}_seconds")  # the step's phases, in seconds
    for model, usage in obj(data, "model_graders_token_usage").items():
        if isinstance(usage, dict):
            for key, value in usage.items():
                put(key, value, grader=model, rename=lambda m: f"model_grader_{m}")
    for key, value in data.items():
        put(key, value)
    return out


def _job_id(ctx: LoadContext, values: list) -> str:
    if ctx.run:
        return ctx.run
    for _, v in values:
        if isinstance(v, dict) and v.get("object") == JOB and isinstance(v.get("id"), str):
            return v["id"]
        if isinstance(v, dict) and v.get("object") == CHECKPOINT and isinstance(v.get("fine_tuning_job_id"), str):
            return v["fine_tuning_job_id"]
    found = JOB_ID.search(str(ctx.path))
    if found:
        return found.group(0)
    # event pages name no job: a folder saved for one job says which in its other files
    beside = set()
    for sibling in sorted(ctx.path.parent.iterdir())[:SIBLINGS]:
        if sibling != ctx.path and sibling.suffix in (".json", ".jsonl") and sibling.is_file():
            with open(sibling, "rb") as fh:
                beside.update(JOB_ID.findall(fh.read(1 << 16).decode("utf-8", errors="replace")))
    return beside.pop() if len(beside) == 1 else ctx.path.stem


def convert(value, job: str) -> tuple[list[tuple], dict | None]:
    """(metric rows, job row) of one API object."""
    if not isinstance(value, dict):
        raise BadField(f"not a JSON object, got {json_kind(value)} {preview(value)}")
    kind = value.get("object")
    if kind == EVENT:
        if value.get("type") != "metrics":
            return [], None
        data = field(value, "data", "object", required=True)
        step = int32(field(data, "step", "integer", "data.", required=True), "data.step")
        return [(job, step, s, g, m, v) for (s, g, m), v in event_metrics(data).items()], None
    if kind == CHECKPOINT:
        step = int32(field(value, "step_number", "integer", required=True), "step_number")
        metrics = obj(value, "metrics")
        rows = [(job, step, *split_metric(k), v) for k, v in metrics.items() if _number(v) and k not in NOT_METRICS]
        return [(j, st, sp, "", m, float(v)) for j, st, sp, m, v in rows], None
    if kind == JOB:
        method = obj(value, "method")
        mtype = field(method, "type", "string", "method.")
        detail = obj(method, mtype, "method.") if mtype else {}
        hyper = obj(detail, "hyperparameters", f"method.{mtype}.") or obj(value, "hyperparameters")
        return [], {"job": field(value, "id", "string") or job, "model": field(value, "model", "string"),
                    "fine_tuned_model": field(value, "fine_tuned_model", "string"), "method": mtype,
                    "status": field(value, "status", "string"), "hyperparameters": dumps(hyper),
                    "meta": dumps({k: value.get(k) for k in ("created_at", "finished_at", "trained_tokens",
                                                              "eval_id", "seed", "suffix") if k in value})}
    raise BadField(f"field 'object' must be one of {', '.join(OBJECTS)} (or a list page of them), "
                   f"got {preview(kind)}")


def load(ctx: LoadContext) -> LoadResult:
    con = ctx.con
    values = list(api_objects(ctx.path))
    job = _job_id(ctx, values)
    rows, jobs, rejects = [], [], []
    for ordinal, (where, value) in enumerate(values, start=1):
        if isinstance(value, Broken):
            rejects.append((ordinal, str(value.raw)[:2000], f"{where}: {value.reason}"))
            continue
        item = guarded(where, value, lambda: Item(where, record={"out": convert(value, job)}))
        if item.record is None:
            rejects.append((ordinal, dumps(value)[:2000], f"{where}: {item.reason}"))
            continue
        metric_rows, job_row = item.record["out"]
        rows.extend(metric_rows)
        if job_row:
            jobs.append(job_row)
    step_metrics.write(con, rows, rejects, ctx.source_id)
    for j in jobs:
        con.execute("INSERT INTO training_jobs VALUES ($job, $model, $fine_tuned_model, $method, $status, "
                    "$hyperparameters, $meta, $sid)", {**j, "sid": ctx.source_id})
    notes = [] if ctx.run else [f"{ctx.path}: job '{job}' (--run to name it)"]
    for where, last_id in pages_with_more(ctx.path):  # the API said so: never a silent gap
        page = "its page" if where == "file" else f"its page at {where}"
        notes.append(f"{ctx.path}: {page} says has_more: true: the job has more events than this "
                     f"file holds; fetch them (after={last_id}) and ingest them too")
    if not values:
        notes.append(f"{ctx.path}: no records in the file: nothing to load")
    return LoadResult(n_records=len(values), n_rejected=len(rejects), notes=notes)

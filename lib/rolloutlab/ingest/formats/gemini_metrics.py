"""Gemini reinforcement tuning jobs' step metrics.

Google's monitoring page names the metrics a job emits "at every training step (on the current
training batch) and at every evaluation interval (on the entire validation dataset)":
``/train_mean_reward``, ``/eval_mean_reward``, generation and thinking lengths, reward and sampling
latencies (mean, p95), ``/learnable_prompt_ratio``; and per reward of a composite,
``<reward name>/train_mean_reward``, processing times, error and clipping ratios. It documents **no
file** holding them (the console shows the job's experiment; ``TuningJob.gcs_metrics_uri`` names a
Cloud Storage location whose layout is not described). What is read here is those names as they are
documented, one step per record, in the two plainest files — nothing else is assumed:

- JSON lines ``{"step": 10, "/train_mean_reward": 0.41, "exact/train_mean_reward": 0.5, …}``;
- CSV with a ``step`` column and one column per metric name.

``train_`` / ``eval_`` give the split (``eval`` is ``valid``), the reward's name the grader, and
``mean_reward`` is ``reward_mean`` as the other trainers name it.
"""
from __future__ import annotations

import math
import re

from .. import step_metrics
from ..context import LoadContext, LoadResult
from ..convert import BadField, csv_records, field, int32, jsonl_records, preview
from .openai_finetune import split_metric

FORMAT = "gemini-metrics"
FILE_TYPES = (("jsonl", "gemini-metrics"), ("csv", "gemini-metrics"))  # what ingest reads of it (formats.file_types)
# the documented names (without a leading "/" or a reward's name)
NAMES = ("mean_reward", "generation_length", "thinking_token_length", "mean_reward_latency", "p95_reward_latency",
         "mean_sampling_latency", "p95_sampling_latency", "processing_time", "p95_processing_time",
         "executing_code_failure_ratio", "rpc_error_ratio", "invalid_rpc_response_ratio", "clipping_rewards_ratio")
DOCUMENTED = re.compile(r"^(?P<reward>[^/]*)/(?P<name>(train|eval)_(" + "|".join(NAMES) + r")|learnable_prompt_ratio)$")


def _documented(keys) -> bool:
    return any(DOCUMENTED.match(str(k).strip()) for k in keys)


def sniff(path, head: str, first_record) -> bool:
    if path.suffix == ".csv":
        header = [c.strip() for c in head.lstrip("\ufeff").split("\n", 1)[0].split(",")]
        return "step" in header and _documented(header)
    return isinstance(first_record, dict) and "step" in first_record and _documented(first_record)


def rows_of(rec: dict, job: str) -> list[tuple]:
    step = rec.get("step")
    if isinstance(step, str) and re.fullmatch(r"\d+", step.strip()):
        step = int(step)
    step = int32(field({"step": step}, "step", "integer", required=True), "step")
    out = []
    for key, value in rec.items():
        found = DOCUMENTED.match(str(key).strip()) if key is not None else None
        if found is None:
            continue
        if isinstance(value, str):
            if not value.strip():
                continue  # a CSV cell of a step that did not measure it
            try:
                value = float(value)
            except ValueError:
                raise BadField(f"field '{key}' must be a number, got {preview(value)}") from None
        if value is None:
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise BadField(f"field '{key}' must be a number, got {preview(value)}")
        if math.isfinite(value):
            split, metric = split_metric(found["name"], "train")
            out.append((job, step, split, found["reward"], metric, float(value)))
    return out


def load(ctx: LoadContext) -> LoadResult:
    job = ctx.run or ctx.path.stem
    records = csv_records(ctx.source) if ctx.path.suffix == ".csv" else jsonl_records(ctx.source, ctx.line_offset)
    notes = [] if ctx.run else [f"{ctx.path}: job '{job}' (the file's name; --run to name it)"]
    return step_metrics.load_records(ctx, records, lambda rec: rows_of(rec, job), notes)


def appendable(path) -> bool:
    """A JSON-lines file grows a line per step: only its new lines load."""
    return path.suffix != ".csv"

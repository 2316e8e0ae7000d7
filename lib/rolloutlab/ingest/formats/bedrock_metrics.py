"""Amazon Bedrock model customization jobs' step metrics (reinforcement fine-tuning of Nova models).

What the Bedrock user guide documents ("Analyze the results of a model customization job"): every
customization job writes ``model-customization-job-<id>/training_artifacts/step_wise_training_metrics.csv``
and ``validation_artifacts/post_fine_tuning_validation/validation_metrics.csv`` to its output S3
prefix, CSV with ``step_number`` (from 0), ``epoch_number`` and one column per metric (documented for
fine-tuning: ``training_loss``, ``perplexity``, ``validation_loss``). Which columns an RFT job
writes is not documented; AWS's Nova samples read such a file with any other columns
(``train_reward_mean``, ``policy_entropy``), and the guide's "Monitor training" names the RFT
metrics (``critic/rewards/mean``, ``val-score/rewards/mean@1``, ``actor/entropy`` …). So every
numeric column is a metric: the reward columns under one name, ``reward_mean`` (``reward_max``,
``reward_min``) as the other trainers name it, the rest as written. Jobs through Bedrock's
OpenAI-compatible API report OpenAI job events: format ``openai-finetune``.
"""
from __future__ import annotations

import math
import re

from .. import step_metrics
from ..context import LoadContext, LoadResult
from ..convert import BadField, csv_records, int32, preview
from .openai_finetune import split_metric

FORMAT = "bedrock-metrics"
FILE_TYPES = (("csv", "bedrock-metrics (step_wise_training_metrics.csv, validation_metrics.csv)"),)  # what ingest reads of it (formats.file_types)
NOT_METRICS = {"step_number", "epoch_number"}
JOB_FOLDER = re.compile(r"model-customization-job-([A-Za-z0-9_-]+)")
# the guide's RFT metric names -> (split, metric), as the other trainers name them
REWARDS = re.compile(r"^(?P<where>critic|val-score|val_score|validation)/rewards?/(?P<stat>mean|max|min)(@\d+)?$")


def sniff(path, head: str, first_record) -> bool:
    header = head.lstrip("\ufeff").split("\n", 1)[0]
    return path.suffix == ".csv" and "step_number" in [c.strip() for c in header.split(",")]


def metric_of(column: str, validation_file: bool) -> tuple[str, str]:
    """(split, metric) of a column: the reward statistics named reward_mean / _max / _min,
    ``training_`` / ``validation_`` prefixes as train / valid, OpenAI's ``train_`` / ``valid_``."""
    found = REWARDS.match(column)
    if found:
        return ("train" if found["where"] == "critic" else "valid"), f"reward_{found['stat']}"
    for prefix, split in (("training_", "train"), ("validation_", "valid"), ("val_", "valid")):
        if column.startswith(prefix):
            return split, column[len(prefix):]
    return split_metric(column, "valid" if validation_file else "train")


def rows_of(rec: dict, job: str, validation_file: bool) -> list[tuple]:
    text = (rec.get("step_number") or "").strip()
    if not re.fullmatch(r"-?\d+(\.0*)?", text):
        raise BadField(f"field 'step_number' must be an integer, got {preview(text)}")
    step = int32(int(float(text)), "step_number")
    out = []
    for column, cell in rec.items():
        if column is None or column.strip() in NOT_METRICS:
            continue
        cell = (cell or "").strip() if isinstance(cell, str) else ""
        if cell in ("", "nan", "NaN", "null", "None"):
            continue  # not measured at this step (a validation column on a training step)
        try:
            value = float(cell)
        except ValueError:
            raise BadField(f"field '{column.strip()}' must be a number, got {preview(cell)}") from None
        if math.isfinite(value):
            split, metric = metric_of(column.strip(), validation_file)
            out.append((job, step, split, "", metric, value))
    return out


def load(ctx: LoadContext) -> LoadResult:
    found = JOB_FOLDER.search(str(ctx.path))
    job = ctx.run or (f"model-customization-job-{found.group(1)}" if found else ctx.path.stem)
    validation = "validation" in ctx.path.name or "validation_artifacts" in ctx.path.parts
    notes = [] if ctx.run else [f"{ctx.path}: job '{job}' (--run to name it)"]
    return step_metrics.load_records(ctx, csv_records(ctx.source), lambda rec: rows_of(rec, job, validation), notes)

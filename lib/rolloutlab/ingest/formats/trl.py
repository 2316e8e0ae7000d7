"""TRL GRPO completions: ``GRPOConfig(log_completions=True)`` writes
``{output_dir}/completions/completions_{step:05d}.parquet`` (``GRPOTrainer.log``).

Columns: ``step``, ``prompt`` and ``completion`` (decoded text), one column per reward function
(named after it), extra logged columns, ``advantage``. Each reward column is a grade; a NaN there
is a function that did not apply to that completion (TRL sums with ``nansum``), not a failure.
The score is the grades' sum: TRL's default, every reward weight 1 (with ``reward_weights`` set,
the score here is the unweighted sum — documented in docs/formats.md). Every numeric column
other than step and advantage is read as a reward function. A file is one run
(``<output_dir>-step<N>``, split ``train``); no sample id, attempt, timing or tokens are logged:
the sample is the prompt's hash, the attempt its order among the same prompt's rows.
"""
from __future__ import annotations

import math
import re
from dataclasses import replace

from ..context import LoadContext, LoadResult
from ..convert import BadField, Item, field, guarded, load_items, preview, prompt_sample_id
from ..inline_tools import parse_completion
from ..parquet import Unreadable, columns, rows

FORMAT = "trl"
FILE_TYPES = (("parquet", "trl (completions_*.parquet)"),)  # what ingest reads of it (formats.file_types)
BATCHED = True  # records only staged through convert.load_items: they load with other files' (ingest.batch)
NOT_REWARDS = {"step", "prompt", "completion", "advantage"}
STEP_IN_NAME = re.compile(r"completions_(\d+)$")


def sniff(path, head: str, first_record) -> bool:
    if path.suffix != ".parquet":
        return False
    names = set(columns(path))
    return {"prompt", "completion"} <= names and "trajectory_json" not in names


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def record(row: dict, name: str, split: str, file_step: int | None) -> dict:
    prompt = field(row, "prompt", "string", required=True)
    completion = field(row, "completion", "string", required=True)
    step = field(row, "step", "integer")
    step = file_step if step is None else step
    grades = []
    for key, value in row.items():
        if key in NOT_REWARDS or value is None or isinstance(value, (str, bytes, list, dict)):
            continue
        if not _number(value):
            raise BadField(f"field '{key}' must be a number (a reward), got {preview(value)}")
        if not math.isnan(value):  # NaN: the reward function did not apply
            grades.append({"grader": str(key), "score": float(value)})
    calls, answer = parse_completion(completion)
    out = {"run": f"{name}-step{step}" if step is not None else name, "step": step, "split": split,
           "sample_id": prompt_sample_id(prompt), "prompt": prompt, "final_answer": answer, "tool_calls": calls,
           "grades": grades, "score": math.fsum(g["score"] for g in grades) if grades else None}
    if not grades:
        out["status"] = "ungraded"
    return out


def items(ctx: LoadContext, name: str, split: str, file_step: int | None):
    for i, row in enumerate(rows(ctx.path)):
        where = f"row {i}"
        if isinstance(row, Unreadable):
            yield Item(where, reason=row.reason, raw="")
        else:
            yield guarded(where, row, lambda: Item(where, record=record(row, name, split, file_step)))


def load(ctx: LoadContext) -> LoadResult:
    folder = ctx.path.parent.parent if ctx.path.parent.name == "completions" else ctx.path.parent
    name = ctx.run or folder.name or "trl"
    split = ctx.split or "train"
    found = STEP_IN_NAME.search(ctx.path.stem)
    file_step = int(found.group(1)) if found else None
    notes = [] if ctx.run else [f"{ctx.path}: runs '{name}-step<N>' (the output_dir; --run NAME to name the "
                                "training run)"]
    return load_items(replace(ctx, run=None), items(ctx, name, split, file_step), notes)

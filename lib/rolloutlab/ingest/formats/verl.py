"""verl generation dumps: ``trainer.rollout_data_dir`` / ``trainer.validation_data_dir``.

verl's trainer (``RayPPOTrainer._dump_generations``) writes ``{dir}/{global_step}.jsonl``, one
line per generated sequence: ``{"input": prompt text, "output": response text, "gts": reference,
"score": reward, "step": global step, <reward extra keys>}``. A step's file is one run
(``<name>-step<N>``); its split is ``valid`` when the folder's name says so (val, eval, test:
the validation dump), else ``train``. verl logs no sample id, attempt, timing or tokens: the
sample is the prompt's hash (the text goes to ``samples.prompt``), the attempt its order among
the same prompt's lines in that step; the rest stays NULL. Tool calls are parsed from the
response text (Hermes-style ``<tool_call>`` blocks; ``inline_tools``).
"""
from __future__ import annotations

import re
from dataclasses import replace

from ..context import LoadContext, LoadResult
from ..convert import dumps, field, jsonl_items, load_items, prompt_sample_id
from ..inline_tools import parse_completion

FORMAT = "verl"
FILE_TYPES = (("jsonl", "verl"),)  # what ingest reads of it (formats.file_types)
BATCHED = True  # records only staged through convert.load_items: they load with other files' (ingest.batch)
KEYS = {"input", "output", "score", "step"}
VALID_FOLDER = re.compile(r"(^|[^a-z])(val|valid|validation|eval|evaluation|test)([^a-z]|$)", re.I)


def sniff(path, head: str, first_record) -> bool:
    return isinstance(first_record, dict) and KEYS <= set(first_record) and "messages" not in first_record


def split_of(path, override: str | None) -> str:
    return override or ("valid" if VALID_FOLDER.search(path.parent.name) else "train")


def _number(value) -> bool:
    return isinstance(value, (int, float))  # booleans too: reward extras such as acc are often true/false


def record(rec: dict, name: str, split: str, file_step: int | None) -> tuple[dict, None]:
    prompt = field(rec, "input", "string", required=True)
    output = field(rec, "output", "string", required=True)
    score = field(rec, "score", "number")
    step = field(rec, "step", "integer")
    step = file_step if step is None else step
    calls, answer = parse_completion(output)
    gts = rec.get("gts")
    extras = {k: v for k, v in rec.items() if k not in KEYS | {"gts"} and _number(v) and v == v}
    out = {"run": f"{name}-step{step}" if step is not None else name, "step": step, "split": split,
           "sample_id": prompt_sample_id(prompt), "prompt": prompt,
           "reference": gts if isinstance(gts, str) or gts is None else dumps(gts),
           "final_answer": answer, "tool_calls": calls,
           # reward extras are the reward function's parts: kept for reference (weight 0)
           "grades": [{"grader": str(k), "score": float(v), "weight": 0.0} for k, v in extras.items()],
           "score": None if score is None else float(score)}
    if score is None:
        out["status"] = "ungraded"
    return out, None


def load(ctx: LoadContext) -> LoadResult:
    split = split_of(ctx.path, ctx.split)
    name = ctx.run or ctx.path.parent.name or "verl"
    file_step = int(ctx.path.stem) if ctx.path.stem.isdigit() else None
    notes = [] if ctx.run else [f"{ctx.path}: runs '{name}-step<N>' (the dump folder; --run NAME to name the "
                                f"training run), split '{split}' (--split to override)"]
    # --run names the training run; each step stays a run of its own (<name>-step<N>)
    return load_items(replace(ctx, run=None), jsonl_items(ctx.source, lambda rec: record(rec, name, split, file_step), ctx.line_offset),
                      notes)


def appendable(path) -> bool:
    """Lines are independent records: a file that grew loads only its new lines."""
    return True

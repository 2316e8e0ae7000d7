"""Load formats that are mapped record by record: each source record becomes a native record.

A format module yields ``Item``s — a native record, or the reason a source record cannot be one —
with a location users recognize ("simulation 3 (task 13)"). They become native JSONL lines, line k
for source record k, handed a batch at a time to the native loader (with other files' records
when the ingest loads many: ingest.batch): validation, rejects and the typed inserts all run in
DuckDB. Conversion failures join the rejects with their location.

Source records are untrusted: a converter reads every field through ``field`` (which names the
field and the kind it wanted when the value is of another kind) and runs under ``guarded``, so a
record it cannot read becomes a reject and never stops the ingest.
"""
from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import itertools
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from .. import config
from .formats import native
from .context import Converted, LoadContext, LoadResult
from .lines import gathered_rejects

RAW_LIMIT = 2000  # characters of a rejected source record kept in rejects.raw
PREVIEW = 60  # characters of a bad value quoted in a reason

KIND_TEST = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
}
KIND_WORDS = {"string": "a string", "number": "a number", "integer": "an integer", "object": "a JSON object",
              "array": "a JSON array", "boolean": "true or false"}


class BadField(ValueError):
    """A source field of the wrong kind; the message names it and what it should be."""


def json_kind(value) -> str:
    if value is None:
        return "null"
    for kind in ("boolean", "integer", "number", "string", "array", "object"):
        if KIND_TEST[kind](value):
            return "number" if kind == "integer" else kind
    return type(value).__name__


def dumps(value) -> str:
    """JSON text of any parsed value (repr where JSON cannot say it)."""
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (ValueError, RecursionError):
        return repr(value)


def preview(value) -> str:
    return dumps(value)[:PREVIEW]


def field(record: dict, key: str, kinds: str | tuple[str, ...], where: str = "", required: bool = False):
    """``record[key]`` when it is of one of ``kinds`` (None when absent or null, unless
    ``required``); else BadField naming ``where + key``."""
    kinds = (kinds,) if isinstance(kinds, str) else kinds
    value = record.get(key)
    name = f"{where}{key}"
    if value is None:
        if required:
            raise BadField(f"missing required field '{name}'")
        return None
    if not any(KIND_TEST[k](value) for k in kinds):
        want = " or ".join(KIND_WORDS[k] for k in kinds)
        raise BadField(f"field '{name}' must be {want}, got {json_kind(value)} {preview(value)}")
    return value


def int32(value: int | None, name: str) -> int | None:
    """``value`` when it fits a 32-bit column (steps, turns); else BadField naming the field."""
    if value is not None and not -2**31 <= value < 2**31:
        raise BadField(f"field '{name}' must be an integer from {-2**31} to {2**31 - 1}, got number {preview(value)}")
    return value


def obj(record: dict, key: str, where: str = "") -> dict:
    """An optional object field, {} when absent — or written as an empty array, as writers that
    cannot tell an empty object from an empty list do (R's jsonlite: vitals)."""
    if record.get(key) == []:
        return {}
    return field(record, key, "object", where) or {}


def lenient_obj(record: object, key: str) -> dict:
    """An object field of file-level metadata: {} when absent or of another kind (a label then
    falls back to the file name; nothing is rejected for it)."""
    value = record.get(key) if isinstance(record, dict) else None
    return value if isinstance(value, dict) else {}


def lenient_str(record: dict, key: str) -> str | None:
    value = record.get(key)
    return value if isinstance(value, str) and value else None


def guarded(location: str, raw: object, convert) -> "Item":
    """``convert()`` -> Item; a record it cannot read becomes a rejected Item, never an exception."""
    try:
        return convert()
    except BadField as exc:
        return Item(location, reason=str(exc), raw=raw)
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, OverflowError, RecursionError) as exc:
        return Item(location, reason=f"unreadable record ({type(exc).__name__}: {exc}); check its fields "
                    "against docs/formats.md", raw=raw)


@dataclass
class Item:
    location: str
    record: dict | None = None
    reason: str | None = None
    raw: object = None
    skip: bool = False  # a blank line: keeps the numbering, counts as nothing


def load_items(ctx: LoadContext, items: Iterable[Item], notes: list[str] | None = None,
               batch: int | None = None) -> LoadResult:
    """Load converted records through the native loader, ``batch`` records at a time (memory
    stays bounded by a batch, not the file), all inside the caller's transaction: into the
    ingest's shared batch (``ctx.batch``: loaded with other files' records, counted when it loads),
    or now. Line k of the native lines is source record k; a record that could not be converted
    is a reject at its number, its reason starting with where it is."""
    batch = batch or config.CONVERT_BATCH_RECORDS
    notes = [] if notes is None else notes  # the caller's list: items may add notes as they are read
    con = ctx.con
    total = LoadResult(0, 0)
    ordinal = ctx.line_offset
    with contextlib.ExitStack() as stack:
        keep = None if ctx.batch is not None else stack.enter_context(gathered_rejects(con))
        iterator = iter(items)
        while True:
            chunk = list(itertools.islice(iterator, batch))
            if not chunk:
                break
            lines, failures = [], []
            for item in chunk:
                ordinal += 1
                if item.skip:
                    continue
                line, reason = _native_line(item)
                if line is None:
                    failures.append((ordinal, raw_text(item.raw), f"{item.location}: {reason}"))
                else:
                    lines.append((ordinal, line, item.location))
            result = native.load(replace(ctx, read_path=None, converted=Converted(lines, failures)))
            if keep is not None:
                keep()
            native.add_result(total, result)
    if ordinal == ctx.line_offset == 0:
        notes.append(f"{ctx.path}: no records in the file: nothing to load")
    total.notes = _merged(notes + total.notes)
    return total


def _merged(notes: list[str]) -> list[str]:
    """Notes of the batches, each said once (a note per batch would repeat it)."""
    return list(dict.fromkeys(notes))


def _native_line(item: Item) -> tuple[str | None, str | None]:
    """The item's native JSONL line, or why there is none."""
    if item.record is None:
        return None, item.reason
    try:
        return json.dumps(item.record, default=str, ensure_ascii=False, allow_nan=False), None
    except ValueError:
        return None, "a number is NaN or infinite: write null (or a finite number) instead"
    except RecursionError:
        return None, "nested too deeply to read"


def raw_text(value: object) -> str:
    return (value if isinstance(value, str) else dumps(value))[:RAW_LIMIT]


@dataclass(frozen=True)
class Evaluation:
    """What a converted file says its run is (``ingest.identity``): the label people read and group
    by (``<model>/<task>``), what identifies this one evaluation (an Inspect ``eval_id``, a tau2
    results file's timestamp and setting; None where the producer says nothing), its tag as people
    read it (when it started), and what the producer reported of it (``{"metric", "value"}``).
    ``--run`` names the run instead: files merge on purpose, evaluations are not told apart."""
    label: str
    identity: str | None = None
    tag: str | None = None
    reported: dict | None = None
    step: int | None = None
    split: str | None = None
    model: str | None = None  # where the file says it only in its name

    def run_fields(self, ctx: LoadContext) -> dict:
        """The fields of a native record that place it in its run (and its model, where only the
        file's name says it)."""
        model = {"model": self.model} if self.model else {}
        if ctx.run:
            return {"run": ctx.run, **model}
        meta = {k: v for k, v in (("evaluation", self.identity), ("tag", self.tag), ("reported", self.reported))
                if v is not None}
        return {"run": self.label, "run_meta": meta or None, **model,
                **({"step": self.step} if self.step is not None else {}),
                **({"split": self.split} if self.split is not None else {})}


PLACEHOLDER = re.compile(r"^[\s.\-_/]*$|^(nan|none|null|undefined|unknown)$", re.I)


def readable(name: object) -> str | None:
    """A name (a model, a task) as a label part, None when it says nothing: empty, dots
    (``...``), ``NaN``, ``None``. Control characters never reach a label."""
    if not isinstance(name, str):
        return None
    name = "".join(c for c in name if c.isprintable()).strip()
    return None if PLACEHOLDER.match(name) else name


def label_of(*parts: str | None, fallback: str) -> str:
    """``a/b/c`` of the parts that say something, else ``fallback`` (a file's name)."""
    named = [p for p in (readable(x) for x in parts) if p]
    return "/".join(named) if named else (readable(fallback) or "unnamed")


STEP_SPLIT_FOLDER = re.compile(r"^(?P<step>\d{1,9})[_-](?P<split>rollouts?|train|val|valid|validation|eval|test)$", re.I)
SPLIT_WORDS = {"rollout": "train", "rollouts": "train", "train": "train", "val": "valid", "valid": "valid",
               "validation": "valid", "eval": "valid", "test": "test"}


def step_split_of(path: Path) -> tuple[int | None, str | None]:
    """A training step and split that a trainer wrote into the folder's name (``005_val``,
    ``003_rollout``: one folder per step and split), else (None, None)."""
    m = STEP_SPLIT_FOLDER.match(path.parent.name)
    return (int(m["step"]), SPLIT_WORDS[m["split"].lower()]) if m else (None, None)


def loads_file(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def prompt_sample_id(prompt: str) -> str:
    """A stable sample id for sources that name none: the prompt's hash, so attempts at the same
    prompt group together (the prompt text itself goes to ``samples.prompt``)."""
    return "prompt:" + hashlib.sha1(prompt.encode("utf-8", "replace")).hexdigest()[:12]


def parse_json_arguments(arguments: object) -> object:
    """Tool-call arguments given as a JSON string become the object; other text stays text."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def text_of(content: object) -> str | None:
    """Message content as text: strings as they are, lists of parts joined by their text."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, dict) else p for p in content]
        return "\n".join(p if isinstance(p, str) else dumps(p) for p in parts if p)
    return dumps(content)


INFRA_MARKERS = ("timeout", "timed out", "connection", "503", "502", "500", "504", "unavailable",
                 "rate limit", "429", "econnreset", "network", "dns", "socket")


def classify_error(text: str | None) -> str:
    """infra_error when an error text looks like a tool/network failure, else model_error."""
    lowered = (text or "").lower()
    return "infra_error" if any(m in lowered for m in INFRA_MARKERS) else "model_error"


# What says the model itself broke the rollout (its output could not be used), not the harness.
MODEL_MARKERS = ("model returned", "malformed", "invalid tool", "unknown tool", "invalid arguments", "invalid json",
                 "could not parse", "failed to parse", "parse error")


def harness_error_status(text: str | None) -> str:
    """The status of a rollout its harness marked as raised (a runtime error, an exception in the
    rollout function): ``infra_error`` — unknown, never the model's 0 — unless the text says the
    model's own output broke it (``model_error``)."""
    lowered = (text or "").lower()
    if any(m in lowered for m in INFRA_MARKERS):
        return "infra_error"
    return "model_error" if any(m in lowered for m in MODEL_MARKERS) else "infra_error"


def csv_records(path: Path):
    """(line number, row, raw line, problem) of a CSV file with a header."""
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    lines = text.splitlines()
    reader = csv.DictReader(io.StringIO(text))
    for row in reader:
        number = reader.line_num
        extra = row.pop(None, None)
        yield number, row, lines[number - 1] if number <= len(lines) else "", (
            f"{len(extra)} cells more than the header names" if extra else None)


def jsonl_records(path: Path, line_offset: int = 0):
    """(line number, parsed record or None, raw line, problem) for every line of a JSONL file; blank
    lines come back as None records without a problem. Numbers start after ``line_offset``."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1 + line_offset):
            if not line.strip():
                yield number, None, line, None
                continue
            try:
                yield number, json.loads(line), line, None
            except RecursionError:
                yield number, None, line, "JSON nested too deeply to read"
            except ValueError as exc:
                cut = not line.endswith("\n")
                yield number, None, line, ("invalid JSON on the last line, which has no line end: the file looks "
                                           "truncated" if cut else f"invalid JSON ({exc.msg} at column {exc.colno})")


def jsonl_items(path: Path, convert, line_offset: int = 0) -> Iterable[Item]:
    """Items of a JSONL file whose lines are mapped one by one by ``convert(record, line_no)``
    -> (native record or None, reason or None); blank, invalid and non-object lines handled here."""
    for number, rec, line, problem in jsonl_records(path, line_offset):
        location = f"line {number}"
        if rec is None and problem is None:
            yield Item(location, skip=True)
        elif problem:
            yield Item(location, reason=problem, raw=line)
        elif not isinstance(rec, dict):
            yield Item(location, reason="not a JSON object", raw=line)
        else:
            yield guarded(location, line, lambda: Item(location, *convert(rec), raw=line))

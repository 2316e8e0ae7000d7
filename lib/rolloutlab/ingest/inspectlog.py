"""Inspect AI logs: ``.eval`` (a zip: header.json, samples/<id>_epoch_<n>.json, ...) and ``.json``.

One rollout per sample x epoch; the sample is ``task:id``. Scores may be letters (C = 1, P = 0.5, I = 0, N = 0), numbers or
booleans; each scorer becomes a grade and the score is their mean. ``.eval`` files are read one
sample at a time (memory bounded by the largest sample); inspect_ai itself is not needed.
"""
from __future__ import annotations

import json
import re
import zipfile

from .chat import convert_messages
from .context import LoadContext, LoadResult
from .convert import Item, classify_error, load_items, loads_file, text_of
from .jsonscan import loads_lenient

FORMAT = "inspect"
LETTERS = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}
SAMPLE_NAME = re.compile(r"^samples/(?P<id>.+)_epoch_(?P<epoch>\d+)\.json$")


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


def sample_item(sample: dict, label: str, model: str | None, task: str, loc: str) -> Item:
    if not isinstance(sample, dict):
        return Item(loc, reason="not a JSON object", raw=sample)
    grades, unreadable = [], []
    for scorer, score in (sample.get("scores") or {}).items():
        raw_value = score.get("value") if isinstance(score, dict) else score
        if isinstance(raw_value, dict):  # several metrics from one scorer
            for key, v in raw_value.items():
                val = score_value(v)
                (grades.append({"grader": f"{scorer}.{key}", "score": val}) if val is not None
                 else unreadable.append(f"{scorer}.{key}={v!r}"))
            continue
        val = score_value(raw_value)
        if val is None:
            unreadable.append(f"{scorer}={raw_value!r}")
        else:
            grades.append({"grader": scorer, "score": val,
                           "details": {"answer": score.get("answer")} if isinstance(score, dict) else None})
    error = sample.get("error")
    error_text = (error.get("message") if isinstance(error, dict) else str(error)) if error else None
    if unreadable and not grades:
        return Item(loc, reason=f"scores that are neither letters (C, P, I, N) nor numbers: {', '.join(unreadable)}",
                    raw=sample)
    if not grades and not error_text:
        return Item(loc, reason="no scores: the sample was never scored", raw=sample)
    calls, messages, answer = convert_messages(sample.get("messages") or [])
    output = sample.get("output") if isinstance(sample.get("output"), dict) else {}
    completion = output.get("completion")
    if completion is None and output.get("choices"):
        completion = text_of(((output["choices"][0] or {}).get("message") or {}).get("content"))
    usage = [u for u in (sample.get("model_usage") or {}).values() if isinstance(u, dict)]

    def total(key):
        values = [u.get(key) for u in usage if isinstance(u.get(key), (int, float))]
        return int(sum(values)) if values else None

    epoch = sample.get("epoch") or 1
    record = {
        "rollout_id": sample.get("uuid") or f"{label}:{task}:{sample.get('id')}:{epoch}",
        # sample ids restart at 1 in every task: qualify them, as tau2 does with its domain
        "run": label, "model": model, "sample_id": f"{task}:{sample.get('id')}", "attempt": int(epoch) - 1,
        "latency_s": sample.get("total_time"), "final_answer": completion if completion is not None else answer,
        "reference": sample.get("target") if isinstance(sample.get("target"), str) else json.dumps(sample.get("target")),
        "prompt": text_of(sample.get("input")) if not isinstance(sample.get("input"), list) else None,
        "usage": {"input_tokens": total("input_tokens"), "output_tokens": total("output_tokens"),
                  "reasoning_tokens": total("reasoning_tokens")},
        "tool_calls": calls, "messages": messages, "grades": grades, "error": error_text,
    }
    if error_text:
        record["status"] = classify_error(error_text)
    if not grades:
        record["score"] = None
    return Item(loc, record=record)


def _eval_items(ctx: LoadContext, notes: list):
    with zipfile.ZipFile(ctx.path) as zf:
        names = zf.namelist()
        header = {}
        if "header.json" in names:
            try:
                header = json.loads(zf.read("header.json"))
            except (ValueError, zipfile.BadZipFile, OSError) as exc:
                notes.append(f"{ctx.path}: header.json unreadable ({exc}); run label from the file name")
        elif "_journal/start.json" in names:
            try:
                header = json.loads(zf.read("_journal/start.json"))
            except (ValueError, zipfile.BadZipFile, OSError):
                header = {}
        ev = header.get("eval") if isinstance(header.get("eval"), dict) else {}
        label, model, task = _label(ctx, ev, notes)
        present = {}
        for name in names:
            m = SAMPLE_NAME.match(name)
            if m:
                present[(m["id"], int(m["epoch"]))] = name
        expected = set()
        if "summaries.json" in names:
            try:
                expected = {(str(s.get("id")), int(s.get("epoch") or 1))
                            for s in json.loads(zf.read("summaries.json")) if isinstance(s, dict)}
            except (ValueError, zipfile.BadZipFile, OSError, TypeError):
                expected = set()
        for key in sorted(present, key=lambda k: (k[1], _natural(k[0]))):
            name = present[key]
            loc = f"sample {key[0]} epoch {key[1]}"
            try:
                sample = json.loads(zf.read(name))
            except (ValueError, zipfile.BadZipFile, OSError, EOFError) as exc:
                yield Item(loc, reason=f"{name} in the zip is unreadable ({type(exc).__name__}: {exc})", raw=name)
                continue
            yield sample_item(sample, label, model, task, loc)
        for key in sorted(expected - set(present), key=lambda k: (k[1], _natural(k[0]))):
            yield Item(f"sample {key[0]} epoch {key[1]}", raw="",
                       reason="listed in summaries.json but missing from the zip")


def _natural(text: str):
    return (0, int(text), "") if text.isdigit() else (1, 0, text)


def _label(ctx: LoadContext, ev: dict, notes: list):
    model = ev.get("model")
    task = ev.get("task") or ctx.path.stem
    label = ctx.run or model or ctx.path.stem
    if not ctx.run:
        notes.append(f"{ctx.path}: run label '{label}' ({'the model' if model else 'the file name'}; "
                     "--run to override)")
    return label, model, task


def load(ctx: LoadContext) -> LoadResult:
    notes: list[str] = []
    if ctx.path.suffix == ".eval":
        try:
            found = list(_eval_items(ctx, notes))
        except zipfile.BadZipFile as exc:
            found = [Item("file", reason=f"not a readable zip ({exc}): re-export the log", raw="")]
        return load_items(ctx, found, notes)
    data, damage = loads_lenient(loads_file(ctx.path), depth=2)
    data = data if isinstance(data, dict) else {}
    ev = data.get("eval") if isinstance(data.get("eval"), dict) else {}
    label, model, task = _label(ctx, ev, notes)
    samples = data.get("samples") if isinstance(data.get("samples"), list) else []
    found = [sample_item(s, label, model, task,
                         f"sample {s.get('id')} epoch {s.get('epoch')}" if isinstance(s, dict) else f"sample {i}")
             for i, s in enumerate(samples)]
    if damage:
        found.append(Item(f"sample {len(samples)}", reason=damage.describe(), raw=""))
    elif not samples:
        notes.append(f"{ctx.path}: no samples in the log (status {data.get('status')!r}): nothing to load")
    return load_items(ctx, found, notes)

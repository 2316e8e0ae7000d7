"""OpenAI Evals run output items: ``GET /v1/evals/{eval_id}/runs/{run_id}/output_items``.

``eval.run.output_item`` objects (openai-python ``OutputItemListResponse``), saved as JSONL or
as the API's list pages, with the ``eval.run`` object (model, name, ``result_counts``) where
present. One eval run is one run (its ``name``, else its id; ``--run`` overrides); the sample is
``datasource_item_id`` (items come in no particular order); each entry of ``results`` is a grade
(name, score, passed, type) and the score is the mean of the graders' scores (every grade kept);
tool calls come from the sample's output messages (chat ``tool_calls`` or Responses
``function_call`` items); tokens from ``sample.usage``. An item whose ``sample.error`` is set is
not the model's failure: ``infra_error`` for server, rate-limit and timeout errors, else
``ungraded`` (the request never produced a gradable answer).
"""
from __future__ import annotations

from dataclasses import replace

from ..api_pages import Broken, api_objects, object_of
from ..chat import convert_messages
from ..context import LoadContext, LoadResult
from ..convert import BadField, Item, classify_error, dumps, field, guarded, json_kind, load_items, obj, preview, text_of

FORMAT = "openai-evals"
FILE_TYPES = (("jsonl", "openai-evals"), ("json", "openai-evals"))  # what ingest reads of it (formats.file_types)
BATCHED = True  # records only staged through convert.load_items: they load with other files' (ingest.batch)
ITEM, RUN = "eval.run.output_item", "eval.run"
INFRA_CODES = ("server", "rate_limit", "timeout", "unavailable", "overloaded", "internal")


def sniff(path, head: str, first_record) -> bool:
    if object_of(first_record) in (ITEM, RUN):
        return True
    return path.suffix == ".json" and any(f'"object": "{o}"' in head or f'"object":"{o}"' in head
                                          for o in (ITEM,))


def chat_messages(items: object, where: str) -> list:
    """Output messages as chat messages: chat ones as they are; Responses API items (message,
    function_call, function_call_output) turned into them, consecutive calls as one turn."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise BadField(f"field '{where}' must be a JSON array, got {json_kind(items)} {preview(items)}")
    out: list[dict] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadField(f"'{where}[{i}]' must be a JSON object, got {preview(item)}")
        kind = item.get("type")
        if kind == "function_call":
            call = {"id": item.get("call_id") or item.get("id"),
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            if out and out[-1].get("role") == "assistant" and out[-1].get("_calls_only"):
                out[-1]["tool_calls"].append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call], "_calls_only": True})
        elif kind == "function_call_output":
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")})
        else:
            out.append({k: v for k, v in item.items() if k in ("role", "content", "tool_calls", "tool_call_id")})
    for message in out:
        message.pop("_calls_only", None)
    return out


def item_record(item: dict, label: str | None, model: str | None) -> dict:
    sample_id = field(item, "datasource_item_id", ("integer", "string"), required=True)
    sample = obj(item, "sample")
    results = field(item, "results", "array") or []
    grades = []
    for i, r in enumerate(results):
        if not isinstance(r, dict):
            raise BadField(f"'results[{i}]' must be a JSON object, got {preview(r)}")
        score = field(r, "score", "number", f"results[{i}].")
        passed = r.get("passed")
        grades.append({"grader": field(r, "name", "string", f"results[{i}].") or f"grader {i}", "score": score,
                       "passed": passed if isinstance(passed, bool) else None,
                       "details": {"type": r.get("type")} if isinstance(r.get("type"), str) else None})
    calls, messages, answer = convert_messages(chat_messages(sample.get("output"), "sample.output"),
                                               where="sample.output")
    prompt_messages = sample.get("input") if isinstance(sample.get("input"), list) else []
    prompt = next((text_of(m.get("content")) for m in reversed(prompt_messages)
                   if isinstance(m, dict) and m.get("role") == "user"), None)
    usage = obj(sample, "usage", "sample.")
    error = obj(sample, "error", "sample.")
    error_text = " ".join(str(error.get(k)) for k in ("code", "message") if error.get(k)) or None
    source = obj(item, "datasource_item")
    reference = next((source[k] for k in ("reference", "answer", "expected", "ground_truth", "label")
                      if isinstance(source.get(k), str)), None)
    out = {"rollout_id": field(item, "id", "string"),
           "run": label or field(item, "run_id", "string", required=True),
           "model": model or field(sample, "model", "string", "sample."), "sample_id": str(sample_id),
           "final_answer": answer, "tool_calls": calls, "messages": messages, "prompt": prompt,
           "reference": reference, "stop_reason": field(sample, "finish_reason", "string", "sample."),
           "usage": {"input_tokens": field(usage, "prompt_tokens", "integer", "sample.usage."),
                     "output_tokens": field(usage, "completion_tokens", "integer", "sample.usage.")},
           "grades": grades}
    if error_text:
        code = str(error.get("code") or "").lower()
        infra = any(c in code for c in INFRA_CODES) or classify_error(error_text) == "infra_error"
        out.update(status="infra_error" if infra else "ungraded", error=error_text, score=None)
    elif not any(g["score"] is not None for g in grades):
        out.update(status="ungraded", score=None)
    return out


def load(ctx: LoadContext) -> LoadResult:
    values = list(api_objects(ctx.path))
    runs = {v.get("id"): v for _, v in values if isinstance(v, dict) and v.get("object") == RUN}
    notes = []
    n_items = {}

    def items():
        for where, value in values:
            if isinstance(value, Broken):
                yield Item(where, reason=value.reason, raw=value.raw)
            elif isinstance(value, dict) and value.get("object") == RUN:
                yield Item(where, skip=True)  # the run's own object: read for its name and model
            elif isinstance(value, dict) and value.get("object") == ITEM:
                run = runs.get(value.get("run_id"), {})
                label = ctx.run or (run.get("name") if isinstance(run.get("name"), str) else None)
                model = run.get("model") if isinstance(run.get("model"), str) else None
                n_items[value.get("run_id")] = n_items.get(value.get("run_id"), 0) + 1
                yield guarded(where, value, lambda: Item(where, record=item_record(value, label, model)))
            else:
                yield Item(where, reason=f"not an eval run output item: object {preview(object_of(value))}",
                           raw=dumps(value))

    result = load_items(replace(ctx, run=None), items(), notes)
    for run_id, run in runs.items():  # say when the file holds fewer items than the run graded
        counts = run.get("result_counts") if isinstance(run.get("result_counts"), dict) else {}
        total = counts.get("total")
        if isinstance(total, int) and total != n_items.get(run_id, 0):
            result.notes.append(f"{ctx.path}: eval run {run_id} reports {total} items, this file holds "
                                f"{n_items.get(run_id, 0)} (more pages to download?)")
    return result

"""The graders of other platforms, captured: a Bedrock reward Lambda (``captured_lambda_reward``)
and a Gemini Cloud Run reward service (``gemini_reward_middleware``), logged as ``rft-endpoint``
events so that their rollouts load like Agent RFT's.
"""
from __future__ import annotations

import functools
import json
import os
import time
from typing import Any, Iterable, Mapping

from .. import config
from .events import EventLog, Recorder, exception_text, field
from .middleware import CaptureMiddleware
from .streaming import Cut

# ---- the graders of other platforms: a Bedrock reward Lambda, a Gemini Cloud Run reward service --

def _message_text(content: Any) -> str | None:
    """A chat message's content as text: text, or the text of its parts ({"text": ...})."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") if isinstance(p, dict) else p for p in content]
        return "".join(t for t in texts if isinstance(t, str)) or None
    return None


def prompt_sample_id(prompt: Any) -> str:
    """A sample id for a grader call that names none: the hash of its prompt (the attempts at one
    prompt then group as one sample, as ingest does for logs without ids)."""
    import hashlib

    text = json.dumps(prompt, sort_keys=True, ensure_ascii=False, default=str)
    return "prompt:" + hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:12]


def _finite(value: Any) -> bool:
    import math

    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


LAMBDA_SAMPLE_FIELDS = ("sample_id", "id", "task_id")  # where a sample's dataset id may be, in metadata


def lambda_sample_id(sample: Mapping[str, Any]) -> str:
    """The dataset sample of one sample of a Bedrock reward Lambda's event: the dataset's own id,
    which Bedrock passes in ``metadata`` (``sample_id`` as ``--to bedrock-nova`` writes it, else
    ``id``, ``task_id``; AWS's samples also read ``task_id`` at the top), else the prompt's hash."""
    meta = sample.get("metadata") if isinstance(sample.get("metadata"), dict) else {}
    for where, key in [(meta, k) for k in LAMBDA_SAMPLE_FIELDS] + [(sample, "task_id")]:
        value = where.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    messages = sample.get("messages") if isinstance(sample.get("messages"), list) else []
    return prompt_sample_id(messages[:-1] if messages and isinstance(messages[-1], dict)
                            and messages[-1].get("role") == "assistant" else messages)


def lambda_results(output: Any) -> dict[str, tuple[float | None, dict | None, str | None]]:
    """{sample id: (score, grades, why not)} from a reward Lambda's return value: a list (one object
    per sample: ``id``, ``aggregate_reward_score``, ``metrics_list`` of {name, value, type}, or the
    ``reward_components`` {name: value} of AWS's own sample Lambdas); a single object is a list of one."""
    items = [output] if isinstance(output, dict) else output if isinstance(output, list) else []
    found = {}
    for item in items:
        if not isinstance(item, dict) or item.get("id") is None:
            continue
        grades: dict = {}
        for metric in item.get("metrics_list") or []:
            if isinstance(metric, dict) and isinstance(metric.get("name"), str):
                value = metric.get("value")
                grades[metric["name"]] = float(value) if _finite(value) else None  # None: that metric failed
        for name, value in (item.get("reward_components") or {}).items() if isinstance(
                item.get("reward_components"), dict) else ():
            grades.setdefault(str(name), float(value) if _finite(value) else None)
        score = item.get("aggregate_reward_score")
        why = None if _finite(score) else "the reward function returned no finite aggregate_reward_score for this sample"
        found[str(item["id"])] = (float(score) if why is None else None, grades or None, why)
    return found


def captured_lambda_reward(log: EventLog | str | os.PathLike, run: str | None = None, step: int | None = None,
                           split: str | None = None, redact_fields: Iterable[str] = config.CAPTURE_REDACT_FIELDS):
    """Decorator for an AWS Lambda reward function of Amazon Bedrock reinforcement fine-tuning
    (``def lambda_handler(event, context)``): one ``rft-endpoint`` grade event per sample of every
    call. The event is a list of samples (Bedrock user guide, "Setting up reward functions for
    Amazon Nova models"): ``id`` (the rollout's, unique), ``messages`` (the last one the answer
    graded), ``metadata`` (``reference_answer`` and the dataset line's other fields, the sample id
    among them); the handler returns one ``{id, aggregate_reward_score, metrics_list}`` per sample.

    Logged per sample: the rollout id, the sample (``lambda_sample_id``), the answer, the score and
    every metric as a grade, the call's latency (``grader_latency_s``: the whole batch's), and the
    invocation (``invocation``: ``context.aws_request_id``, ``batch``: its samples; kept in the file
    for joins, the capacity plan counts calls by it). A handler that raises logs every sample of
    its batch as a failed grader and raises again; a sample the result leaves out, or scores with
    no finite number, is a failed grader too (an ``infra_error`` after ingest, never a 0).

    ``log``: a folder (on Lambda, an Amazon EFS mount: ``/tmp`` goes with the execution
    environment) or an ``EventLog``. Each execution environment writes files of its own."""
    import uuid

    if not isinstance(log, EventLog):  # environments on a shared EFS mount may share a pid: names of their own
        log = EventLog(log, name=f"reward-lambda-{uuid.uuid4().hex[:8]}")
    recorder = Recorder(log, rollout_id_field=None, run=run, step=step, split=split, sample_id_field="sample",
                        final_answer_field="answer", redact_fields=redact_fields)

    def decorate(handler):
        @functools.wraps(handler)
        def wrapper(event, context=None):
            start = time.time()
            try:
                output = handler(event, context)
            except BaseException as exc:
                _log_lambda(recorder, event, context, None, exception_text(exc), start, time.time())
                raise
            _log_lambda(recorder, event, context, output, None, start, time.time())
            return output

        wrapper.capture_log = recorder.log
        return wrapper
    return decorate


def _log_lambda(recorder: Recorder, event: Any, context: Any, output: Any, error: str | None, start: float,
                end: float) -> None:
    """The grade events of one reward Lambda call; never raises (a failure to log is counted)."""
    import uuid

    try:
        samples = [event] if isinstance(event, dict) else event if isinstance(event, list) else []
        results = {} if error else lambda_results(output)
        request = getattr(context, "aws_request_id", None)
        for sample in samples:
            if not isinstance(sample, dict):
                continue
            rollout = sample.get("id")
            rollout = str(rollout) if rollout not in (None, "") else f"lambda-{uuid.uuid4().hex}"
            messages = sample.get("messages") if isinstance(sample.get("messages"), list) else []
            answer = _message_text(messages[-1].get("content")) if messages and isinstance(messages[-1], dict) else None
            score, grades, why = results.get(rollout, (None, None, error or "the reward function returned no "
                                                                             "result for this sample"))
            body = {"sample": lambda_sample_id(sample), "answer": answer}
            payload = None if why else {"score": score, **({"grades": grades} if grades else {})}
            record = recorder.grade_event(rollout, body, start, end, None, why, payload)
            record.update(invocation=None if request is None else str(request), batch=len(samples))
            recorder.log.write(record)
    except Exception as exc:
        recorder.log.failed(exc)


GEMINI_REWARD_RANGE = (-1.0, 1.0)  # Gemini clips every reward to [-1, 1] ("Reward functions" guide)


class GeminiRewardRecorder(Recorder):
    """The grade events of a Cloud Run reward service of Gemini reinforcement tuning. Its request
    (google-genai's ``CloudRunRewardScorer``; REST reference): ``{"example": <the dataset line:
    contents, references, systemInstruction>, "response": <the model's Content: parts>,
    "metadata": {"step", "tuning_job_id"}}`` (the guide writes ``tuningJobId``: both are read);
    its answer ``{"reward": float}``. One request grades one response, and carries no rollout id:
    each call is a rollout of its own (an id made here; a retried call is another). Sample: the
    dataset's ``references.sample_id`` (``--to gemini-rl`` writes it), else the prompt's hash;
    step: ``metadata.step``; run: ``run`` or ``gemini-<tuning job id>``. The score logged is the
    reward clipped to [-1, 1], as training used it (``reward_returned`` keeps what the service said);
    a reward that is not a finite number is a failed reward (Gemini counts it NaN)."""

    def __init__(self, log: EventLog | str | os.PathLike, run: str | None = None, split: str | None = "train",
                 sample_reference: str = config.GEMINI_RL_SAMPLE_REFERENCE, **options):
        super().__init__(log, rollout_id_field=None, run=run, split=split, sample_id_field="example.references."
                         + sample_reference, final_answer_field="response.parts", **options)

    def rollout_id(self, headers, body) -> str:
        import uuid

        return super().rollout_id(headers, body) or f"gemini-{uuid.uuid4().hex}"

    def grade_event(self, rollout_id, body, start, end, http_status, error, payload, request_bytes=None) -> dict:
        reward = payload.get("reward") if isinstance(payload, dict) else None
        returned = None
        if error is None and isinstance(payload, dict) and "reward" in payload and not _finite(reward):
            error = "the reward was not a finite number (Gemini counts it as a failed reward, NaN)"
        elif error is None and _finite(reward):
            low, high = GEMINI_REWARD_RANGE
            clipped = max(min(float(reward), high), low)
            if clipped != reward:
                returned, payload = float(reward), {**payload, "reward": clipped}
        event = super().grade_event(rollout_id, body, start, end, http_status, error, payload, request_bytes)
        body = body if isinstance(body, dict) else {}
        meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        step = meta.get("step")
        job = meta.get("tuning_job_id", meta.get("tuningJobId"))
        example = body.get("example") if isinstance(body.get("example"), dict) else {}
        event.update(step=step if isinstance(step, int) and not isinstance(step, bool) and 0 <= step < 2**31 else
                     self.step, run=self.run or (f"gemini-{job}" if isinstance(job, (str, int)) else "gemini"))
        if event["sample_id"] is None:
            event["sample_id"] = prompt_sample_id([example.get("systemInstruction"), example.get("contents")])
        parts = field(body, "response.parts")
        if isinstance(parts, list) and not isinstance(parts, Cut):
            event["final_answer"] = self.final_answer({"response": {"parts": _message_text(parts)}})
        if returned is not None:
            event["reward_returned"] = returned
        return event


def gemini_reward_middleware(app, log: EventLog | str | os.PathLike, run: str | None = None, path: str = "/",
                             **options) -> CaptureMiddleware:
    """ASGI middleware for a Cloud Run reward service of Gemini reinforcement tuning (FastAPI,
    Starlette): every POST to ``path`` is one grade event (``GeminiRewardRecorder``); other routes
    are not logged. ``app.add_middleware(...)`` takes the class; wrap the app instead::

        app = gemini_reward_middleware(app, "/mnt/logs", run="gemini-job-7")"""
    return CaptureMiddleware(app, log, tools={}, graders=(path,),
                             recorder=GeminiRewardRecorder(log, run=run, **options))

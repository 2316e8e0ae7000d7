"""Capture middleware and decorators: the events they write, called through ASGI directly."""
import asyncio
import json
import logging
import os

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

import rolloutlab as rl
from rolloutlab.capture import REDACTED, CaptureMiddleware, EventLog, captured_grader, captured_tool


async def search(request):
    body = await request.json()
    args = json.loads(body["arguments"])
    if args.get("query") == "down":
        return JSONResponse({"detail": "tool backend unavailable"}, status_code=503)
    if args.get("query") == "bad":
        return JSONResponse({"detail": "query must be text"}, status_code=400)
    if args.get("query") == "crash":
        raise RuntimeError("index corrupted")
    return JSONResponse({"output": "0123456789", "call_id": body.get("call_id"), "id": body.get("id")})


async def grade(request):
    body = await request.json()
    if body.get("model_sample") == "silent":
        return JSONResponse({"ok": True})
    return JSONResponse({"score": 0.5, "grades": {"exact": 0.0, "judge": 1.0}})


async def guarded(request):
    """A tool behind a bearer token, answering before it reads the body (as servers do)."""
    if request.headers.get("authorization") != "Bearer tok":
        return JSONResponse({"detail": "missing or wrong bearer token"}, status_code=401)
    if request.headers.get("x-role") == "guest":
        return JSONResponse({"detail": "not allowed"}, status_code=403)
    return JSONResponse({"output": "ok"})


async def health(request):
    return PlainTextResponse("ok")


def make_app(log, **options):
    """As a server adds it (inside Starlette's error handler, which turns an exception into a 500)."""
    return Starlette(routes=[Route("/search", search, methods=["POST"]), Route("/grade", grade, methods=["POST"]),
                             Route("/guarded", guarded, methods=["POST"]), Route("/health", health)],
                     middleware=[Middleware(CaptureMiddleware, log=log, **options)])


def call(app, path, body=None, headers=(), method="POST", on_final_body=None, raw=None, on_start=None):
    """One request straight through ASGI: (status, body bytes)."""
    raw = raw if raw is not None else json.dumps(body).encode() if body is not None else b""
    scope = {"type": "http", "method": method, "path": path, "headers": [(k.lower().encode(), v.encode()) for k, v in headers]
             + [(b"content-type", b"application/json")], "query_string": b"", "http_version": "1.1",
             "scheme": "http", "server": ("test", 80), "client": ("test", 1), "root_path": ""}
    sent, parts = {}, []
    messages = [{"type": "http.request", "body": raw[:5], "more_body": True},  # the body in two parts
                {"type": "http.request", "body": raw[5:], "more_body": False}]

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            sent["status"] = message["status"]
            if on_start:
                on_start()
        else:
            if not message.get("more_body") and on_final_body:
                on_final_body()
            parts.append(message.get("body", b""))

    asyncio.run(app(scope, receive, send))
    return sent["status"], b"".join(parts)


def events(folder):
    return [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines() if line]


def tool_body(query, rollout="r1", **extra):
    return {"arguments": json.dumps({"query": query, **extra}), "call_id": "c1", "id": rollout}


def test_tool_event(tmp_path):
    app = make_app(tmp_path)
    assert call(app, "/search", tool_body("revenue"))[0] == 200
    (event,) = events(tmp_path)
    assert {k: event[k] for k in ("event", "rollout_id", "tool", "arguments", "status", "http_status", "error",
                                  "output_chars", "call_id")} == \
        {"event": "tool", "rollout_id": "r1", "tool": "search", "arguments": {"query": "revenue"}, "status": "ok",
         "http_status": 200, "error": None, "output_chars": 10, "call_id": "c1"}
    assert event["started_at"] <= event["ended_at"] and event["ended_at"].endswith("Z")


def test_only_matching_routes_are_logged(tmp_path):
    app = make_app(tmp_path)
    assert call(app, "/health", method="GET")[0] == 200
    assert not list(tmp_path.glob("*.jsonl"))


def test_logged_before_the_response_completes(tmp_path):
    app = make_app(tmp_path)
    seen = []
    call(app, "/search", tool_body("q"), on_final_body=lambda: seen.append(len(events(tmp_path))))
    assert seen == [1]


def test_logged_before_the_status_line_goes_out(tmp_path):
    # a server writes the status line as soon as it gets it: a client that saw "200" saw the call
    # answered, so the event must be in the log by then
    app = make_app(tmp_path)
    seen = []
    assert call(app, "/search", tool_body("q"), on_start=lambda: seen.append(len(events(tmp_path))))[0] == 200
    assert call(app, "/grade", {"id": "r1", "item": {"id": "s1"}, "model_sample": "42"},
                on_start=lambda: seen.append(len(events(tmp_path))))[0] == 200
    assert seen == [1, 2]


def test_lines_never_straddle_a_page(tmp_path, con):
    # a kill -9 can stop a write between two pages of the file (never inside one): a line that fits
    # in a page starts on a new page when it would straddle one, after blank lines
    from mmap import PAGESIZE as PAGE

    log = EventLog(tmp_path)
    for i in range(60):
        assert log.write({"event": "tool", "rollout_id": f"r{i}", "tool": "search", "arguments": {"q": "x" * (37 * i)},
                          "started_at": "2024-01-01T00:00:00Z", "ended_at": "2024-01-01T00:00:01Z"})
    log.close()
    (path,) = tmp_path.glob("*.jsonl")
    data, offset, straddled, lines = path.read_bytes(), 0, [], 0
    for line in data.split(b"\n")[:-1]:
        if line:
            lines += 1
            if offset // PAGE != (offset + len(line)) // PAGE and len(line) + 1 <= PAGE:
                straddled.append(offset)
        offset += len(line) + 1
    assert lines == 60 and straddled == [] and b"\n\n" in data
    rl.ingest(con, tmp_path)
    assert rl.rejects(con).empty and con.execute("SELECT count(*) FROM tool_calls").fetchone()[0] == 60


def test_rollout_id_header_and_credentials_never_logged(tmp_path):
    app = make_app(tmp_path, rollout_id_header="X-Rollout-Id")
    call(app, "/search", tool_body("q", rollout="body-id", api_key="sk-live-123", auth={"token": "t0k"}),
         headers=[("X-Rollout-Id", "hdr-id"), ("Authorization", "Bearer sk-secret-999")])
    (event,) = events(tmp_path)
    assert event["rollout_id"] == "hdr-id"
    # a secret key's whole value goes, whatever it holds ("auth" may hold a "pass" no rule names)
    assert event["arguments"] == {"query": "q", "api_key": REDACTED, "auth": REDACTED}
    text = "".join(f.read_text() for f in tmp_path.glob("*.jsonl"))
    assert "sk-secret-999" not in text and "sk-live-123" not in text and "t0k" not in text
    with pytest.raises(ValueError, match="credential header"):
        CaptureMiddleware(None, tmp_path, rollout_id_header="Authorization")


def test_calls_answered_401_or_403_are_not_logged(tmp_path, con):
    log = EventLog(tmp_path)
    app = make_app(log)
    call(app, "/grade", {"id": "r1", "item": {"id": "s1"}, "model_sample": "42"})
    # an unauthenticated client's events would otherwise land in the log (and clobber rollouts)
    assert call(app, "/guarded", tool_body("inject", rollout="r1"))[0] == 401
    assert call(app, "/guarded", tool_body("inject", rollout="r1"), headers=[("Authorization", "Bearer bad")])[0] == 401
    assert call(app, "/guarded", tool_body("inject", rollout="r1"),
                headers=[("Authorization", "Bearer tok"), ("X-Role", "guest")])[0] == 403
    assert call(app, "/guarded", tool_body("ok", rollout="r1"), headers=[("Authorization", "Bearer tok")])[0] == 200
    assert [(e["event"], e.get("tool"), e["http_status"]) for e in events(tmp_path)] == \
        [("grade", None, 200), ("tool", "guarded", 200)]
    assert (log.stats()["events"], log.stats()["unauthenticated"]) == (2, 3)
    rl.ingest(con, tmp_path)
    assert con.execute("SELECT rollout_id, n_tool_calls FROM rollouts").fetchall() == [("r1", 1)]


def test_a_lone_surrogate_in_the_arguments_is_still_logged(tmp_path, con):
    log = EventLog(tmp_path)
    raw = b'{"arguments": "{\\"query\\": \\"a\\\\ud800b\\"}", "call_id": "c1", "id": "r1"}'
    assert json.loads(json.loads(raw)["arguments"]) == {"query": "a\ud800b"}  # valid JSON, not valid UTF-8
    assert call(make_app(log), "/search", raw=raw)[0] == 200
    assert log.stats()["failures"] == 0
    assert [e["arguments"] for e in events(tmp_path)] == [{"query": "a?b"}]
    rl.ingest(con, tmp_path)
    assert rl.rejects(con).empty


def test_log_files_are_owner_only(tmp_path):
    old = os.umask(0)
    try:
        call(make_app(tmp_path), "/search", tool_body("q"))
    finally:
        os.umask(old)
    (path,) = tmp_path.glob("*.jsonl")
    assert path.stat().st_mode & 0o777 == 0o600


def test_failures_and_their_outcome_after_ingest(tmp_path, con):
    app = make_app(tmp_path / "logs", run="r")
    assert call(app, "/search", tool_body("down", rollout="infra"))[0] == 503
    assert call(app, "/search", tool_body("bad", rollout="model"))[0] == 400
    with pytest.raises(RuntimeError, match="index corrupted"):
        call(app, "/search", tool_body("crash", rollout="crash"))
    for rollout in ("infra", "model", "crash"):
        call(app, "/grade", {"id": rollout, "item": {"id": "s1"}, "model_sample": "42"})
    by_rollout = {e["rollout_id"]: e for e in events(tmp_path / "logs") if e["event"] == "tool"}
    assert by_rollout["infra"]["error"] == "HTTP 503: tool backend unavailable"
    assert by_rollout["crash"]["http_status"] == 500 and by_rollout["crash"]["error"] == "RuntimeError: index corrupted"
    rl.ingest(con, tmp_path / "logs")
    assert rl.rejects(con).empty
    status = dict(con.execute("SELECT rollout_id, status FROM rollouts").fetchall())
    assert status == {"infra": "infra_error", "model": "model_error", "crash": "infra_error"}


def test_grade_event(tmp_path, con):
    app = make_app(tmp_path, run="step-3", step=3)
    call(app, "/search", tool_body("q", rollout="r1"))
    call(app, "/grade", {"id": "r1", "item": {"id": "fin-7", "reference_answer": "$3M"}, "model_sample": "$3M"})
    call(app, "/grade", {"id": "r2", "item": {"id": "fin-8"}, "model_sample": "silent"})
    grades = [e for e in events(tmp_path) if e["event"] == "grade"]
    assert {k: grades[0][k] for k in ("rollout_id", "run", "step", "sample_id", "final_answer", "score", "grades",
                                      "http_status", "error")} == \
        {"rollout_id": "r1", "run": "step-3", "step": 3, "sample_id": "fin-7", "final_answer": "$3M", "score": 0.5,
         "grades": {"exact": 0.0, "judge": 1.0}, "http_status": 200, "error": None}
    assert grades[0]["grader_latency_s"] >= 0
    assert grades[1]["error"] == "the grader's response carried no score"
    rl.ingest(con, tmp_path)
    assert rl.rejects(con).empty
    rows = con.execute("SELECT rollout_id, status, score, n_tool_calls FROM rollouts ORDER BY 1").fetchall()
    assert rows == [("r1", "ok", 0.5, 1), ("r2", "infra_error", None, 0)]
    latency = con.execute("SELECT min(latency_s) FROM grades WHERE rollout_id = 'r1'").fetchone()[0]
    assert latency == pytest.approx(grades[0]["grader_latency_s"])


def test_rotation_keeps_whole_lines(tmp_path):
    log = EventLog(tmp_path, max_bytes=2000)
    app = make_app(log)
    for i in range(40):
        call(app, "/search", tool_body(f"query {i}", rollout=f"r{i}"))
    files = sorted(tmp_path.glob("*.jsonl"))
    assert len(files) > 3 and all(f.stat().st_size <= 2000 for f in files)
    assert [e["rollout_id"] for e in events(tmp_path)] == [f"r{i}" for i in range(40)]
    assert log.stats()["events"] == 40 and log.stats()["files"] == [str(f) for f in files]


def test_a_log_that_cannot_be_written_never_breaks_the_endpoint(tmp_path, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    log = EventLog(blocker / "logs")
    app = make_app(log)
    with caplog.at_level(logging.WARNING, logger="rolloutlab.capture"):
        status, body = call(app, "/search", tool_body("q"))
        call(app, "/search", tool_body("q"))
    assert status == 200 and json.loads(body)["output"] == "0123456789"
    assert log.stats()["failures"] == 2 and log.stats()["events"] == 0
    assert len(caplog.records) == 1 and "not-a-folder" in caplog.records[0].getMessage()


def test_decorators(tmp_path, con):
    @captured_tool(tmp_path, tool="lookup")
    def lookup(rollout_id, path):
        if path == "missing":
            raise KeyError(path)
        return {"output": "abcd"}

    @captured_tool(tmp_path)
    async def fetch(rollout_id, url, password):
        return "x" * 7

    @captured_grader(tmp_path, run="dec")
    def grader(rollout_id, item, model_sample):
        return 1.0 if model_sample == item["reference_answer"] else 0.0

    assert lookup(rollout_id="r1", path="a") == {"output": "abcd"}
    with pytest.raises(KeyError):
        lookup(rollout_id="r1", path="missing")
    assert asyncio.run(fetch(rollout_id="r1", url="u", password="hunter2")) == "x" * 7
    assert grader(rollout_id="r1", item={"id": "s1", "reference_answer": "7"}, model_sample="7") == 1.0
    tools = [e for e in events(tmp_path) if e["event"] == "tool"]
    assert [(e["tool"], e["arguments"], e["status"], e["output_chars"]) for e in tools] == [
        ("lookup", {"path": "a"}, "ok", 4), ("lookup", {"path": "missing"}, "error", None),
        ("fetch", {"url": "u", "password": REDACTED}, "ok", 7)]
    assert tools[1]["error"] == "KeyError: 'missing'"
    rl.ingest(con, tmp_path)
    assert rl.rejects(con).empty
    assert con.execute("SELECT run_id, sample_id, score, n_tool_calls, status FROM rollouts").fetchall() == \
        [("dec", "s1", 1.0, 3, "model_error")]


# ---- the graders of other platforms (issue 36) ---------------------------------------------------

class LambdaContext:
    """What AWS Lambda hands a Python handler (the attributes capture reads)."""
    aws_request_id = "req-1"
    function_name = "nova-reward"


def bedrock_sample(rollout, sample, answer, **meta):
    """One sample of a reward Lambda's event, as the Bedrock user guide documents it."""
    return {"id": rollout, "messages": [{"role": "user", "content": f"question {sample}"},
                                        {"role": "assistant", "content": answer}],
            "metadata": {"reference_answer": {"answer": "4"}, "sample_id": sample, **meta}}


def test_a_bedrock_reward_lambda_logs_every_sample_of_a_batch(tmp_path, con):
    from rolloutlab.capture import captured_lambda_reward

    @captured_lambda_reward(tmp_path / "logs", run="nova-job")
    def lambda_handler(event, context):
        if any(s["messages"][-1]["content"] == "boom" for s in event):
            raise RuntimeError("grader backend timed out")
        out = []
        for s in event:
            if s["id"] == "r-skipped":
                continue  # the function forgot one sample
            right = s["messages"][-1]["content"] == "4"
            out.append({"id": s["id"], "aggregate_reward_score": 1.0 if right else -0.5,
                        "metrics_list": [{"name": "accuracy", "value": float(right), "type": "Reward"},
                                         {"name": "length", "value": 1.0, "type": "Metric"}]})
        return out

    result = lambda_handler([bedrock_sample("r-1", "q1", "4"), bedrock_sample("r-2", "q1", "5"),
                             bedrock_sample("r-skipped", "q2", "4")], LambdaContext())
    assert [r["id"] for r in result] == ["r-1", "r-2"]  # the handler's answer, untouched
    with pytest.raises(RuntimeError):
        lambda_handler([bedrock_sample("r-3", "q2", "boom"), bedrock_sample("r-4", "q3", "4")], LambdaContext())
    logged = events(tmp_path / "logs")
    assert [e["rollout_id"] for e in logged] == ["r-1", "r-2", "r-skipped", "r-3", "r-4"]
    assert {e["invocation"] for e in logged} == {"req-1"} and [e["batch"] for e in logged] == [3, 3, 3, 2, 2]
    assert logged[0]["grades"] == {"accuracy": 1.0, "length": 1.0} and logged[0]["final_answer"] == "4"
    assert logged[0]["grader_latency_s"] == logged[1]["grader_latency_s"]  # one call, one latency
    rl.ingest(con, tmp_path / "logs")
    rows = dict(((r[0]), r[1:]) for r in con.execute(
        "SELECT rollout_id, run_id, sample_id, status, score FROM rollouts").fetchall())
    assert rows == {"r-1": ("nova-job", "q1", "ok", 1.0), "r-2": ("nova-job", "q1", "ok", -0.5),
                    "r-skipped": ("nova-job", "q2", "infra_error", None),
                    "r-3": ("nova-job", "q2", "infra_error", None), "r-4": ("nova-job", "q3", "infra_error", None)}
    errors = dict(con.execute("SELECT rollout_id, error FROM grades WHERE score IS NULL").fetchall())
    assert "returned no result for this sample" in errors["r-skipped"] and "timed out" in errors["r-4"]
    assert con.execute("SELECT attempt FROM rollouts WHERE rollout_id = 'r-2'").fetchone() == (1,)  # 2nd at q1


def test_the_lambda_reads_awss_own_sample_shapes(tmp_path, con):
    """AWS's sample reward Lambdas (amazon-bedrock-samples gsm8k_rew_func.py) answer with
    reward_components and take the sample id from task_id; the console's test sends one object."""
    from rolloutlab.capture import captured_lambda_reward

    @captured_lambda_reward(tmp_path / "logs", run="j")
    def lambda_handler(event, context):
        samples = event if isinstance(event, list) else [event]
        return [{"id": s.get("id", "x"), "aggregate_reward_score": 0.25,
                 "reward_components": {"format": 0.5, "correct": 0.0}} for s in samples]

    lambda_handler([{"id": "a", "messages": [{"role": "user", "content": "q"},
                                             {"role": "assistant", "content": [{"type": "text", "text": "12"}]}],
                     "metadata": {"task_id": "gsm8k-7"}}], None)
    lambda_handler({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "3"}],
                    "reference_answer": "3"}, None)
    first, second = events(tmp_path / "logs")
    assert (first["sample_id"], first["grades"], first["final_answer"]) == ("gsm8k-7", {"format": 0.5, "correct": 0.0}, "12")
    assert second["rollout_id"].startswith("lambda-") and second["sample_id"].startswith("prompt:")
    assert second["error"] == "the reward function returned no result for this sample"  # its id was not echoed


def gemini_request(example, text, step=3, job=123456789):
    """A Cloud Run reward request as google-genai's CloudRunRewardScorer documents it."""
    return {"example": example, "response": {"parts": [{"text": text}]},
            "metadata": {"step": step, "tuning_job_id": job}}


async def reward_service(request):
    body = await request.json()
    answer = body["response"]["parts"][0]["text"]
    if answer == "crash":
        return PlainTextResponse("boom", status_code=500)
    if answer == "nan":
        return JSONResponse({"reward": None})
    reward = {"391": 1.0, "390": -1.0}.get(answer, 3.0)  # 3.0: outside [-1, 1], clipped by Gemini
    return JSONResponse({"reward": reward, "user_requested_aux_info": "checked"})


def test_a_gemini_cloud_run_reward_service(tmp_path, con):
    """The service hosting a reward for Gemini RL tuning, with the middleware; its requests carry
    a line that `--to gemini-rl` wrote (validated by google-genai's own type), so the sample ids
    of the logged rollouts are the curated samples'."""
    from rolloutlab.capture import gemini_reward_middleware

    example = {"systemInstruction": {"role": "system", "parts": [{"text": "Answer with a number."}]},
               "contents": [{"role": "user", "parts": [{"text": "What is 17 * 23?"}]}],
               "references": {"reference_answer": "391", "sample_id": "q17"}}
    types = pytest.importorskip("google.genai.types")
    types.ReinforcementTuningExample.model_validate(example)
    app = gemini_reward_middleware(Starlette(routes=[Route("/", reward_service, methods=["POST"]),
                                                     Route("/health", health)]), tmp_path / "logs")
    answers = [("391", 3), ("390", 3), ("400", 3), ("crash", 3), ("nan", 4)]
    statuses = [call(app, "/", gemini_request(example, a, step=s))[0] for a, s in answers]
    assert statuses == [200, 200, 200, 500, 200]
    assert call(app, "/health", method="GET")[0] == 200
    logged = events(tmp_path / "logs")
    assert len(logged) == 5 and len({e["rollout_id"] for e in logged}) == 5  # a rollout per request
    assert [e["score"] for e in logged] == [1.0, -1.0, 1.0, None, None]
    assert logged[2]["reward_returned"] == 3.0 and logged[0]["final_answer"] == "391"
    assert {e["run"] for e in logged} == {"gemini-123456789"} and [e["step"] for e in logged] == [3, 3, 3, 3, 4]
    rl.ingest(con, tmp_path / "logs")
    rows = con.execute("SELECT r.run_id, r.sample_id, r.status, r.score FROM rollouts r "
                       "ORDER BY r.started_at NULLS LAST, r.ended_at").fetchall()
    assert [r[1] for r in rows] == ["q17"] * 5
    assert [(r[2], r[3]) for r in rows] == [("ok", 1.0), ("ok", -1.0), ("ok", 1.0), ("infra_error", None),
                                            ("infra_error", None)]
    assert sorted({r[0] for r in rows}) == ["gemini-123456789-step3", "gemini-123456789-step4"]
    # the guide's spelling of the job id (tuningJobId) names the run the same way
    call(app, "/", {**gemini_request(example, "391"), "metadata": {"step": 5, "tuningJobId": 123456789}})
    assert events(tmp_path / "logs")[-1]["run"] == "gemini-123456789"


def test_the_capacity_plan_counts_a_batched_grader_call_once(tmp_path, con):
    """Issue 36: the capacity plan reads the graders too — a Lambda invocation grading 4 samples
    is one call in flight, Cloud Run requests one each."""
    from rolloutlab.capture import EventLog, captured_lambda_reward

    log = EventLog(tmp_path / "logs", name="reward")

    @captured_lambda_reward(log, run="nova")
    def lambda_handler(event, context):
        time.sleep(0.05)
        return [{"id": s["id"], "aggregate_reward_score": 1.0} for s in event]

    import threading
    import time

    threads = [threading.Thread(target=lambda_handler, args=([bedrock_sample(f"r{b}-{i}", f"q{i}", "4")
                                                               for i in range(4)], None)) for b in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rl.ingest(con, tmp_path / "logs")
    plan = rl.capacity(con, "nova").set_index("tool")
    grader = plan.loc["(grader)"]
    assert grader.calls == 2 and grader.calls_per_rollout == pytest.approx(2 / 8)  # two invocations of four
    assert grader.peak_calls_in_flight == 2 and grader.latency_p50 >= 0.05

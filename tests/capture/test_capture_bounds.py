"""Capture holds a bounded part of each request: huge bodies stream through, events stay small and load."""
import json
import subprocess
import sys
import textwrap

import rolloutlab as rl
from rolloutlab import config
from rolloutlab.capture import CaptureMiddleware

from test_capture import call, events, make_app

# A 150 MB tool call through the middleware, in a fresh process so that its peak resident size is
# what this request cost: the endpoint counts the bytes as they arrive (it never holds the body).
BIG_REQUEST = textwrap.dedent('''
    import asyncio, json, sys
    from rolloutlab.capture import CaptureMiddleware

    async def endpoint(scope, receive, send):
        n = 0
        while True:
            message = await receive()
            n += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = json.dumps({"output": f"read {n} bytes"}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    app = CaptureMiddleware(endpoint, sys.argv[1], tools=["/search"])
    chunk = b"x" * 65536
    n_chunks = 150 * 1024 * 1024 // len(chunk)
    head = b'{"arguments": "{\\\\"api_key\\\\": \\\\"sk-abc123\\\\", \\\\"query\\\\": \\\\"' 
    tail = b'\\\\"}", "call_id": "c9", "id": "r-big"}'
    parts = [head] + [chunk] * n_chunks + [tail]
    total = sum(map(len, parts))

    async def receive():
        i = receive.i
        receive.i += 1
        return {"type": "http.request", "body": parts[i], "more_body": i + 1 < len(parts)}
    receive.i = 0
    answer = {}

    async def send(message):
        if message["type"] == "http.response.body":
            answer["body"] = message["body"]

    scope = {"type": "http", "method": "POST", "path": "/search", "headers": [], "query_string": b""}
    def status(field):  # kB; not ru_maxrss, which keeps the peak of the process before exec
        return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(field))

    with open("/proc/self/clear_refs", "w") as fh:  # the peak so far (imports) reset to now
        fh.write("5")
    before = status("VmRSS:")
    asyncio.run(app(scope, receive, send))
    after = status("VmHWM:")
    print(json.dumps({"grown_kib": after - before, "total": total, "answer": answer["body"].decode()}))
''')


def test_a_150_mb_request_streams_through_and_logs_a_small_event(tmp_path, con):
    logs = tmp_path / "logs"
    done = subprocess.run([sys.executable, "-c", BIG_REQUEST, str(logs)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["answer"] == json.dumps({"output": f"read {result['total']} bytes"})
    assert result["grown_kib"] < 60 * 1024, result  # today: ~770 MB (the body held, joined, parsed)
    (path,) = logs.glob("*.jsonl")
    line = path.read_bytes()
    assert len(line) < 1024 * 1024 and line.count(b"\n") == 1
    (event,) = events(logs)
    assert event["rollout_id"] == "r-big" and event["call_id"] == "c9"  # found after the huge arguments
    args = event["arguments"]
    assert args["_truncated"] is True and args["request_bytes"] == result["total"]
    assert len(args["head"]) == config.CAPTURE_ARGUMENTS_CHARS and "sk-abc123" not in line.decode()
    assert event["output_chars"] == len(f"read {result['total']} bytes")
    rl.ingest(con, logs)
    assert rl.rejects(con).empty
    assert con.execute("SELECT rollout_id, n_tool_calls FROM rollouts").fetchall() == [("r-big", 1)]


def test_long_arguments_are_cut_with_a_marker(tmp_path, con):
    app = make_app(tmp_path / "logs")
    query = "revenue " * 20_000  # 160,000 characters: the body is held whole, the arguments cut
    body = {"arguments": json.dumps({"token": "t0k3n-x", "query": query}), "call_id": "c1", "id": "r1"}
    assert call(app, "/search", body)[0] == 200
    (event,) = events(tmp_path / "logs")
    sent = json.dumps({"token": "t0k3n-x", "query": query}, separators=(",", ":"))  # "chars": what was sent
    logged = json.dumps({"token": "[redacted]", "query": query}, separators=(",", ":"))
    assert event["arguments"] == {"_truncated": True, "chars": len(sent), "head": logged[:config.CAPTURE_ARGUMENTS_CHARS]}
    assert event["output_chars"] == 10
    rl.ingest(con, tmp_path / "logs")
    assert rl.rejects(con).empty


def test_long_final_answers_are_cut_with_a_marker(tmp_path):
    app = make_app(tmp_path)
    answer = "7" * (config.CAPTURE_ANSWER_CHARS + 5)
    call(app, "/grade", {"id": "r1", "item": {"id": "s1"}, "model_sample": answer})
    (event,) = events(tmp_path)
    assert event["final_answer"] == "7" * config.CAPTURE_ANSWER_CHARS + f" [truncated: {len(answer)} chars]"


def test_a_grade_request_past_the_hold_keeps_its_ids_and_the_answers_head(tmp_path, con):
    app = make_app(tmp_path / "logs", run="big")
    answer = "9" * (config.CAPTURE_REQUEST_HOLD_BYTES + 10)
    # the item (and its id) first, the rollout id after the huge answer
    raw = json.dumps({"item": {"id": "s-7", "reference_answer": "9"}, "model_sample": answer, "id": "r-late"})
    status, _ = call(app, "/grade", raw=raw.encode())
    assert status == 200
    (event,) = events(tmp_path / "logs")
    assert (event["rollout_id"], event["sample_id"], event["score"]) == ("r-late", "s-7", 0.5)
    assert event["final_answer"] == "9" * config.CAPTURE_ANSWER_CHARS + f" [truncated: request of {len(raw)} bytes]"
    rl.ingest(con, tmp_path / "logs")
    assert rl.rejects(con).empty


def test_the_rollout_id_of_a_nested_item_is_not_taken_for_the_rollouts(tmp_path):
    app = make_app(tmp_path)
    answer = "9" * (config.CAPTURE_REQUEST_HOLD_BYTES + 10)
    raw = json.dumps({"item": {"id": "s-7"}, "model_sample": answer}).encode()  # no rollout id at all
    call(app, "/grade", raw=raw)
    (event,) = events(tmp_path)
    assert event["rollout_id"] is None and event["sample_id"] == "s-7"


def test_ids_after_a_huge_answer_are_read_by_their_place(tmp_path):
    app = make_app(tmp_path)
    answer = "9" * (config.CAPTURE_REQUEST_HOLD_BYTES + 10)
    for tail in ({"id": "r-1", "item": {"id": "s-9"}},  # both after the answer
                 {"meta": {"id": "not-the-rollout"}, "item": {"note": "x", "id": "s-9"}}):  # nested ids only
        call(app, "/grade", raw=json.dumps({"model_sample": answer, **tail}).encode())
    assert [(e["rollout_id"], e["sample_id"]) for e in events(tmp_path)] == [("r-1", "s-9"), (None, "s-9")]


def test_an_endpoint_that_does_not_read_the_body_still_gets_an_event_with_ids(tmp_path):
    async def early(scope, receive, send):  # answers before reading (e.g. a load shedder)
        await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": b"busy"})

    app = CaptureMiddleware(early, tmp_path, tools=["/search"])
    assert call(app, "/search", {"arguments": "{}", "id": "r1", "call_id": "c1"})[0] == 503
    (event,) = events(tmp_path)
    assert (event["rollout_id"], event["call_id"], event["error"]) == ("r1", "c1", "HTTP 503: busy")


def test_secret_objects_in_a_request_longer_than_the_hold_never_reach_the_log(tmp_path):
    # Past the hold the body is read as text: a secret key whose value is an object or an array
    # is still redacted whole (a small request's is, by key).
    args = {"credentials": {"username": "bob", "pass": "hunter2"}, "api_keys": ["AbCdEf123456"],
            "blob": "x" * (2 * 1024 * 1024)}
    app = make_app(tmp_path / "logs")
    assert call(app, "/search", {"arguments": json.dumps(args), "call_id": "c1", "id": "r1"})[0] == 200
    text = "".join(p.read_text() for p in (tmp_path / "logs").glob("*.jsonl"))
    assert "hunter2" not in text and "AbCdEf123456" not in text and "bob" not in text
    (event,) = events(tmp_path / "logs")
    assert event["arguments"]["_truncated"] is True and 'credentials' in event["arguments"]["head"]

"""What capture redacts: secret keys by pattern at any depth, JSON text, plain-text secrets, error bodies."""
import asyncio
import json

from fastapi import FastAPI
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from rolloutlab.capture import REDACTED, CaptureMiddleware, captured_tool, redact, redact_text

from test_capture import call, events, make_app, tool_body

JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0"
       ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
GHP = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
AKIA = "AKIAIOSFODNN7EXAMPLE"
SLACK = "xoxb-123456789012-abcdefghijkl"
SECRETS = ["hunter2-cs", "rt-98765", "gh-tok-1", "ak-55555", "aws-s3cr3t", "bearer-v", "x-api-v", JWT, GHP, AKIA,
           SLACK, "sk-abc123", "sk-proj-Zz9Yy8Xx7Ww6Vv5"]


def test_secret_keys_by_pattern_at_any_depth():
    args = {"client_secret": "hunter2-cs", "refresh_token": "rt-98765", "github_token": "gh-tok-1",
            "api-key": "ak-55555", "aws_secret_access_key": "aws-s3cr3t", "bearer": "bearer-v",
            "headers": [{"X-Api-Key": "x-api-v"}], "apiKey": "k1", "sessionId": "s1", "PASSWORD_HASH": "p1",
            "auth": {"user": "bob", "pass": "p2"},
            # not secrets: words, not substrings
            "keywords": ["revenue"], "author": "Ann", "max_tokens": 512, "tokenizer": "o200k", "query": "q"}
    assert redact(args) == {
        "client_secret": REDACTED, "refresh_token": REDACTED, "github_token": REDACTED, "api-key": REDACTED,
        "aws_secret_access_key": REDACTED, "bearer": REDACTED, "headers": [{"X-Api-Key": REDACTED}],
        "apiKey": REDACTED, "sessionId": REDACTED, "PASSWORD_HASH": REDACTED, "auth": REDACTED,
        "keywords": ["revenue"], "author": "Ann", "max_tokens": 512, "tokenizer": "o200k", "query": "q"}


def test_a_callers_exact_names_are_still_redacted():
    assert redact({"account_number": "12-34", "query": "q"}, ["Account_Number"]) == \
        {"account_number": REDACTED, "query": "q"}


def test_json_text_inside_a_string_is_parsed_redacted_and_kept_as_text():
    value = {"payload": json.dumps({"password": "pw-1", "q": "revenue", "deep": {"token": "t-2"}}), "n": "{not json"}
    out = redact(value)
    assert json.loads(out["payload"]) == {"password": REDACTED, "q": "revenue", "deep": {"token": REDACTED}}
    assert out["n"] == "{not json"
    assert redact({"payload": '{"q": "revenue"}'}) == {"payload": '{"q": "revenue"}'}  # unchanged: verbatim


def test_plain_text_secrets():
    assert redact_text("api_key=sk-abc123&q=revenue") == "api_key=[redacted]&q=revenue"
    assert redact_text(f"Authorization: Bearer {JWT}") == "Authorization: [redacted]"
    assert redact_text("curl -H 'X-Api-Key: abc9' 'https://x.test/?token=t0k3n&page=2'") == \
        "curl -H 'X-Api-Key: [redacted]' 'https://x.test/?token=[redacted]&page=2'"
    assert redact_text('{"password": "p w", "max_tokens": 5') == '{"password": "[redacted]", "max_tokens": 5'
    text = (f"use {GHP} or github_pat_11ABCDEFG0123456789_abcdefghij, {AKIA}, {SLACK}, {JWT}, "
            "sk-proj-Zz9Yy8Xx7Ww6Vv5, Basic dXNlcjpwYXNzd29yZA==, bearer abcdef123456.")
    assert redact_text(text) == ("use [redacted] or [redacted], [redacted], [redacted], [redacted], [redacted], "
                                 "Basic [redacted], bearer [redacted].")
    assert redact_text('password: "' + "p" * 5000 + '" and more') == 'password: "[redacted]" and more'
    assert redact_text('x token="abc def') == 'x token="[redacted]"'  # never closed: the rest goes
    # not secrets: left alone
    for text in ("Basic arithmetic", "bearer bonds", "scikit-learn sk-learn", "keywords: revenue, author: Ann",
                 "max_tokens=512", "the key insight"):
        assert redact_text(text) == text


async def echo(request):
    return JSONResponse({"output": (await request.json())["arguments"]})


def test_tool_arguments_sent_as_plain_text(tmp_path):
    app = Starlette(routes=[Route("/search", echo, methods=["POST"])],
                    middleware=[Middleware(CaptureMiddleware, log=tmp_path)])
    for args in ("api_key=sk-abc123&q=revenue", f"Authorization: Bearer {JWT}"):
        call(app, "/search", {"arguments": args, "call_id": "c1", "id": "r1"})
    assert [e["arguments"] for e in events(tmp_path)] == ["api_key=[redacted]&q=revenue", "Authorization: [redacted]"]


def test_secrets_in_every_shape_never_reach_the_log(tmp_path):
    app = make_app(tmp_path)
    nested = {"client_secret": "hunter2-cs", "refresh_token": "rt-98765", "opts": {"github_token": "gh-tok-1"},
              "api-key": "ak-55555", "aws_secret_access_key": "aws-s3cr3t", "bearer": "bearer-v",
              "headers": {"X-Api-Key": "x-api-v"},
              "note": f"{JWT} {GHP} {AKIA} {SLACK} sk-abc123 sk-proj-Zz9Yy8Xx7Ww6Vv5"}
    call(app, "/search", tool_body("q", **nested))
    text = "".join(f.read_text() for f in tmp_path.glob("*.jsonl"))
    assert [s for s in SECRETS if s in text] == []
    (event,) = events(tmp_path)
    assert event["arguments"]["query"] == "q" and event["arguments"]["headers"] == {"X-Api-Key": REDACTED}


class Lookup(BaseModel):
    limit: int


def test_error_bodies_are_redacted(tmp_path):
    api = FastAPI(middleware=[Middleware(CaptureMiddleware, log=tmp_path, tools=["/lookup"])])

    @api.post("/lookup")
    async def lookup(body: Lookup):
        return {"output": "x"}

    # FastAPI's 422 echoes the input in detail[...].input: here the whole body (a field is missing)
    status, raw = call(api, "/lookup", {"id": "r1", "api_key": "sk-live-42abc", "password": "pw-9", "q": "revenue"})
    assert status == 422 and b"sk-live-42abc" in raw and b"pw-9" in raw
    (event,) = events(tmp_path)
    assert event["http_status"] == 422 and event["error"].startswith("HTTP 422: ")
    assert "sk-live-42abc" not in event["error"] and "pw-9" not in event["error"]
    assert "Field required" in event["error"] and "revenue" in event["error"]  # the rest stays readable


async def plain_error(request):
    return PlainTextResponse(f"bad request: Authorization: Bearer {JWT} rejected", status_code=400)


def test_plain_text_error_bodies_are_redacted(tmp_path):
    app = Starlette(routes=[Route("/search", plain_error, methods=["POST"])],
                    middleware=[Middleware(CaptureMiddleware, log=tmp_path)])
    call(app, "/search", tool_body("q"))
    (event,) = events(tmp_path)
    assert event["error"] == "HTTP 400: bad request: Authorization: [redacted] rejected"


def test_final_answers_stay_verbatim_but_token_formats_are_masked(tmp_path):
    app = make_app(tmp_path)
    answer = f"key: 42; password=12 apples; revenue $3M; the env had {GHP} and Bearer {JWT}"
    call(app, "/grade", {"id": "r1", "item": {"id": "s1"}, "model_sample": answer})
    (event,) = events(tmp_path)
    assert event["final_answer"] == "key: 42; password=12 apples; revenue $3M; the env had [redacted] and Bearer [redacted]"


def test_decorators_redact_by_pattern(tmp_path):
    @captured_tool(tmp_path)
    async def fetch(rollout_id, url, client_secret, note):
        return "ok"

    asyncio.run(fetch(rollout_id="r1", url="https://x.test/?access_token=abc123", client_secret="cs-1",
                      note=f"key {AKIA}"))
    (event,) = events(tmp_path)
    assert event["arguments"] == {"url": "https://x.test/?access_token=[redacted]", "client_secret": REDACTED,
                                  "note": "key [redacted]"}


def test_passwords_in_urls_and_named_secret_values():
    got = redact({"dsn": "postgres://admin:S3cretPass@db:5432/app",
                  "env": [{"name": "DB_PASSWORD", "value": "hunter2"}, {"name": "HOME", "value": "/root"}]})
    assert got == {"dsn": f"postgres://admin:{REDACTED}@db:5432/app",
                   "env": [{"name": "DB_PASSWORD", "value": REDACTED}, {"name": "HOME", "value": "/root"}]}
    assert redact_text("see https://example.com/a and user:pw@ nothing else") == \
        "see https://example.com/a and user:pw@ nothing else"

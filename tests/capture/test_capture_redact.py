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


# --- training files: every provider's token format goes, ordinary text stays as written ---------

# Ordinary QA and agent prompts that use key, token, secret, password, auth, credential in their
# ordinary meaning (as a dataset's prompts and references do): not one character may change.
ORDINARY = [
    "Answer key: B",
    "Use the answer key: the correct option is C, then explain why A is wrong.",
    "What is the key: value pair that sets the timeout in this YAML file?",
    "In a relational database, what does a primary key: a unique identifier per row, guarantee?",
    "The key insight of the 2021 annual report is that revenue grew 12%. Summarise it.",
    "Which key: Enter or Escape closes the dialog in the settings window?",
    "Explain what a token is in natural language processing, e.g. token: 'the' in 'the cat'.",
    "How many tokens does GPT-4 use for the sentence 'Hello world'? token: 2 is wrong.",
    "Set max_tokens=512 and temperature=0.2, then ask the model for a haiku about autumn.",
    "The end-of-sequence token: <eos> marks where generation stops. Where does it appear?",
    "A token bucket refills at 10 tokens per second. How long until it holds 55 tokens?",
    "The secret ingredient: cinnamon. Which dessert in the menu uses it?",
    "Secret: practice every day. Which sentence in the essay states the author's main claim?",
    "What is Acme's trade secret policy: disclosed in note 14 or not at all?",
    "The Secret Garden was published in 1911. Who wrote it?",
    "Password: ******** is shown on the login page. Which field should the agent fill in next?",
    "Reset your password: click the link in the e-mail, then choose a new one with 12 characters.",
    "Password strength: how many bits of entropy has a random 8-character lowercase password?",
    "The password policy: at least 12 characters, one digit. Does 'summer' satisfy it?",
    "Our help desk says: forgot password? Contact IT at extension 4410.",
    "Auth: basic or OAuth 2.0 — which does the API reference recommend for server-to-server calls?",
    "The author: Ann Lee wrote chapter 3. Which chapter did the second author write?",
    "Which credential: a badge or a PIN, does the visitor policy require for the server room?",
    "Credentials are rotated every 90 days. How many rotations happen in a leap year?",
    "Call the search tool with query='annual revenue 2020' and top_k=5, then read the first result.",
    "List the files in /data/reports/2021 and open the one whose name contains 'key_metrics'.",
    "The API returned {\"error\": \"invalid_token\", \"status\": 401}. What should the agent do next?",
    "Given the JSON {\"key\": \"region\", \"value\": \"EMEA\"}, which region is filtered?",
    "What does the header 'Authorization' carry in an HTTP request? Answer in one sentence.",
    "Explain bearer bonds in one paragraph for a finance student.",
    "Basic arithmetic: what is 17 times 23?",
    "Use scikit-learn (sk-learn) to fit a logistic regression on the iris data set.",
    "In the ticket, the user wrote: 'my key: the blue one, does not open room 204'. Which room?",
    "The lock uses a 4-digit code; key: 1234 is the factory default. Why is it unsafe?",
    "Keyword search: revenue, EBITDA, 'free cash flow'. Which appears most often in the filing?",
    "Translate 'the key to success is patience' into French.",
    "What is the SHA256 hash function's output size in bits? key: 256 or 512?",
    "Name the tokenizer used by Llama 3 and its vocabulary size.",
    "ISO-8601 dates look like 2024-05-01. Convert 1 May 2024, key: ISO-8601, to US format.",
    "The session expired; session timeout: 30 minutes. When did the user last act if it expired at 10:45?",
    "What are the four ICAO phonetic words for A, B, C and D? (The answer key says Alpha, Bravo ...)",
    "Visit https://example.com/docs/auth for the authentication guide and summarise step 2.",
    "Compare token-based and cookie-based sessions in two sentences.",
    "The OTP is sent by SMS; otp: six digits. How many different codes are possible?",
]

# One planted credential per provider format (made up, shaped like the real thing), built from
# parts so that no scanner mistakes this file for a leak.
PLANTED = {
    "openai": "sk-" + "proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" + "T3BlbkFJ" + "q7W8e9R0t1Y2u3I4",
    "openai-legacy": "sk-" + "Zx8Cv7Bn6Mq5Wr4Et3Yu2Io1Pa0Sd9Fg8Hj7Kl6",
    "anthropic": "sk-" + "ant-api03-" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8L9z0X1c2V3b4N5m6Q7w8E9r0T1y2U3i4O5p6-AbCdEf",
    "huggingface": "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567",
    "google": "AI" + "za" + "SyD4b7Qm2Xc9Lp0Rt6Vn3Hk8Js1Wf5Ge2Yu",
    "google-oauth": "ya29" + ".a0AfH6SMBx7Kq2Lm9Np3Rs5Tv8Wx1Yz4Ab6Cd",
    "stripe-live": "sk_" + "live_" + "51HqLwKJd8Xy3Zb7Nc2Vm9Qp4Rt6Sw1Ae5",
    "stripe-restricted": "rk_" + "live_" + "51HqLwKJd8Xy3Zb7Nc2Vm9Qp4Rt6Sw1Ae5",
    "stripe-test": "sk_" + "test_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "stripe-webhook": "whsec_" + "Mq2Lp9Xr4Ts7Vw1Yz3Ab5Cd8Ef0Gh6Jk",
    "gitlab": "glpat-" + "x9Yz8Wv7Ut6Sr5Qp4On3M",
    "slack": "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "slack-app": "xapp-" + "1-A0123456789-1234567890123-abcdef0123456789",
    "slack-webhook": "https://hooks.slack.com/services/" + "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "aws": "AKIA" + "Q3EGRKZ7NBX4JH2M",
    "aws-temporary": "ASIA" + "Y6TNBWQ2XKD5LR8P",
    "github": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "github-oauth": "gho_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2",
    "github-fine-grained": "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF0123456789",
    "npm": "npm_" + "aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2",
    "pypi": "pypi-" + "AgEIcHlwaS5vcmcCJGE4ZjY3YjJjLTc5YWEtNDY0OC1hMzU0LWI2NzA2N2JmYjdiMwACJXsicGVybWlzc2lvbnMiOiAidXNlciJ9",
    "sendgrid": "SG." + "aB1cD2eF3gH4iJ5kL6mN7o" + "." + "pQ8rS9tU0vW1xY2zA3bC4dE5fG6hI7jK8lM9nO0pQ1r",
    "jwt": JWT,
    "private-key": "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq3\nx9Zk2LmQ\n-----END RSA PRIVATE KEY-----",
    "openssh-key": "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
}
# secrets known by where they stand: (the text, the secret in it)
PLANTED_PAIRS = {
    "password-pair": ("password=hunter2", "hunter2"),
    "api-key-pair": ("api_key: 9f8e7d6c5b4a39281706", "9f8e7d6c5b4a39281706"),
    "aws-secret-pair": ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE12",
                        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE12"),
    "url-password": ("postgres://admin:S3cretPass@db.internal:5432/app", "S3cretPass"),
}
PLANTED_TEXTS = {**{name: (s, s) for name, s in PLANTED.items()}, **PLANTED_PAIRS}


def test_ordinary_text_in_a_training_file_is_never_changed():
    from rolloutlab.capture import redact_training_text

    changed = [(text, redact_training_text(text)) for text in ORDINARY if redact_training_text(text) != text]
    assert changed == []


def test_every_providers_token_format_is_redacted_in_training_text():
    from rolloutlab.capture import redact_training_text

    for name, (planted, secret) in PLANTED_TEXTS.items():
        text = f"Call the billing API with {planted} and return the invoice total for March."
        out = redact_training_text(text)
        assert secret not in out and REDACTED in out, (name, out)
        assert secret not in redact_text(text), name  # capture's logs: the same formats
        assert out.startswith("Call the billing API with ") and out.endswith(" and return the invoice total for March."), \
            (name, out)

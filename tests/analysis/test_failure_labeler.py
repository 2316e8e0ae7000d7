"""The optional labeller: the team's own model behind an OpenAI-compatible endpoint, tested against
a small fake server on loopback (http.server in a thread). Off by default; its failures keep the
automatic labels."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import rolloutlab as rl
from rolloutlab import config
from rolloutlab.analysis import failure_modes as fm
from rolloutlab.analysis.failure_labeler import clean_label, endpoint_labeler, summary_text


class FakeModel:
    """An OpenAI-compatible /v1/chat/completions on 127.0.0.1 that records what it is sent and
    answers ``reply`` (a str: the content; bytes: the raw body) with ``status``."""

    def __init__(self):
        self.requests: list[dict] = []
        self.reply: object = "answers without reading the report"
        self.status = 200
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                fake.requests.append({"path": self.path, "headers": dict(self.headers),
                                      "body": json.loads(self.rfile.read(length))})
                if fake.status in (301, 302):
                    self.send_response(fake.status)
                    self.send_header("Location", "http://127.0.0.1:9/elsewhere")
                    self.end_headers()
                    return
                body = fake.reply if isinstance(fake.reply, bytes) else json.dumps(
                    {"id": "x", "object": "chat.completion", "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": fake.reply}, "finish_reason": "stop"}]}
                ).encode()
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    server = FakeModel()
    yield server
    server.close()


SUMMARY = {"mode": "F1", "kind": "model", "label": "answers a number no tool returned", "rollouts": 12,
           "features": [{"feature": "grounding=none_found", "words": "answers a value no tool returned",
                         "share_in_mode": 1.0, "share_in_other_failures": 0.1}],
           "examples": [{"rollout_id": "r1", "sequence": "search → cat", "final_answer": "$9.9M",
                         "error": "auth failed for api_key=sk-live-0123456789abcdefghij", "grounding": "x",
                         "reference": "y"}]}


def test_the_endpoint_is_asked_for_a_name_and_the_reply_is_the_label(fake):
    assert rl.endpoint_labeler is endpoint_labeler
    label = endpoint_labeler(fake.url, "team-model", api_key="secret-token", timeout=5)
    assert label(SUMMARY) == "answers without reading the report"
    (req,) = fake.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer secret-token"
    body = req["body"]
    assert body["model"] == "team-model" and body["temperature"] == 0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    sent = body["messages"][1]["content"]
    assert "answers a number no tool returned" in sent and "search → cat" in sent
    assert "sk-live-0123456789abcdefghij" not in sent  # secrets in logs never leave redacted


def test_settings_come_from_the_environment(fake, monkeypatch):
    monkeypatch.setenv(config.LABELER_URL_ENV_VAR, fake.url)
    monkeypatch.setenv(config.LABELER_MODEL_ENV_VAR, "from-env")
    monkeypatch.delenv(config.LABELER_KEY_ENV_VAR, raising=False)
    label = endpoint_labeler(timeout=5)
    assert label(SUMMARY) == "answers without reading the report"
    assert fake.requests[0]["body"]["model"] == "from-env" and "Authorization" not in fake.requests[0]["headers"]
    monkeypatch.delenv(config.LABELER_URL_ENV_VAR)
    with pytest.raises(ValueError, match=f"set \\${config.LABELER_URL_ENV_VAR}"):
        endpoint_labeler()
    monkeypatch.setenv(config.LABELER_URL_ENV_VAR, fake.url)
    monkeypatch.delenv(config.LABELER_MODEL_ENV_VAR)
    with pytest.raises(ValueError, match=f"set \\${config.LABELER_MODEL_ENV_VAR}"):
        endpoint_labeler()
    with pytest.raises(ValueError, match="http:// or https://"):
        endpoint_labeler("file:///etc/passwd", "m")


def test_bad_replies_are_errors_with_the_endpoint_named(fake):
    label = endpoint_labeler(fake.url, "m", timeout=5)
    fake.status = 500
    with pytest.raises(ValueError, match=r"/v1/chat/completions answered HTTP 500"):
        label(SUMMARY)
    fake.status, fake.reply = 200, b"not json"
    with pytest.raises(ValueError, match="something other than a chat completion"):
        label(SUMMARY)
    fake.reply = b"x" * (config.LABELER_MAX_RESPONSE_BYTES + 10)
    with pytest.raises(ValueError, match="more than"):
        label(SUMMARY)
    fake.reply = "   \n  "
    with pytest.raises(ValueError, match="no label"):
        label(SUMMARY)
    fake.status = 302  # a redirect would carry the key elsewhere: not followed
    with pytest.raises(ValueError, match="HTTP 302"):
        label(SUMMARY)
    dead = endpoint_labeler("http://user:pw@127.0.0.1:9/v1", "m", timeout=2)
    with pytest.raises(ValueError, match="could not be reached") as err:
        dead(SUMMARY)
    assert "pw" not in str(err.value)


def test_clean_label():
    assert clean_label('Label: "Right number, wrong unit."\nBecause the answer...') == "Right number, wrong unit"
    assert clean_label("gives\x1b[31m up\tafter  timeouts") == "gives [31m up after timeouts"
    long = clean_label("word " * 40)
    assert len(long) == config.LABELER_MAX_LABEL_CHARS and long.endswith("…")
    with pytest.raises(ValueError):
        clean_label(None)
    assert len(summary_text({"examples": ["x" * 10_000]})) < 6100


def test_modes_are_named_by_the_model_and_its_failure_keeps_the_automatic_labels(fake, load):
    records = []
    for i in range(12):
        timeouts = i % 2 == 0
        calls = ([{"tool": "search", "turn": t, "status": "error", "error": "timeout after 30s"} for t in range(3)]
                 if timeouts else [{"tool": "cat", "turn": 0}])
        records.append({"run": "r", "sample_id": f"s{i}", "score": 0.0, "tool_calls": calls,
                        "final_answer": "Sorry, I cannot answer." if timeouts else "$1.5M"})
    con = load(records)
    label = endpoint_labeler(fake.url, "m", timeout=5)
    named = fm.failure_modes(con, "r", n_boot=0, labeler=label)
    assert (named.label.str.startswith("answers without reading the report")).all()  # suffixed with the mode id
    assert len(fake.requests) == len(named)
    fake.status = 503
    kept = fm.failure_modes(con, "r", n_boot=0, labeler=label)
    assert (kept.label == kept.auto_label).all()
    assert kept.attrs["labeler_errors"][0].startswith("F1: ValueError: http://127.0.0.1:")
    assert "answered HTTP 503" in kept.attrs["labeler_errors"][0]
    plain = fm.failure_modes(con, "r", n_boot=0)  # off by default: no request
    assert len(fake.requests) == 2 * len(named) and "labeler_errors" not in plain.attrs

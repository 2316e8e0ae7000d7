"""Naming failure modes with the team's own model: an optional labeller for ``failure_modes`` /
``failure_modes_diff`` (``labeler=``), off by default and never needed for the modes themselves.

``endpoint_labeler()`` returns a callable that sends one mode's summary — its automatic label,
the features that set it apart, a few example rollouts (call sequence, final answer, error) —
to an OpenAI-compatible ``/chat/completions`` endpoint and returns the model's short name for
the behaviour. The endpoint and model come from the environment (``config.labeler_settings``:
``$ROLLOUTLAB_LABELER_URL``, ``$ROLLOUTLAB_LABELER_MODEL``, ``$ROLLOUTLAB_LABELER_API_KEY``) or
the arguments. The summary is redacted (``capture.redact``: secrets at any depth) and bounded
before it leaves; the reply is read up to ``LABELER_MAX_RESPONSE_BYTES``, redirects are not
followed (the key would go with them), and the label is one line of at most
``LABELER_MAX_LABEL_CHARS`` printable characters. Any failure raises: ``failures.fit`` then keeps
the automatic label and says why in ``attrs["labeler_errors"]``."""
from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Callable

from .. import config

SYSTEM = ("You name failure modes of a tool-using AI agent for the engineers who train it. You get one mode: the "
          "features that set its failing rollouts apart from the other failures and a few examples. Reply with one "
          "short phrase (at most 8 words) naming the behaviour a person would recognise, e.g. \"answers without "
          "reading the report\", \"right number, wrong unit\", \"retries search after timeouts, then gives up\". "
          "No quotes, no explanation.")
SUMMARY_CHARS = 6000  # of the summary's JSON text sent


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise urllib.error.HTTPError(req.full_url, code, f"redirect to {newurl} not followed", headers, fp)


def clean_label(text: object) -> str:
    """The model's reply as a label: its first non-empty line, without quotes, a "Label:" prefix or
    control characters, whitespace collapsed, at most LABELER_MAX_LABEL_CHARS. ValueError when
    nothing is left."""
    if not isinstance(text, str):
        raise ValueError(f"the reply's content is {type(text).__name__}, not text")
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = re.sub(r"[\x00-\x1f\x7f-\x9f]", " ", line)
    line = re.sub(r"^\s*(label|name|mode)\s*:\s*", "", line, flags=re.I)
    line = " ".join(line.split()).strip(" \"'`*“”‘’.")
    if not line:
        raise ValueError("the reply holds no label")
    limit = config.LABELER_MAX_LABEL_CHARS
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def summary_text(summary: dict) -> str:
    """The summary as the model reads it: redacted JSON, at most SUMMARY_CHARS characters."""
    from ..capture.redaction import redact

    text = json.dumps(redact(summary), ensure_ascii=False, default=str)
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS] + " …(cut)"


def endpoint_labeler(url: str | None = None, model: str | None = None, api_key: str | None = None,
                     timeout: float | None = None) -> Callable[[dict], str]:
    """A labeller asking the model at ``url`` (an OpenAI-compatible base URL such as
    ``http://127.0.0.1:8000/v1``; default ``$ROLLOUTLAB_LABELER_URL``) named ``model`` (default
    ``$ROLLOUTLAB_LABELER_MODEL``), with ``api_key`` as a bearer token when given (default
    ``$ROLLOUTLAB_LABELER_API_KEY``). ValueError when the URL or model is missing or the URL is
    not http(s)."""
    settings = config.labeler_settings()
    url, model = url or settings["url"], model or settings["model"]
    api_key = api_key if api_key is not None else settings["api_key"]
    timeout = config.LABELER_TIMEOUT_S if timeout is None else float(timeout)
    if not url:
        raise ValueError(f"no labeller endpoint: set ${config.LABELER_URL_ENV_VAR} to the base URL of an "
                         "OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1), or pass url=")
    if not model:
        raise ValueError(f"no labeller model: set ${config.LABELER_MODEL_ENV_VAR} to the model's name on {url}, "
                         "or pass model=")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"labeller URL {url!r}: give an http:// or https:// base URL (e.g. http://127.0.0.1:8000/v1)")
    endpoint = url.rstrip("/") + "/chat/completions"
    host = parts.hostname or ""
    shown = urllib.parse.urlunsplit((parts.scheme, host + (f":{parts.port}" if parts.port else ""),
                                     parts.path.rstrip("/") + "/chat/completions", "", ""))  # no user:password in messages
    opener = urllib.request.build_opener(_NoRedirect)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"

    def label(summary: dict) -> str:
        body = {"model": model, "temperature": 0, "max_tokens": 40,
                "messages": [{"role": "system", "content": SYSTEM},
                             {"role": "user", "content": summary_text(summary)}]}
        request = urllib.request.Request(endpoint, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with opener.open(request, timeout=timeout) as response:
                raw = response.read(config.LABELER_MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise ValueError(f"{shown} answered HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ValueError(f"{shown} could not be reached: {getattr(exc, 'reason', exc)}") from None
        if len(raw) > config.LABELER_MAX_RESPONSE_BYTES:
            raise ValueError(f"{shown} answered more than {config.LABELER_MAX_RESPONSE_BYTES:,} bytes")
        try:
            content = json.loads(raw)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ValueError(f"{shown} answered something other than a chat completion") from None
        return clean_label(content)

    label.endpoint = shown  # type: ignore[attr-defined]
    label.model = model  # type: ignore[attr-defined]
    return label

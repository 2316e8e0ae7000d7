"""Secret redaction (docs/security.md), used by the capture and by the training-file writer.

``redact``/``redact_text``: the value of every key that looks secret (``config.CAPTURE_REDACT_KEY_WORDS``
/ ``CAPTURE_REDACT_KEY_SUBSTRINGS``, and the caller's exact names) at any depth, also inside strings
that are JSON text; in other text, ``key=value`` / ``key: value`` pairs whose key looks secret and
the credential formats of the common providers (``TOKEN_FORMATS``). ``redact_training_text``: the
same formats but only pairs whose value looks like a credential, so that ordinary text ("Answer
key: B") is never changed. ``mask_tokens``: the credential formats only.
"""
from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from typing import Any, Iterable

from .. import config

REDACTED = "[redacted]"
_MAX_DEPTH = config.CAPTURE_REDACT_MAX_DEPTH
# --- redaction ---------------------------------------------------------------------------------

_SEPARATORS = re.compile(r"[_\-.\s]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_KEY_WORDS = frozenset(config.CAPTURE_REDACT_KEY_WORDS)
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_MAX_KEY = 64  # longer runs of key characters are not keys


@functools.lru_cache(maxsize=64)
def _lowered(names: tuple) -> frozenset:
    return frozenset(str(n).lower() for n in names)


def _exact(names: Iterable[str]) -> frozenset:
    """The caller's exact secret names, lower-case."""
    return _lowered(tuple(names))


def secret_key(name: str, exact: frozenset = frozenset()) -> bool:
    """Whether a key names a secret: one of its words (split at ``_ - .`` space and camelCase) is
    one of ``CAPTURE_REDACT_KEY_WORDS`` (or is the whole key, separators removed: ``session_id``),
    or the lower-cased key without separators contains one of ``CAPTURE_REDACT_KEY_SUBSTRINGS``,
    or it is one of ``exact`` (lower-case). Words, not substrings: ``keywords``, ``author`` and
    ``max_tokens`` are not secrets."""
    # keys repeat (every call has the same few); a long one is a request's, not worth keeping
    return _secret_key(name, exact) if len(name) <= _MAX_KEY else _secret_key.__wrapped__(name, exact)


@functools.lru_cache(maxsize=8192)
def _secret_key(name: str, exact: frozenset) -> bool:
    lowered = name.lower()
    if lowered in exact:
        return True
    squashed = _SEPARATORS.sub("", lowered)
    if squashed in _KEY_WORDS or any(s in squashed for s in config.CAPTURE_REDACT_KEY_SUBSTRINGS):
        return True
    return any(word.lower() in _KEY_WORDS for part in _SEPARATORS.split(name) for word in _CAMEL.split(part))


# Credential formats: (what the lower-cased text must contain one of, kind, pattern): text that
# holds none is not searched. The boundary before a match is checked in _masked. Each is a
# provider's documented prefix with the length of what follows (docs/security.md lists them).
_FORMATS = [
    (("-----begin",), "pem", re.compile(r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----.*?"
                                     r"(?:-----END[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S)),
    (("eyj",), "token", re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")),  # a JWT
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), "token", re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}")),  # GitHub
    (("github_pat_",), "token", re.compile(r"github_pat_[A-Za-z0-9_]{20,}")),
    (("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "gloas-"), "token",  # GitLab
     re.compile(r"gl(?:pat|dt|rt|ptt|cbt|oas)-[A-Za-z0-9_-]{20,}")),
    (("akia", "asia"), "token", re.compile(r"A[KS]IA[0-9A-Z]{16}(?![0-9A-Za-z])")),  # AWS access key ids
    (("xox", "xapp-"), "token", re.compile(r"xox[abeoprs]-[A-Za-z0-9-]{10,}|xapp-[0-9]+-[A-Za-z0-9-]{10,}")),  # Slack
    (("hooks.slack.com/",), "token", re.compile(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]+")),
    (("hf_",), "token", re.compile(r"hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9_])")),  # Hugging Face
    (("aiza",), "token", re.compile(r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])")),  # Google API keys
    (("ya29.",), "token", re.compile(r"ya29\.[0-9A-Za-z_-]{20,}")),  # Google OAuth access tokens
    (("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"), "token",  # Stripe
     re.compile(r"(?:[sr]k_(?:live|test)|whsec)_[0-9A-Za-z]{10,}")),
    (("npm_",), "token", re.compile(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])")),
    (("pypi-",), "token", re.compile(r"pypi-AgE[A-Za-z0-9_-]{40,}")),
    (("sg.",), "token", re.compile(r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}")),  # SendGrid
    (("dop_v1_", "doo_v1_", "dor_v1_"), "token", re.compile(r"do[opr]_v1_[a-f0-9]{64}")),  # DigitalOcean
    (("shpat_", "shpca_", "shppa_", "shpss_"), "token", re.compile(r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}")),  # Shopify
    (("gsk_", "r8_", "pplx-", "xai-", "lsv2_"), "token",  # Groq, Replicate, Perplexity, xAI, LangSmith
     re.compile(r"(?:gsk_[A-Za-z0-9]{40,}|r8_[A-Za-z0-9]{30,}|pplx-[A-Za-z0-9]{40,}|xai-[A-Za-z0-9]{60,}"
                r"|lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10})")),
    (("sk-",), "sk", re.compile(r"sk-[A-Za-z0-9_-]{6,}")),  # OpenAI (sk-proj-…), Anthropic (sk-ant-…), others
    (("bearer", "basic"), "scheme", re.compile(r"(?P<scheme>(?i:bearer|basic))[ \t]+(?P<credential>[A-Za-z0-9\-._~+/]+=*)")),
    # a password in a URL: postgres://admin:S3cret@db/...
    (("://",), "url", re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@\"']+:)(?P<password>[^@\s/\"']+)@")),
]
# the kinds of credential masked by pattern, for people (docs/security.md)
TOKEN_FORMATS = ("PEM private keys (also PGP key blocks)", "JWTs", "GitHub ghp_/gho_/ghu_/ghs_/ghr_/github_pat_",
                 "GitLab glpat-/gldt-/glrt-/glptt-/glcbt-/gloas-", "AWS AKIA…/ASIA… access key ids",
                 "Slack xox?-/xapp-, Slack webhook URLs", "Hugging Face hf_", "Google API keys AIza…",
                 "Google OAuth ya29.", "Stripe sk_live_/sk_test_/rk_live_/rk_test_/whsec_", "npm npm_",
                 "PyPI pypi-AgE…", "SendGrid SG.", "DigitalOcean dop_v1_/doo_v1_/dor_v1_",
                 "Shopify shpat_/shpca_/shppa_/shpss_", "Groq gsk_", "Replicate r8_", "Perplexity pplx-", "xAI xai-",
                 "LangSmith lsv2_", "OpenAI sk-/sk-proj-/sk-svcacct-/sk-admin-", "Anthropic sk-ant-",
                 "Bearer and Basic credentials", "passwords in URLs")


def _credential(match: re.Match) -> str | None:
    """The masked text of a ``Bearer``/``Basic`` match, or None when it is not a credential."""
    credential = match["credential"].rstrip(".")  # the end of a sentence is not the token's
    if match["scheme"].lower() == "basic":
        try:  # base64 of user:password, so that "Basic arithmetic" stays
            secret = b":" in base64.b64decode(credential, validate=True)
        except (binascii.Error, ValueError):
            secret = False
    else:  # random-looking: long, or with a digit ("bearer bonds" stays)
        secret = len(credential) >= 16 or (len(credential) >= 8 and any(c.isdigit() for c in credential))
    return f"{match['scheme']} {REDACTED}" + match["credential"][len(credential):] if secret else None


def _masked(text: str, kind: str, match: re.Match) -> str:
    start = match.start()
    if kind != "pem" and start and text[start - 1] in _WORD_CHARS:
        return match[0]  # inside a longer word ("task-…", "mask-…")
    if kind == "scheme":
        return _credential(match) or match[0]
    if kind == "url":
        return f"{match['head']}{REDACTED}@"
    if kind == "sk" and not any(c.isdigit() for c in match[0]):
        return match[0]  # sk-<random> has a digit somewhere: "sk-learning" stays
    return REDACTED


_ANY_FORMAT = re.compile("|".join(re.escape(lit) for literals, _, _ in _FORMATS for lit in literals))


def mask_tokens(text: str) -> str:
    """``text`` with well-known credential formats replaced (all that final answers get)."""
    lowered = text.lower()
    if _ANY_FORMAT.search(lowered) is None:  # most text: one scan
        return text
    for literals, kind, pattern in _FORMATS:
        if any(literal in lowered for literal in literals):
            text = pattern.sub(functools.partial(_masked, text, kind), text)
    return text


# after a secret key: its closing quote (also \" inside JSON text), ":" or "=", and the value:
# quoted, or up to a delimiter, with an auth scheme before it ("Authorization: Bearer abc")
# A quote never closed runs to the end of the text (all of it redacted).
_AFTER_KEY = re.compile(
    r"""\\?["']?[ \t]*[:=][ \t]*(?P<value>\\"(?:(?!\\").)*+(?:\\"|\Z)|"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\Z)"""
    r"""|'[^']*+(?:'|\Z)|(?:(?i:bearer|basic|token|digest)[ \t]+)?[^\s&,;"'<>{}\[\]()\\]+)""", re.S)


# after a secret key: a JSON object or array as its value (text a request longer than the hold
# left unparsed)
_TO_CONTAINER = re.compile(r"""\\?["']?[ \t]*:[ \t]*(?=[\[{])""")


def _container_end(text: str, at: int, escaped: bool = False) -> int:
    """Where the JSON object or array starting at ``at`` ends (strings skipped), else the text's end.
    ``escaped``: the JSON is itself inside a JSON string, its quotes written \\" (and theirs \\\\\\")."""
    quote = '\\"' if escaped else '"'
    inner = '\\\\\\"' if escaped else '\\"'
    depth, i, n = 0, at, len(text)
    while i < n:
        c = text[i]
        if text.startswith(quote, i):
            i += len(quote)
            while i < n and not text.startswith(quote, i):
                i += len(inner) if text.startswith(inner, i) else (2 if text[i] == "\\" and not escaped else 1)
            i += len(quote) - 1
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


@functools.lru_cache(maxsize=64)
def _hints(exact: frozenset) -> re.Pattern:
    """Lower-case text one of which every secret key contains."""
    words = sorted(set(_KEY_WORDS) | set(config.CAPTURE_REDACT_KEY_SUBSTRINGS) | exact, key=len, reverse=True)
    return re.compile("|".join(map(re.escape, words)))


def _redact_pairs(text: str, exact: frozenset, credential=None) -> str:
    """``text`` with the values of ``key=value`` / ``key: value`` pairs whose key looks secret
    replaced (with ``credential(key, value)``, only the values it says are credentials). Found
    from the words a secret key must contain, so most text costs one scan."""
    if not any(c in text for c in ":="):
        return text
    lowered = text.lower()
    out, last, seen = [], 0, 0
    for hit in _hints(exact).finditer(lowered):
        if hit.start() < seen:
            continue
        start, end = hit.start(), hit.end()
        while start > 0 and text[start - 1] in _KEY_CHARS and end - start <= _MAX_KEY:
            start -= 1
        while end < len(text) and text[end] in _KEY_CHARS and end - start <= _MAX_KEY:
            end += 1
        seen = end
        if end - start > _MAX_KEY or start < last or not secret_key(text[start:end], exact):
            continue
        box = None if credential else _TO_CONTAINER.match(text, end)
        if box is not None:  # "credentials": {...} / "api_keys": [...]: the whole container goes
            escaped = text.startswith('\\"', end)
            close = _container_end(text, box.end(), escaped=escaped)
            quote = '\\"' if escaped else '"'
            out.append(text[last:box.end()] + f"{quote}{REDACTED}{quote}")
            last = seen = close
            continue
        after = _AFTER_KEY.match(text, end)
        if after is None:
            continue
        value = after["value"]
        if credential is not None and not credential(text[start:end], value):
            continue
        quote = next((q for q in ('\\"', '"', "'") if value.startswith(q) and len(value) >= 2 * len(q)), "")
        out.append(text[last:after.start("value")] + f"{quote}{REDACTED}{quote}")
        last = seen = after.end()
    out.append(text[last:])
    return "".join(out)


def redact_text(text: str, names: Iterable[str] = ()) -> str:
    """``text`` with secret ``key=value`` / ``key: value`` pairs and credential formats replaced."""
    return mask_tokens(_redact_pairs(text, _exact(names)))


_SECRET_WORDS = tuple(config.CAPTURE_REDACT_KEY_SUBSTRINGS)
_QUOTES = "\"'\\"


def looks_like_credential(key: str, value: str) -> bool:
    """Whether the value of a ``key: value`` pair in ordinary text is a credential, not a word or a
    number: one token (no space), not a mask (``********``), with a letter and a digit or symbol.
    After a password-like key (``password``, ``secret``, ``api_key``: config's key substrings) 6
    characters do (``password=hunter2``); after ``key``, ``token`` or ``auth`` alone, which ordinary
    text uses ("Answer key: B", "token: <eos>", "primary key: id"), 10 with a letter and a digit."""
    value = value.strip(_QUOTES)
    if not value or any(c.isspace() for c in value) or len(set(value)) < 4:
        return False
    letter, digit = any(c.isalpha() for c in value), any(c.isdigit() for c in value)
    squashed = _SEPARATORS.sub("", key.lower())
    if any(word in squashed for word in _SECRET_WORDS):
        symbol = any(not c.isalnum() and c not in "-_." for c in value)
        return len(value) >= 6 and letter and (digit or symbol) or len(value) >= 12
    return len(value) >= 10 and letter and digit and len(set(value)) >= 6


def redact_training_text(text: str) -> str:
    """Text of a training file (a dataset's prompt or reference) with secrets replaced and nothing
    else changed: the credential formats (``mask_tokens``) and the values of ``key: value`` pairs
    whose key looks secret *and* whose value looks like a credential (``looks_like_credential``),
    so that "Answer key: B" or "the secret: practice" stay as written."""
    return mask_tokens(_redact_pairs(text, frozenset(), looks_like_credential))


def _walk(value: Any, exact: frozenset, budget: float, depth: int = 0) -> tuple[Any, int]:
    """(redacted copy, length of its compact JSON text, from below). Past ``budget`` characters of
    that text the rest is left out (strings cut, later items dropped): only a head is logged, so
    only a head is worth the work."""
    if depth > _MAX_DEPTH:
        return REDACTED, len(REDACTED) + 2
    if isinstance(value, dict):
        out, used = {}, 2
        # {"name": "DB_PASSWORD", "value": "..."}: the pair's name says the value is a secret
        named = next((value[k] for k in ("name", "key", "id") if isinstance(value.get(k), str)), None)
        secret_value = named is not None and secret_key(named, exact)
        for k, v in value.items():
            if used > budget:
                break
            key = mask_tokens(str(k))
            if secret_key(key, exact) or (secret_value and key in ("value", "secret", "data")):
                out[key], size = REDACTED, len(REDACTED) + 2
            else:
                out[key], size = _walk(v, exact, budget - used, depth + 1)
            used += len(key) + 4 + size
        return out, used
    if isinstance(value, (list, tuple)):
        out, used = [], 2
        for v in value:
            if used > budget:
                break
            item, size = _walk(v, exact, budget - used, depth + 1)
            out.append(item)
            used += size + 1
        return out, used
    if isinstance(value, str):
        text = value if len(value) <= budget else value[:int(budget)]
        if text.lstrip()[:1] in ("{", "["):  # JSON text: redact what it holds, keep it text
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                parsed = None
            if isinstance(parsed, (dict, list)):
                cleaned, _ = _walk(parsed, exact, budget, depth + 1)
                text = text if cleaned == parsed else json.dumps(cleaned, ensure_ascii=False)
                return text, len(text) + 2
        text = mask_tokens(_redact_pairs(text, exact))
        return text, len(text) + 2
    return value, len(str(value))


def redact(value: Any, names: Iterable[str] = config.CAPTURE_REDACT_FIELDS) -> Any:
    """A copy of ``value`` with secrets replaced by ``REDACTED``: the value of every key that looks
    secret (``secret_key``; also every key named in ``names``) at any depth, also inside strings
    that are JSON text; secret pairs and credential formats in other strings."""
    return _walk(value, _exact(names), float("inf"))[0]


def redact_head(value: Any, chars: int, names: Iterable[str] = ()) -> str:
    """The first ``chars`` characters of ``value`` as redacted compact JSON text (a string as
    itself), redacting only about that much."""
    cleaned, _ = _walk(value, _exact(names), chars + 4096)
    return _compact(cleaned)[:chars]

def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


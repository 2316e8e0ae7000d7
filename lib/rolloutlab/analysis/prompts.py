"""What a dataset prompt holds and what it says.

Prompts reach ``samples.prompt`` as plain text, or as JSON text of chat messages
(``[{"role": "user", "content": ...}]``, content as text or as a list of parts). ``prompt_messages``
reads them as chat messages for the training files (``datasets``); ``said`` is the text its user
turns say, normalised so that one question written two ways is one question (``curation`` groups
and de-duplicates by it, so no question lands in both splits).
"""
from __future__ import annotations

import functools
import json
import math
import re
import unicodedata

import pandas as pd

# roles a prompt may hold before its last user turn
CHAT_ROLES = ("system", "developer", "user", "assistant")
_TEXT_PARTS = ("text", "input_text")
_SPACE = re.compile(r"\s+")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Invisible characters that are not format characters (category Cf: zero-width space and joiners,
# BOM, soft hyphen, bidi marks): variation selectors, the combining grapheme joiner, Hangul fillers,
# Mongolian free variation selectors
_INVISIBLE = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0"
                        "\U000e0100-\U000e01ef]")


def missing(value) -> bool:
    """NULL from the database: None, or NaN / NA once pandas holds it."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def content_text(content) -> str | None:
    """A message's content as text; None when it holds anything but text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                return None
        return "".join(texts)
    return None


def _chat(prompt) -> list[dict] | None:
    """The prompt's JSON list of {role, ...} messages, or None when it is other text."""
    text = str(prompt).strip()
    if not text.startswith("["):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, list) and value and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                                 for m in value):
        return value
    return None


def prompt_messages(prompt: str | None) -> tuple[list[dict] | None, str | None]:
    """The prompt as chat messages, up to and including its last user turn, or (None, why not).
    A prompt stored as a JSON list of {role, content} is those messages; any other text is one
    user turn."""
    if missing(prompt) or not str(prompt).strip():
        return None, "no_prompt"
    value = _chat(prompt)
    if value is None:
        return [{"role": "user", "content": str(prompt)}], None
    messages = []
    for m in value:
        content = content_text(m.get("content"))
        if content is None:
            return None, "non_text_prompt"
        messages.append({"role": m["role"], "content": content})
    last = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    if last is None:
        return None, "no_user_turn"
    messages = messages[: last + 1]  # what follows the last user turn would be an answer
    if any(m["role"] not in CHAT_ROLES for m in messages):
        return None, "unsupported_role"
    if any(not m["content"].strip() for m in messages):
        return None, "empty_message"
    return messages, None


def _part_text(part) -> str:
    """A content part as text: its text, else (an image, a file) its JSON, so that two prompts
    asking about different images stay different."""
    if isinstance(part, str):
        return part
    if isinstance(part, dict) and part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str):
        return part["text"]
    if isinstance(part, dict) and set(part) == {"text"} and isinstance(part["text"], str):
        return part["text"]  # Gemini's {"text": ...} parts
    return json.dumps(part, sort_keys=True, ensure_ascii=False, default=str)


def _message_text(message: dict) -> str:
    content = message.get("content", message.get("parts"))
    if isinstance(content, list):
        return " ".join(_part_text(p) for p in content)
    return content if isinstance(content, str) else "" if content is None else _part_text(content)


def normalise(text: str) -> str:
    """Unicode NFKC (full-width letters, ligatures and compatibility forms as their plain
    characters), invisible characters removed (format characters such as zero-width spaces and
    joiners, BOM, soft hyphens, bidi marks; variation selectors), whitespace collapsed, case folded."""
    text = _SURROGATE.sub("\ufffd", unicodedata.normalize("NFKC", text))  # not Unicode: never a valid key
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return _SPACE.sub(" ", _INVISIBLE.sub("", text)).strip().casefold()


@functools.lru_cache(maxsize=65536)
def _said(prompt: str) -> str | None:
    messages = _chat(prompt)
    if messages is None:
        text = prompt
    else:  # what the user turns say; a prompt without one, what all of it says
        turns = [m for m in messages if m["role"] == "user"] or messages
        text = " ".join(_message_text(m) for m in turns)
    return normalise(text) or None


def said(prompt) -> str | None:
    """What a prompt says, normalised (``normalise``): the text of its user turns when it is a
    JSON chat list (content as text or as parts), else the text itself. None for no prompt."""
    if missing(prompt):
        return None
    return _said(str(prompt))


__all__ = ["prompt_messages", "content_text", "said", "normalise", "missing", "CHAT_ROLES"]

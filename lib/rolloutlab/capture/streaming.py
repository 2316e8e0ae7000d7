"""A request body streamed through the middleware: ``Held`` keeps its first ``hold`` bytes and its last
``TAIL_BYTES`` (the rest streams to the endpoint as it arrives); for a body too long to hold, its ids
come from a depth-aware scan of its head (``peek``) and a narrow search of its tail (``peek_tail``).
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping

from .. import config

TAIL_BYTES = config.CAPTURE_REQUEST_TAIL_BYTES
# --- a request too long to hold: its ids from its head and tail -----------------------------------

class Cut(str):
    """A string value that ran past the held part of a request (its head only)."""


_STRING = re.compile(r'"([^"\\]*+(?:\\.[^"\\]*+)*+)"', re.S)
_OPEN_STRING = re.compile(r'"([^"\\]*+(?:\\.[^"\\]*+)*+)', re.S)
_SCALAR = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")
_SPACE = re.compile(r"\s*")
_PEEK_TOKENS = config.CAPTURE_PEEK_TOKENS
_CUT_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?$")


def _decode(raw: str) -> str:
    """The text of a JSON string's inside (possibly cut mid-escape)."""
    try:
        return json.loads(f'"{raw}"')
    except ValueError:
        try:
            return json.loads(f'"{_CUT_ESCAPE.sub("", raw)}"')
        except ValueError:
            return raw


def peek(head: str, paths: Iterable[str], cut_chars: int = 6 * max(config.CAPTURE_ARGUMENTS_CHARS,
                                                                     config.CAPTURE_ANSWER_CHARS)) -> dict:
    """The values at dotted ``paths`` found in the first part of a JSON object's text, by their
    depth (an ``item.id`` is not taken for an ``id``): {path: value}. A string that runs past
    ``head`` is a ``Cut`` of its first (up to) ``cut_chars`` characters."""
    wanted = {tuple(p.split(".")) for p in paths if p}
    found: dict[str, Any] = {}
    stack: list[list] = []  # open containers: [is_object, path or None (in an array), key, expecting a key]

    def value_path():
        if not stack or stack[-1][1] is None or not stack[-1][0]:
            return None
        return stack[-1][1] + (stack[-1][2],)

    pos, n = 0, len(head)
    for _ in range(_PEEK_TOKENS):
        if pos >= n or len(found) == len(wanted):
            break
        pos = _SPACE.match(head, pos).end()
        if pos >= n:
            break
        c = head[pos]
        top = stack[-1] if stack else None
        if c == '"':
            match = _STRING.match(head, pos)
            is_key = top is not None and top[0] and top[3]
            if match is None:  # the string runs past the head
                path = None if is_key else value_path()
                if path in wanted:
                    found[".".join(path)] = Cut(_decode(_OPEN_STRING.match(head, pos)[1][:cut_chars]))
                break
            pos = match.end()
            if is_key:
                top[2], top[3] = _decode(match[1]), False
            elif (path := value_path()) in wanted:
                found[".".join(path)] = _decode(match[1])
        elif c in "{[":
            path = () if not stack else value_path()
            stack.append([c == "{", path, None, True])
            pos += 1
        elif c in "}]":
            if stack:
                stack.pop()
            pos += 1
            if not stack:
                break
        elif c == ":":
            pos += 1
        elif c == ",":
            if top is not None and top[0]:
                top[3] = True
            pos += 1
        else:
            match = _SCALAR.match(head, pos)
            if match is None or not stack:
                break
            pos = match.end()
            if (path := value_path()) in wanted:
                found[".".join(path)] = json.loads(match[0])
    return found


_STRING_ANYWHERE = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.S)


_KEY_BEFORE = re.compile(r'"((?:[^"\\]|\\.){0,256})"\s*:\s*\Z')


def _parent_keys(text: str, pos: int, n: int, reach: int = 4096) -> list[str | None]:
    """The keys of the ``n`` objects that enclose ``pos``, innermost first, found by scanning back
    at most ``reach`` characters (a quote after an even number of backslashes ends a string)."""
    keys: list[str | None] = []
    depth, in_string, i, stop = 0, False, pos - 1, max(0, pos - reach)
    while i >= stop and len(keys) < n:
        c = text[i]
        if c == '"':
            j = i - 1
            while j >= 0 and text[j] == "\\":
                j -= 1
            if (i - 1 - j) % 2 == 0:
                in_string = not in_string
        elif not in_string and c in "}]":
            depth += 1
        elif not in_string and c in "{[":
            if depth:
                depth -= 1
            else:
                key = _KEY_BEFORE.search(text, max(0, i - 300), i) if c == "{" else None
                keys.append(_decode(key[1]) if key else None)
        i -= 1
    return keys


def peek_tail(tail: str, path: str) -> Any:
    """The value at ``path`` near the end of a JSON object's text: the last ``"key": scalar`` of its
    last segment whose place matches the path: as deep (the brackets that follow it close that
    many objects), and inside the path's parents (scanning back); or None."""
    *parents, last = path.split(".")
    key = re.escape(last)
    matches = list(re.finditer(rf'(?<!\\)"{key}"\s*:\s*("(?:[^"\\]|\\.){{0,1024}}"|-?\d[\d.eE+-]{{0,40}}|true|false|null)',
                               tail))
    for match in reversed(matches[-64:]):  # the last few: each costs a pass over what follows it
        rest = _STRING_ANYWHERE.sub("", tail[match.end():])
        if rest.count("}") + rest.count("]") - rest.count("{") - rest.count("[") != len(parents) + 1:
            continue
        if not parents or _parent_keys(tail, match.start(), len(parents))[::-1] == parents:
            try:
                return json.loads(match[1])
            except ValueError:
                return None
    return None


def nest(flat: Mapping[str, Any]) -> dict:
    """{"item.id": 1} -> {"item": {"id": 1}}."""
    out: dict = {}
    for path, value in flat.items():
        node = out
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


class Held:
    """What the middleware keeps of a request body: its first ``hold`` bytes, its last
    ``TAIL_BYTES``, its size, and whether it was all received."""

    def __init__(self, hold: int):
        self.hold = hold
        self.head: list[bytes] = []
        self.head_size = 0
        self.tail = b""
        self.size = 0
        self.complete = False

    def add(self, chunk: bytes, more: bool) -> None:
        self.size += len(chunk)
        if self.head_size < self.hold:
            part = chunk[:self.hold - self.head_size]
            self.head.append(part)
            self.head_size += len(part)
        self.tail = (self.tail + chunk[-TAIL_BYTES:])[-TAIL_BYTES:]
        self.complete = not more

    @property
    def whole(self) -> bool:
        return self.complete and self.size <= self.hold

    def head_bytes(self) -> bytes:
        return b"".join(self.head)



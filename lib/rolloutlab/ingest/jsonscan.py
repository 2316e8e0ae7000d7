"""Read a whole-file JSON document, keeping what is sound when the file is cut off.

``json.loads`` is tried first (fast, C). When it fails, a lenient pass walks the top levels with
``raw_decode`` and keeps every complete value: an array of records loses only its incomplete
tail, which the caller reports as a reject.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

_decoder = json.JSONDecoder()
_WS = " \t\n\r"


@dataclass
class Damage:
    """Where the document stopped being readable, in words a user can act on."""
    line: int
    column: int
    message: str

    def describe(self) -> str:
        return (f"invalid JSON at line {self.line}, column {self.column} ({self.message}): the file "
                "looks truncated or corrupt; everything before that point was loaded")


class Truncated(list):
    """A list whose last element(s) could not be read; ``damage`` says where."""
    damage: Damage


def loads_lenient(text: str, depth: int = 2) -> tuple[object, Damage | None]:
    """The document, and None; or what could be read of it, and where it broke.

    ``depth`` is how many container levels are walked item by item; deeper values (the records)
    are kept only when complete. 1 suits a top-level list of records, 2 an object holding one.
    """
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        first = Damage(exc.lineno, exc.colno, exc.msg)
    except RecursionError:
        first = Damage(1, 1, "nested too deeply")
    try:
        value, _, damage = _value(text, _skip(text, 0), depth)
    except _Stop as stop:
        return None, stop.damage
    return value, damage or first


class _Stop(Exception):
    def __init__(self, damage: Damage):
        self.damage = damage


def _damage(text: str, pos: int, message: str) -> Damage:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return Damage(line, column, message)


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _value(text: str, pos: int, depth: int):
    """(value, end, damage): containers above ``depth`` are walked item by item."""
    if pos >= len(text):
        raise _Stop(_damage(text, pos, "unexpected end of file"))
    if depth <= 0 or text[pos] not in "[{":
        try:
            value, end = _decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _Stop(_damage(text, exc.pos, exc.msg)) from None
        except RecursionError:
            raise _Stop(_damage(text, pos, "nested too deeply")) from None
        return value, end, None
    if text[pos] == "[":
        out = Truncated()
        pos = _skip(text, pos + 1)
        if pos < len(text) and text[pos] == "]":
            return list(out), pos + 1, None
        while True:
            try:
                item, pos, damage = _value(text, pos, depth - 1)
            except _Stop as stop:
                out.damage = stop.damage
                return out, len(text), stop.damage
            out.append(item)
            if damage:
                out.damage = damage
                return out, len(text), damage
            pos = _skip(text, pos)
            if pos < len(text) and text[pos] == ",":
                pos = _skip(text, pos + 1)
                continue
            if pos < len(text) and text[pos] == "]":
                return list(out), pos + 1, None
            out.damage = _damage(text, pos, "expected ',' or ']'")
            return out, len(text), out.damage
    obj = {}
    pos = _skip(text, pos + 1)
    if pos < len(text) and text[pos] == "}":
        return obj, pos + 1, None
    while True:
        try:
            key, pos = _decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            return obj, len(text), _damage(text, exc.pos, exc.msg)
        pos = _skip(text, pos)
        if pos >= len(text) or text[pos] != ":":
            return obj, len(text), _damage(text, pos, "expected ':'")
        try:
            obj[key], pos, damage = _value(text, _skip(text, pos + 1), depth - 1)
        except _Stop as stop:
            return obj, len(text), stop.damage
        if damage:
            return obj, len(text), damage
        pos = _skip(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos = _skip(text, pos + 1)
            continue
        if pos < len(text) and text[pos] == "}":
            return obj, pos + 1, None
        return obj, len(text), _damage(text, pos, "expected ',' or '}'")

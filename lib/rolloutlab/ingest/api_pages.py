"""OpenAI API objects as users save them: JSONL (one object per line) or the API's list pages
(``{"object": "list", "data": [...], "has_more": ...}``, one per ``.json`` file or one per line).
A page cut off mid-write keeps its complete items; what cannot be parsed is a ``Broken`` value
with its reason, for the loader to reject."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from .convert import dumps, loads_file
from .jsonscan import loads_lenient


class Broken:
    def __init__(self, reason: str, raw):
        self.reason, self.raw = reason, raw


def documents(path: Path) -> list[tuple[str, object]]:
    """(location, parsed value) of the file: one document (a .json page, object or list), or one
    per line (JSONL)."""
    text = loads_file(path)
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        json.loads(first)
        jsonl = path.suffix == ".jsonl" or first.strip() != text.strip()
    except ValueError:
        jsonl = path.suffix == ".jsonl"
    if not jsonl:
        data, damage = loads_lenient(text, depth=3)
        docs = [("file", data)] if data is not None else []
        if damage:
            docs.append(("end of file", Broken(damage.describe(), text[-200:])))
        return docs
    docs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            value, damage = loads_lenient(line, depth=0)
            docs.append((f"line {number}", value if damage is None else Broken(damage.describe(), line)))
    return docs


def pages_with_more(path: Path) -> list[tuple[str, str | None]]:
    """(location, id of its last item) of every list page of the file that says ``has_more``:
    the API holds more objects than the file."""
    return [(where, (doc["data"][-1].get("id") if doc.get("data") and isinstance(doc["data"], list)
                     and isinstance(doc["data"][-1], dict) else None))
            for where, doc in documents(path)
            if isinstance(doc, dict) and doc.get("object") == "list" and doc.get("has_more") is True]


def api_objects(path: Path) -> Iterator[tuple[str, object]]:
    """(location, value) for every API object of the file; list pages are opened up."""
    for where, doc in documents(path):
        if isinstance(doc, Broken):
            yield where, doc
        elif isinstance(doc, dict) and doc.get("object") == "list":
            items = doc.get("data")
            if not isinstance(items, list):
                yield where, Broken("a list page whose 'data' is not a JSON array", dumps(doc))
                continue
            for i, item in enumerate(items):
                yield f"{where} data[{i}]", item
        elif isinstance(doc, list):
            for i, item in enumerate(doc):
                yield f"{where} [{i}]", item
        else:
            yield where, doc


def object_of(record) -> str | None:
    """The ``object`` of a record, or of the first item of a list page or list."""
    if isinstance(record, dict):
        if record.get("object") == "list" and isinstance(record.get("data"), list) and record["data"]:
            return object_of(record["data"][0])
        return record.get("object")
    if isinstance(record, list) and record:
        return object_of(record[0])
    return None

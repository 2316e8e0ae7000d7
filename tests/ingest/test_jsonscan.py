"""Lenient whole-file JSON: complete values kept, the cut-off one reported."""
from __future__ import annotations

import json

from rolloutlab.ingest.jsonscan import loads_lenient


def test_valid_document_is_returned_as_is():
    assert loads_lenient('{"a": [1, 2]}') == ({"a": [1, 2]}, None)


def test_truncated_list_of_records_keeps_whole_records():
    text = json.dumps([{"i": i, "pad": "x" * 20} for i in range(5)], indent=1)
    value, damage = loads_lenient(text[: text.index('"i": 3') + 3], depth=1)
    assert value == [{"i": i, "pad": "x" * 20} for i in range(3)]
    assert damage.line > 1 and "truncated" in damage.describe()


def test_truncated_object_keeps_earlier_keys_and_whole_items():
    text = json.dumps({"info": {"m": 1}, "sims": [{"k": 1}, {"k": 2}, {"k": 3}]})
    value, damage = loads_lenient(text[: text.index('{"k": 3') + 4], depth=2)
    assert value == {"info": {"m": 1}, "sims": [{"k": 1}, {"k": 2}]}
    assert damage is not None


def test_garbage_gives_nothing():
    value, damage = loads_lenient("not json at all")
    assert value is None and damage.line == 1 and damage.column == 1

"""The one pass over a file: hashes of the whole, of a prefix and of the complete lines; newlines
after the prefix; files cut into chunks of whole lines."""
from __future__ import annotations

import hashlib

import pytest

from rolloutlab.ingest import filescan

FILES = [b"a\nbb\nccc\npartial", b"a\nbb\nccc\n", b"no newline", b"", b"\n\n\n"]


@pytest.mark.parametrize("data", FILES)
@pytest.mark.parametrize("block", [1, 2, 3, 1 << 22])
def test_scan_against_hashlib(tmp_path, monkeypatch, data, block):
    monkeypatch.setattr(filescan, "BLOCK", block)
    path = tmp_path / "f"
    path.write_bytes(data)
    end = data.rfind(b"\n") + 1
    for prefix in (None, 0, 1, 2, 5, 9, len(data), len(data) + 3):
        s = filescan.scan(path, prefix)
        assert (s.size, s.sha256) == (len(data), hashlib.sha256(data).hexdigest())
        assert (s.complete_end, s.complete_sha256) == (end, hashlib.sha256(data[:end]).hexdigest())
        if prefix is not None and prefix <= len(data):
            assert s.prefix_sha256 == hashlib.sha256(data[:prefix]).hexdigest()
            assert s.lines_after_prefix == data[prefix:end].count(b"\n")
        else:  # no prefix, or one longer than the file: every newline counted
            assert s.prefix_sha256 is None and s.lines_after_prefix == data[:end].count(b"\n")


@pytest.mark.parametrize("target", [1, 100, 7777, 10 ** 9])
@pytest.mark.parametrize("block", [3, 64, 1 << 22])
def test_line_chunks_put_the_file_back_together(tmp_path, monkeypatch, target, block):
    monkeypatch.setattr(filescan, "BLOCK", block)
    data = b"".join(f"line {i} {'x' * (i % 37)}\n".encode() for i in range(2000)) + b"partial"
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    (tmp_path / "chunks").mkdir()
    for start in (0, data.find(b"\n") + 1):
        got, pieces = b"", 0
        for chunk, newlines in filescan.line_chunks(path, tmp_path / "chunks", target, start=start):
            piece = chunk.read_bytes()
            assert piece.count(b"\n") == newlines and (piece.endswith(b"\n") or got + piece == data[start:])
            got, pieces = got + piece, pieces + 1
        assert got == data[start:]
        assert pieces == 1 if target > len(data) else pieces > 1

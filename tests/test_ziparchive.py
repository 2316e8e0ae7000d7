"""Zip members written with Zstandard (method 93, several frames), deflate and stored."""
from __future__ import annotations

import struct
import zipfile
import zlib

import pytest
import zstandard

from rolloutlab.ingest.ziparchive import Archive, MemberError, ZSTD_METHOD


def zstd_member_zip(path, name: str, data: bytes, frames: int, corrupt_crc: bool = False):
    """A zip whose one member is ``data`` as ``frames`` concatenated zstd frames (as inspect_ai
    writes large members), built with zipfile as a stored member and then relabelled method 93
    with the true size and CRC in both headers."""
    size = -(-len(data) // frames)
    chunks = [data[i:i + size] for i in range(0, len(data), size)]
    compressed = b"".join(zstandard.ZstdCompressor().compress(c) for c in chunks)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr(zipfile.ZipInfo(name), compressed)
        zf.writestr("other.txt", b"plain")
    raw = bytearray(path.read_bytes())
    crc = zlib.crc32(data) ^ (1 if corrupt_crc else 0)
    local = raw.index(b"PK\x03\x04")
    central = raw.index(b"PK\x01\x02")
    struct.pack_into("<H", raw, local + 8, ZSTD_METHOD)
    struct.pack_into("<L", raw, local + 14, crc)
    struct.pack_into("<L", raw, local + 22, len(data))
    struct.pack_into("<H", raw, central + 10, ZSTD_METHOD)
    struct.pack_into("<L", raw, central + 16, crc)
    struct.pack_into("<L", raw, central + 24, len(data))
    path.write_bytes(bytes(raw))
    return len(chunks)


def test_multi_frame_zstd_member(tmp_path):
    data = b'{"id": 1, "text": "' + b"x" * 50_000 + b'"}'
    path = tmp_path / "a.eval"
    assert zstd_member_zip(path, "samples/1_epoch_1.json", data, frames=3) == 3
    with pytest.raises(NotImplementedError):  # what Python's zipfile does with it, below 3.14
        zipfile.ZipFile(path).read("samples/1_epoch_1.json")
    with Archive(path) as archive:
        assert archive.names() == ["samples/1_epoch_1.json", "other.txt"]
        assert archive.read("samples/1_epoch_1.json") == data
        assert archive.read("other.txt") == b"plain"  # stored members as zipfile reads them


def test_corrupt_zstd_member_is_an_error_not_garbage(tmp_path):
    path = tmp_path / "bad.eval"
    zstd_member_zip(path, "samples/1_epoch_1.json", b'{"id": 1}', frames=1, corrupt_crc=True)
    with Archive(path) as archive, pytest.raises(MemberError, match="do not match the size and CRC"):
        archive.read("samples/1_epoch_1.json")
    raw = bytearray(path.read_bytes())
    start = raw.index(b"(\xb5/\xfd")  # the zstd magic number: break the frame
    raw[start + 4: start + 12] = b"\xff" * 8
    path.write_bytes(bytes(raw))
    with Archive(path) as archive, pytest.raises(MemberError, match="zstd data is corrupt"):
        archive.read("samples/1_epoch_1.json")

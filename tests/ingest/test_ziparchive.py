"""Zip members written with Zstandard (method 93, several frames), deflate and stored."""
from __future__ import annotations

import struct
import subprocess
import sys
import textwrap
import threading
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


# ---- zip bombs (issue 23, point 13) ---------------------------------------------------------

def bomb(path, size: int, method=zipfile.ZIP_DEFLATED):
    """A zip whose one member decompresses to ``size`` bytes of 'a' (written as a stream)."""
    with zipfile.ZipFile(path, "w", compression=method) as zf, zf.open("samples/1_epoch_1.json", "w") as member:
        for _ in range(size // 2**20):
            member.write(b"a" * 2**20)
    return path


def test_a_deflate_bomb_is_refused_before_it_fills_memory(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLLOUTLAB_ZIP_RATIO_FROM_BYTES", str(2**20))
    path = bomb(tmp_path / "bomb.zip", 64 * 2**20)  # 64 MiB of 'a' in about 64 KiB
    with Archive(path) as zf:
        info = zf.zip.getinfo("samples/1_epoch_1.json")
        with pytest.raises(MemberError, match="refused as a likely zip bomb") as err:
            zf.read("samples/1_epoch_1.json")
    limit = 200 * info.compress_size  # the ratio limit: refused as soon as the member passes it
    assert f"more than {limit / 2**20:,.0f} MiB" in str(err.value) and "ROLLOUTLAB_ZIP_MAX_RATIO" in str(err.value)


def test_a_zstd_bomb_is_refused_too(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLLOUTLAB_ZIP_MEMBER_MAX_BYTES", str(4 * 2**20))
    data = b"a" * (8 * 2**20)
    zstd_member_zip(tmp_path / "z.zip", "big.json", data, frames=2)
    with Archive(tmp_path / "z.zip") as zf, pytest.raises(MemberError, match="more than 4 MiB"):
        zf.read("big.json")


def test_a_member_within_the_limits_reads_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("ROLLOUTLAB_ZIP_MEMBER_MAX_BYTES", str(16 * 2**20))
    path = bomb(tmp_path / "ok.zip", 8 * 2**20, method=zipfile.ZIP_STORED)  # stored: ratio 1
    with Archive(path) as zf:
        assert zf.read("samples/1_epoch_1.json") == b"a" * (8 * 2**20)


def test_a_bomb_in_an_eval_is_one_reject_in_bounded_memory(tmp_path):
    # In a process of its own, so that its peak memory is the ingest's alone: the 1 GiB member is
    # refused at 200x its ~1 MB compressed size, long before 1 GiB is held.
    path = bomb(tmp_path / "bomb.eval", 2**30)
    script = textwrap.dedent(f"""
        import re, rolloutlab as rl
        con = rl.connect({str(tmp_path / 'db.duckdb')!r})
        result = rl.ingest(con, {str(path)!r}, format="inspect")
        # VmHWM, not ru_maxrss: that keeps the (large) test process's peak from before the exec
        hwm = re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)
        print(result.rejected.iloc[0], int(hwm) // 1024)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    rejected, peak_mb = int(out[0]), int(out[1])
    assert rejected == 1 and peak_mb < 600, out


# ---- reading ahead, and sizes a zip records (issue 30) -----------------------------------------

def zstd_zip(path, members: dict[str, bytes], corrupt: set[str] = frozenset()):
    """A zip whose members are each one zstd frame (method 93), as inspect_ai writes them; the
    members in ``corrupt`` record a CRC their contents do not have."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name), zstandard.ZstdCompressor().compress(data))
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    central = raw.index(b"PK\x01\x02")
    for (name, data), info in zip(members.items(), infos):
        crc = zlib.crc32(data) ^ (1 if name in corrupt else 0)
        for at in (info.header_offset + 8, central + 10):  # method, then CRC and size after time, date, compressed size
            struct.pack_into("<H", raw, at, ZSTD_METHOD)
            struct.pack_into("<L", raw, at + 6, crc)
            struct.pack_into("<L", raw, at + 14, len(data))
        central = raw.index(b"PK\x01\x02", central + 4) if name != list(members)[-1] else central
    path.write_bytes(bytes(raw))
    return path


def _read_all(archive, names):
    out = {}
    for name in names:
        try:
            out[name] = archive.read(name)
        except MemberError as exc:
            out[name] = f"MemberError: {exc}"
    return out


def test_reading_ahead_gives_what_reading_gives_errors_included(tmp_path):
    members = {f"samples/{i}_epoch_1.json": b'{"id": %d, "text": "%s"}' % (i, b"x" * (i * 997)) for i in range(40)}
    path = zstd_zip(tmp_path / "a.eval", members, corrupt={"samples/7_epoch_1.json"})
    names = list(members)
    with Archive(path) as archive:
        direct = _read_all(archive, names)
        assert direct["samples/7_epoch_1.json"].startswith("MemberError") and direct["samples/8_epoch_1.json"] == \
            members["samples/8_epoch_1.json"]
        with archive.reading_ahead(names, depth=4):
            assert archive.read(names[30]) == members[names[30]]  # out of order: read here, the order kept
            assert _read_all(archive, names) == direct
        with archive.reading_ahead(names, depth=2):
            assert archive.read(names[0]) == members[names[0]]
        # left early: the thread is gone, and reading goes on as usual
        assert not any(t.name == "zip-read-ahead" for t in threading.enumerate())
        assert _read_all(archive, names) == direct


def test_reading_ahead_deflate_members_beside_other_reads(tmp_path):
    path = tmp_path / "d.eval"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for i in range(30):
            zf.writestr(f"samples/{i}_epoch_1.json", b"%d" % i * 5000)
    with Archive(path) as archive:
        names = archive.names()
        with archive.reading_ahead(names[10:], depth=3):
            for name in names:  # the first ten are not read ahead: zipfile's handle is shared meanwhile
                assert archive.read(name) == b"%d" % int(name.split("/")[1].split("_")[0]) * 5000


def test_a_zstd_member_longer_than_its_recorded_size_is_refused_one_byte_past_it(tmp_path):
    # a bomb that lies about its size: decompressed no further than the size it claims
    import tracemalloc

    path = tmp_path / "liar.eval"
    zstd_member_zip(path, "samples/1_epoch_1.json", b"a" * (64 * 2**20), frames=2)
    raw = bytearray(path.read_bytes())
    struct.pack_into("<L", raw, raw.index(b"PK\x03\x04") + 22, 1000)
    struct.pack_into("<L", raw, raw.index(b"PK\x01\x02") + 24, 1000)
    path.write_bytes(bytes(raw))
    with Archive(path) as archive:
        tracemalloc.start()
        try:
            with pytest.raises(MemberError, match="do not match the size and CRC"):
                archive.read("samples/1_epoch_1.json")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 2**20, peak

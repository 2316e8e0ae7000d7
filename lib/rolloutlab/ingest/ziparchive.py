"""Zip members as Inspect AI writes them: stored, deflate, or Zstandard (zip method 93).

Current inspect_ai compresses every member of a ``.eval`` with zstd, as several frames per
member; Python's ``zipfile`` cannot read method 93 before 3.14. We read such a member's raw bytes
from its local header and decompress them across frames with ``zstandard``, checking size and
CRC as ``zipfile`` does for the methods it knows. Nothing is patched globally.

A zip is input from elsewhere: every member is decompressed as a stream and refused once it grows
past ``config.ZIP_MEMBER_MAX_BYTES``, or past ``config.ZIP_MAX_RATIO`` times its compressed size
(beyond ``config.ZIP_RATIO_FROM_BYTES``), so a 1 MB zip bomb costs a few megabytes, not gigabytes.
"""
from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

import zstandard

from .. import config

ZSTD_METHOD = 93
LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, then file name and extra field lengths
LOCAL_SIGNATURE = b"PK\x03\x04"
CHUNK = 1 << 20


class MemberError(ValueError):
    """A member that cannot be read, with why."""


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


class Archive:
    """A zip file whose members are read whole, one at a time (``with Archive(path) as a``)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.zip = zipfile.ZipFile(self.path)
        self._raw = open(self.path, "rb")
        self._infos = {info.filename: info for info in self.zip.infolist()}

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._raw.close()
        self.zip.close()

    def names(self) -> list[str]:
        return list(self._infos)

    def limit(self, info: zipfile.ZipInfo) -> int:
        """The most bytes this member may decompress to."""
        by_ratio = max(config.limit("ZIP_RATIO_FROM_BYTES"), config.limit("ZIP_MAX_RATIO") * info.compress_size)
        return min(config.limit("ZIP_MEMBER_MAX_BYTES"), by_ratio)

    def _refuse(self, info: zipfile.ZipInfo, limit: int) -> MemberError:
        return MemberError(
            f"{info.filename}: decompresses to more than {_mib(limit)} from {info.compress_size:,} compressed bytes: "
            f"refused as a likely zip bomb (limits: {_mib(config.limit('ZIP_MEMBER_MAX_BYTES'))} per member, "
            f"{config.limit('ZIP_MAX_RATIO')}x its compressed size). If the log is genuine, raise them: "
            "ROLLOUTLAB_ZIP_MEMBER_MAX_BYTES / ROLLOUTLAB_ZIP_MAX_RATIO (docs/security.md)")

    def read(self, name: str) -> bytes:
        info = self._infos.get(name)
        if info is None:
            raise MemberError(f"no member {name!r}")
        limit = self.limit(info)
        if info.file_size > limit:  # the zip says so itself: refuse before decompressing
            raise self._refuse(info, limit)
        if info.compress_type != ZSTD_METHOD:
            try:
                with self.zip.open(info) as stream:  # zipfile checks size and CRC at the end
                    return self._bounded(stream.read, info, limit)
            except NotImplementedError as exc:
                raise MemberError(f"{name}: {exc} (zip method {info.compress_type})") from None
        data = self._zstd(info, limit)
        if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
            raise MemberError(f"{name}: its contents do not match the size and CRC the zip records "
                              "(the file is corrupt)")
        return data

    def _bounded(self, read, info: zipfile.ZipInfo, limit: int) -> bytes:
        """Read a decompressing stream a chunk at a time, never past ``limit`` bytes."""
        parts, total = [], 0
        while chunk := read(CHUNK):
            total += len(chunk)
            if total > limit:
                raise self._refuse(info, limit)
            parts.append(chunk)
        return b"".join(parts)

    def _zstd(self, info: zipfile.ZipInfo, limit: int) -> bytes:
        self._raw.seek(info.header_offset)
        header = self._raw.read(LOCAL_HEADER.size)
        if len(header) != LOCAL_HEADER.size or header[:4] != LOCAL_SIGNATURE:
            raise MemberError(f"{info.filename}: bad local header (the zip is corrupt)")
        _, name_len, extra_len = LOCAL_HEADER.unpack(header)
        self._raw.seek(name_len + extra_len, 1)
        raw = self._raw.read(info.compress_size)
        if len(raw) != info.compress_size:
            raise MemberError(f"{info.filename}: the zip ends inside this member (the file is cut off)")
        try:
            with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as reader:
                return self._bounded(reader.read, info, limit)
        except zstandard.ZstdError as exc:
            raise MemberError(f"{info.filename}: zstd data is corrupt ({exc})") from None

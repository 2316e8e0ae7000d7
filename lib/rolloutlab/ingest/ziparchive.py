"""Zip members as Inspect AI writes them: stored, deflate, or Zstandard (zip method 93).

Current inspect_ai compresses every member of a ``.eval`` with zstd, as several frames per
member; Python's ``zipfile`` cannot read method 93 before 3.14. We read such a member's raw bytes
from its local header and decompress them across frames with ``zstandard``, checking size and
CRC as ``zipfile`` does for the methods it knows. Nothing is patched globally.
"""
from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

import zstandard

ZSTD_METHOD = 93
LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, then file name and extra field lengths
LOCAL_SIGNATURE = b"PK\x03\x04"


class MemberError(ValueError):
    """A member that cannot be read, with why."""


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

    def read(self, name: str) -> bytes:
        info = self._infos.get(name)
        if info is None:
            raise MemberError(f"no member {name!r}")
        if info.compress_type != ZSTD_METHOD:
            try:
                return self.zip.read(info)
            except NotImplementedError as exc:
                raise MemberError(f"{name}: {exc} (zip method {info.compress_type})") from None
        data = self._zstd(info)
        if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
            raise MemberError(f"{name}: its contents do not match the size and CRC the zip records "
                              "(the file is corrupt)")
        return data

    def _zstd(self, info: zipfile.ZipInfo) -> bytes:
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
                return reader.read()
        except zstandard.ZstdError as exc:
            raise MemberError(f"{info.filename}: zstd data is corrupt ({exc})") from None

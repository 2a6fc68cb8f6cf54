"""A landed file's bytes, gunzipped when they are gzip, with bounds against decompression bombs.

Gzip is recognised by its magic bytes, not by the name. Decompression streams in chunks and stops
as soon as a bound is crossed, so a bomb is never held in memory. Two bounds, both overridable:

- `PERFWH_MAX_DECOMPRESSED_BYTES` (default 1 GiB): no file, compressed or plain, is read past it.
- `PERFWH_MAX_DECOMPRESSION_RATIO` (default 200): decompressed/compressed bytes, checked once the
  output passes 1 MiB (small, very repetitive files legitimately compress better than 200:1).

Crossing either, a truncated or corrupt gzip stream, and a `.gz` name on bytes that are not gzip
are quarantined with a reason naming the bound and the setting to raise.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

from perf_assets.lib.ingest.formats.errors import QuarantineError

GZIP_MAGIC = b"\x1f\x8b"
MAX_BYTES_SETTING = "PERFWH_MAX_DECOMPRESSED_BYTES"
MAX_RATIO_SETTING = "PERFWH_MAX_DECOMPRESSION_RATIO"
DEFAULT_MAX_BYTES = 1 << 30
DEFAULT_MAX_RATIO = 200.0
RATIO_FLOOR_BYTES = 1 << 20  # below this much output the ratio is not checked
_CHUNK = 1 << 20
_SNIFF_BYTES = 1 << 16


def _setting(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    try:
        return float(text) if text else default
    except ValueError:
        raise QuarantineError(f"{name}={text!r} is not a number") from None


def limits() -> tuple[int, float]:
    """(max decompressed bytes, max ratio) from the environment, read at each call."""
    return int(_setting(MAX_BYTES_SETTING, DEFAULT_MAX_BYTES)), _setting(MAX_RATIO_SETTING, DEFAULT_MAX_RATIO)


def is_gzip(head: bytes) -> bool:
    return head.startswith(GZIP_MAGIC)


def gunzip_bounded(data: bytes, *, max_bytes: int | None = None, max_ratio: float | None = None) -> bytes:
    """The whole gzip stream (every member) decompressed; QuarantineError past a bound or when cut/corrupt."""
    default_bytes, default_ratio = limits()
    max_bytes = default_bytes if max_bytes is None else max_bytes
    max_ratio = default_ratio if max_ratio is None else max_ratio
    out: list[bytes] = []
    produced = 0
    pending = data
    while pending:
        stream = zlib.decompressobj(wbits=31)  # one gzip member
        chunk_input = pending
        while True:
            try:
                piece = stream.decompress(chunk_input, _CHUNK)
            except zlib.error as error:
                raise QuarantineError(f"corrupt gzip stream ({error}) after {produced:,} decompressed bytes") from None
            produced += len(piece)
            out.append(piece)
            _check(produced, len(data), max_bytes, max_ratio)
            if stream.eof:
                break
            chunk_input = stream.unconsumed_tail
            if not chunk_input and not piece:
                raise QuarantineError(
                    f"truncated gzip: the stream ends after {len(data):,} compressed bytes "
                    f"({produced:,} decompressed) without its end marker: re-export the file"
                )
        pending = stream.unused_data.lstrip(b"\0")  # concatenated members; trailing zero padding is allowed
        if pending and not is_gzip(pending):
            raise QuarantineError(f"corrupt gzip: {len(pending):,} bytes of trailing garbage after the stream")
    return b"".join(out)


def _check(produced: int, compressed: int, max_bytes: int, max_ratio: float) -> None:
    ratio = produced / max(compressed, 1)
    if produced > max_bytes:
        raise QuarantineError(
            f"decompressed size exceeds {max_bytes:,} bytes (ratio {ratio:,.0f}:1 from {compressed:,} compressed "
            f"bytes, stopped reading): raise {MAX_BYTES_SETTING} if this is a real export"
        )
    if produced > RATIO_FLOOR_BYTES and ratio > max_ratio:
        raise QuarantineError(
            f"decompressed size exceeds the {max_ratio:,.0f}:1 ratio limit (over {produced:,} bytes from "
            f"{compressed:,} compressed bytes, stopped reading; a likely decompression bomb): raise "
            f"{MAX_RATIO_SETTING} (and {MAX_BYTES_SETTING}) if this is a real export"
        )


def read_bytes(path: Path) -> bytes:
    """The file's content: gunzipped (bounded) when it is gzip, else as stored (bounded by the byte limit)."""
    max_bytes, _ = limits()
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(2)
        if not is_gzip(head):
            if path.suffix == ".gz" and size:
                raise QuarantineError(f"named {path.name!r} but not gzip (first bytes {head!r}): rename or re-export")
            if size > max_bytes:
                raise QuarantineError(
                    f"file is {size:,} bytes, over the {max_bytes:,} byte limit: raise {MAX_BYTES_SETTING} "
                    "if this is a real export"
                )
            return head + handle.read()
        return gunzip_bounded(head + handle.read())


def read_text(path: Path) -> str:
    """The file as UTF-8 text (gunzipped when gzip); non-UTF-8 and empty files are quarantined."""
    data = read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise QuarantineError(f"line {line}: not UTF-8 text (byte {error.start})") from None
    if not text.strip():
        raise QuarantineError("empty file: a writer delivers no file rather than an empty one")
    return text


def sniff(head: bytes) -> bytes:
    """For format detection: the decompressed start of a gzip head (cut streams are fine), else the head."""
    if not is_gzip(head):
        return head
    try:
        return zlib.decompressobj(wbits=31).decompress(head, _SNIFF_BYTES)
    except zlib.error:
        return b""

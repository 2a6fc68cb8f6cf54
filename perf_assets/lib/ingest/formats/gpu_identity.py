"""GPU identity as the telemetry formats spell it, to one spelling (reference formats.md section 9).

UUIDs become `GPU-<hex>` (lower case); bus ids `dddd:bb:dd.f` (lower case). A masked UUID (all
zeros, as in the public nvidia-smi captures) identifies nothing: it is unknown (None), so masked
GPUs of different hosts never join as one GPU.
"""

from __future__ import annotations

import re

_UUID = re.compile(r"^(GPU-|MIG-)?([0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})$")
_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-7]))?$")
_EMPTY = ("", "<<<NULL>>>", "N/A", "[N/A]")


def text_or_none(value: object) -> str | None:
    """A label or cell value, None when empty or a sentinel (`<<<NULL>>>`, `N/A`, `[...]`)."""
    if value is None:
        return None
    text = str(value).strip()
    if text in _EMPTY or (text.startswith("[") and text.endswith("]")):
        return None
    return text


def normalise_uuid(value: object) -> str | None:
    """`GPU-20C5...`, `20c5...` -> `GPU-20c5...`; `MIG-...` kept as MIG; all-zero (masked) -> None.

    Text that is not a UUID (the Datadog fixture's `GPU-abc`) is kept as written: it still tells
    that host's GPUs apart.
    """
    text = text_or_none(value)
    if text is None:
        return None
    match = _UUID.match(text)
    if not match:
        return text
    prefix, digits = match.group(1) or "GPU-", match.group(2).lower()
    if set(digits) <= {"0", "-"}:
        return None
    return f"{prefix}{digits}"


def normalise_bus_id(value: object) -> str | None:
    """`00000000:30:00.0` or `0000:1B:00` -> `0000:30:00.0` / `0000:1b:00.0`; unreadable -> None."""
    text = text_or_none(value)
    if text is None:
        return None
    match = _BUS_ID.match(text)
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function or '0'}"


def normalise_model_name(value: object) -> str | None:
    """`--replace-blanks-in-model-name` writes `NVIDIA-H100-80GB-HBM3`: dashes back to blanks.

    Only a name without any blank is rewritten (the same rule as the range-query parser); a real
    dash in such a name (`NVIDIA-A100-SXM4-40GB`, originally `NVIDIA A100-SXM4-40GB`) cannot be told
    apart and becomes a blank too.
    """
    text = text_or_none(value)
    if text is None:
        return None
    return text.replace("-", " ") if " " not in text else text


def int_or_none(value: object) -> int | None:
    text = text_or_none(value)
    return int(text) if text is not None and text.isdigit() else None

"""Timestamps as the formats write them, to timezone-aware UTC datetimes."""

from __future__ import annotations

from datetime import datetime, timezone


def parse_utc(value: object, *, naive_is_utc: bool = True) -> datetime | None:
    """RFC 3339 / ISO 8601 text (or unix seconds) to UTC; None for null, '', 'Unknown', 'None'."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(float(value), tz=timezone.utc)
    text = str(value).strip()
    if text in ("", "Unknown", "None", "null"):
        return None
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    if parsed.tzinfo is None:
        if not naive_is_utc:
            raise ValueError(f"timestamp without a zone: {text!r}")
        return parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)

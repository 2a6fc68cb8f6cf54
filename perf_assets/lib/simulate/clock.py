"""Time in the simulator: unix seconds (UTC) inside, the formats' spellings outside.

No wall-clock time anywhere: every instant is derived from the scenario's start date.
"""

from __future__ import annotations

import calendar
import datetime as dt

import numpy as np

DAY_S = 86_400
HOUR_S = 3_600


def epoch_of(day: dt.date) -> int:
    """Unix seconds of a UTC date's midnight."""
    return calendar.timegm((day.year, day.month, day.day, 0, 0, 0))


def day_of(t: float) -> dt.date:
    """The UTC date an instant falls on."""
    return dt.datetime.fromtimestamp(int(t // 1), tz=dt.timezone.utc).date()


def rfc3339(t: float) -> str:
    """Whole seconds: `2026-11-03T04:05:06Z`."""
    return dt.datetime.fromtimestamp(int(t // 1), tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_ms(ts_ms: np.ndarray) -> list[str]:
    """Vectorised, integer milliseconds: `2026-11-03T04:05:06.123Z`."""
    text = np.datetime_as_string(np.asarray(ts_ms, dtype="int64").astype("datetime64[ms]"), unit="ms")
    return [f"{value}Z" for value in text.tolist()]


def slurm_time(t: float | None) -> str:
    """sacct's spelling, UTC without a zone: `2026-11-03T04:05:06`; `Unknown` for a missing time."""
    if t is None:
        return "Unknown"
    return dt.datetime.fromtimestamp(int(t // 1), tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def file_stamp(t: float) -> str:
    """The `<utc-ts>` part of a landing file name: `20261103T000000Z`."""
    return dt.datetime.fromtimestamp(int(t // 1), tz=dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def parse_start(value: dt.date | dt.datetime | str | None, default: dt.date) -> dt.date:
    """A scenario start: a date, a datetime (its UTC date) or `YYYY-MM-DD`; None keeps the default."""
    if value is None:
        return default
    if isinstance(value, dt.datetime):
        return (value.astimezone(dt.timezone.utc) if value.tzinfo else value).date()
    if isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value))

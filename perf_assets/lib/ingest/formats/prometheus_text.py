"""Prometheus text exposition (0.0.4), read line by line: `name{label="value",...} value [timestamp_ms]`.

Only the reading: samples with their line number, labels, value text and optional timestamp, and
the `# TYPE` of each family. What the samples mean is the caller's business (dcgm-exporter,
nvidia_gpu_exporter). A line that cannot be read raises QuarantineError naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from perf_assets.lib.ingest.formats.decompress import read_text
from perf_assets.lib.ingest.formats.errors import QuarantineError

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


@dataclass(frozen=True)
class Sample:
    line: int
    name: str
    labels: dict[str, str]
    value: str  # as written: "8.969000", "NaN", "+Inf"
    timestamp_ms: int | None

    def sampled_at(self, scraped_at: datetime | None) -> datetime | None:
        """The sample's own timestamp when the exposition carries one, else the scrape time."""
        if self.timestamp_ms is None:
            return scraped_at
        return datetime.fromtimestamp(self.timestamp_ms / 1000, tz=timezone.utc)


@dataclass
class Exposition:
    samples: list[Sample] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)  # family name -> counter | gauge | ...


# A label set whose values hold no backslash, in the grammar `_labels` reads (separators: any run of space, tab
# and comma): read with two regular expressions instead of character by character. Anything else (escapes,
# errors) takes the character-by-character reader, which names the error.
_PLAIN_LABEL_SET = re.compile(r'\{(?:[ \t,]*[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*")*[ \t,]*\}')
_PLAIN_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"')


def _labels(text: str, start: int) -> tuple[dict[str, str], int]:
    """Read `{a="x",b="y"}` from text[start] == '{'; return the labels and the index after '}'."""
    plain = _PLAIN_LABEL_SET.match(text, start)
    if plain:
        return dict(_PLAIN_LABEL.findall(text, start, plain.end())), plain.end()
    labels: dict[str, str] = {}
    position = start + 1
    while True:
        while position < len(text) and text[position] in " \t,":
            position += 1
        if position >= len(text):
            raise ValueError("unterminated label set (no closing '}')")
        if text[position] == "}":
            return labels, position + 1
        match = _LABEL_NAME.match(text, position)
        if not match:
            raise ValueError(f"bad label name at column {position + 1}")
        name = match.group()
        position = match.end()
        if text[position : position + 2] != '="':
            raise ValueError(f'label {name}: expected =" at column {position + 1}')
        position += 2
        value = []
        while True:
            if position >= len(text):
                raise ValueError(f"label {name}: unterminated value")
            char = text[position]
            if char == "\\" and position + 1 < len(text):
                value.append(_ESCAPES.get(text[position + 1], "\\" + text[position + 1]))
                position += 2
            elif char == '"':
                position += 1
                break
            else:
                value.append(char)
                position += 1
        labels[name] = "".join(value)


def parse_sample_line(text: str, line_number: int) -> Sample:
    match = _NAME.match(text)
    if not match:
        raise ValueError("does not start with a metric name")
    name, position = match.group(), match.end()
    labels: dict[str, str] = {}
    if position < len(text) and text[position] == "{":
        labels, position = _labels(text, position)
    rest = text[position:].split()
    if not rest or len(rest) > 2:
        raise ValueError(f"expected a value and an optional timestamp after the series, got {text[position:]!r}")
    try:
        float(rest[0])
    except ValueError:
        raise ValueError(f"value {rest[0]!r} is not a number") from None
    try:
        timestamp = int(rest[1]) if len(rest) == 2 else None
    except ValueError:
        raise ValueError(f"timestamp {rest[1]!r} is not an integer (milliseconds)") from None
    return Sample(line_number, name, labels, rest[0], timestamp)


def read_exposition(text: str) -> Exposition:
    """All samples and `# TYPE`s of an exposition; `# HELP`, other comments and blank lines are skipped."""
    exposition = Exposition()
    for line_number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                exposition.types[parts[2]] = parts[3].strip()
            continue
        try:
            exposition.samples.append(parse_sample_line(line, line_number))
        except ValueError as error:
            raise QuarantineError(f"line {line_number}: {error}: {line[:120]!r}") from None
    return exposition


def read_text_file(path) -> str:
    """The file as UTF-8 text, gunzipped (bounded) when gzip; an empty or non-UTF-8 file is quarantined."""
    return read_text(path)

"""Fast path of the Kineto reader: the C json scanner without a per-integer Python hook.

The stdlib path parses with `parse_int=int_or_text` so that integers beyond int64 stay text; the hook
is a Python call per integer literal (about half the parse time on real traces). When the document
has no integer literal beyond int64 the hook returns `int(token)` for every literal, so a plain
`json.loads` gives the identical document. `has_big_int` finds such literals with numpy over the
bytes (digit runs of 19 or more not part of a fraction or exponent); when there is one, or the
check cannot tell, the caller takes the stdlib path.
"""

from __future__ import annotations

import numpy as np

INT64_MAX = 2**63 - 1
INT64_DIGITS = 19  # a literal shorter than this fits int64
_ZERO, _DOT, _MINUS = ord("0"), ord("."), ord("-")
_NOT_INT_AFTER = frozenset(b".eE")
_DIGITS = frozenset(b"0123456789")
_BLOCK = 1 << 22


def has_big_int(data: bytes) -> bool:
    """Whether the bytes may hold an integer literal outside int64 (conservative: digits in strings count)."""
    offset = 0
    while offset < len(data):  # in blocks that end on a non-digit, so numpy's temporaries stay small
        end = min(len(data), offset + _BLOCK)
        while end < len(data) and data[end] in _DIGITS:
            end += 1
        if any(_big(data, start, stop) for start, stop in _long_runs(data, offset, end)):
            return True
        offset = end
    return False


def _long_runs(data: bytes, offset: int, end: int) -> list[tuple[int, int]]:
    """(start, end) of the digit runs of 19 or more in data[offset:end] (which starts and ends off a run)."""
    digits = (np.frombuffer(data, dtype=np.uint8, count=end - offset, offset=offset) - _ZERO) < 10
    if len(digits) < INT64_DIGITS:
        return []
    edges = np.flatnonzero(np.diff(digits.view(np.int8)))  # last index before each change
    starts = edges[~digits[edges]] + 1  # a digit run starts after a non-digit
    ends = edges[digits[edges]] + 1  # ... and ends after its last digit
    if digits[0]:
        starts = np.concatenate(([0], starts))
    if digits[-1]:
        ends = np.concatenate((ends, [len(digits)]))
    long = (ends - starts) >= INT64_DIGITS
    return list(zip((starts[long] + offset).tolist(), (ends[long] + offset).tolist()))


def _big(data: bytes, start: int, end: int) -> bool:
    if start > 0 and data[start - 1] == _DOT:  # fraction digits
        return False
    if end < len(data) and data[end] in _NOT_INT_AFTER:  # mantissa of a float
        return False
    value = int(data[start:end])
    if start > 0 and data[start - 1] == _MINUS:
        value = -value
    return not -INT64_MAX - 1 <= value <= INT64_MAX

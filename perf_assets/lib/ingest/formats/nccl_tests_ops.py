"""Facts about nccl-tests collectives: NCCL version codes, busbw factors, and which op a bare table is.

Used by the nccl-tests parser; kept apart so the rules are small, named and testable on their own.
"""

from __future__ import annotations

from dataclasses import dataclass

# Bytes per element of the `type` column (nccl-tests names).
TYPE_BYTES = {
    "int8": 1,
    "uint8": 1,
    "f8e4m3": 1,
    "f8e5m2": 1,
    "half": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "float": 4,
    "int64": 8,
    "uint64": 8,
    "double": 8,
}


def nccl_version(code: int | None) -> str | None:
    """NCCL_VERSION_CODE -> "2.29.2" (22902); codes before 2.9 were major*1000 + minor*100 + patch (2708)."""
    if code is None or code <= 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def op_of_test(test_name: str | None) -> str | None:
    """`all_reduce_perf` -> `all_reduce` (the binary's name without `_perf`)."""
    if not test_name:
        return None
    return test_name.removesuffix("_perf")


def bus_factor(op: str | None, n_ranks: int | None) -> float | None:
    """busbw = algbw x factor (nccl-tests doc/PERFORMANCE.md); None when unknown."""
    if op is None or not n_ranks:
        return None
    n = n_ranks
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    if op in ("broadcast", "reduce", "sendrecv"):
        return 1.0
    return None


@dataclass(frozen=True)
class TableRow:
    """What op inference needs of one out-of-place row."""

    size_bytes: int
    count_elements: int
    data_type: str
    redop: str
    root: int | None
    algbw_gbps: float
    busbw_gbps: float


def infer_op(rows: list[TableRow], n_ranks: int | None, tolerance: float = 0.02) -> str | None:
    """The op of a table printed without its test name (older builds), only when the table proves it.

    all_reduce: a reduction (redop not `none`), no root, count x type size = size, busbw/algbw = 2(n-1)/n.
    reduce_scatter: a reduction, no root, count x type size x n = size, busbw/algbw = (n-1)/n.
    Everything else (all_gather and alltoall print the same shape, sendrecv equals all_reduce at n = 2)
    stays unknown: None, never a guess.
    """
    if not rows or not n_ranks or n_ranks < 3:
        return None
    largest = max(rows, key=lambda row: row.size_bytes)
    width = TYPE_BYTES.get(largest.data_type)
    if width is None or largest.redop == "none" or (largest.root is not None and largest.root >= 0):
        return None
    if largest.algbw_gbps <= 0:
        return None
    ratio = largest.busbw_gbps / largest.algbw_gbps
    elements_bytes = largest.count_elements * width
    for op, expected_bytes in (("all_reduce", elements_bytes), ("reduce_scatter", elements_bytes * n_ranks)):
        factor = bus_factor(op, n_ranks)
        if expected_bytes == largest.size_bytes and abs(ratio - factor) <= tolerance * factor:
            return op
    return None

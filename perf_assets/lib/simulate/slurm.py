"""Slurm spellings: compressed node lists, AllocTRES, and `sacct --parsable2` rows for an attempt."""

from __future__ import annotations

import re

from perf_assets.lib.simulate.clock import slurm_time
from perf_assets.lib.simulate.fleet import Attempt
from perf_assets.lib.simulate.scenario import Cluster

SACCT_COLUMNS = (
    "JobID",
    "JobName",
    "User",
    "Partition",
    "State",
    "ExitCode",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "NNodes",
    "NodeList",
    "AllocTRES",
)
SACCT_HEADER = "|".join(SACCT_COLUMNS)
EXIT_CODES = {"COMPLETED": "0:0", "NODE_FAIL": "0:0", "CANCELLED": "0:15", "RUNNING": "0:0"}

_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def compress_nodelist(nodes: list[str] | tuple[str, ...]) -> str:
    """`alpha-n01, alpha-n02, alpha-n04` -> `alpha-n[01-02,04]`; one node stays as it is."""
    if len(nodes) == 1:
        return nodes[0]
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    for node in nodes:
        match = _NUMBERED.match(node)
        if match:
            groups.setdefault((match.group(1), len(match.group(2))), []).append(int(match.group(2)))
        else:
            plain.append(node)
    pieces = []
    for (prefix, width), numbers in groups.items():
        numbers = sorted(set(numbers))
        if len(numbers) == 1:
            pieces.append(f"{prefix}{numbers[0]:0{width}d}")
            continue
        ranges, low = [], numbers[0]
        for previous, current in zip(numbers, numbers[1:] + [None]):
            if current is None or current != previous + 1:
                ranges.append(f"{low:0{width}d}" if low == previous else f"{low:0{width}d}-{previous:0{width}d}")
                low = current
        pieces.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(pieces + plain)


def alloc_tres(cluster: Cluster, n_nodes: int, *, billing: bool = True) -> str:
    cpus = cluster.cpus_per_node * n_nodes
    parts = [f"billing={cpus}"] if billing else []
    parts += [
        f"cpu={cpus}",
        f"gres/gpu={cluster.gpus_per_node * n_nodes}",
        f"mem={cluster.mem_per_node_gb * n_nodes}G",
        f"node={n_nodes}",
    ]
    return ",".join(parts)


def sacct_rows(attempt: Attempt, cluster: Cluster) -> list[str]:
    """The job row and its `.batch` step row (Submit/Eligible of a step are its start, as Slurm prints)."""
    job = attempt.job
    state = attempt.state
    exit_code = EXIT_CODES[state]
    start, end = slurm_time(attempt.start), slurm_time(attempt.end)
    job_row = [
        str(attempt.slurm_id),
        job.job_id,
        job.user,
        cluster.partition,
        state,
        exit_code,
        slurm_time(attempt.submit),
        slurm_time(attempt.eligible),
        start,
        end,
        str(len(attempt.nodes)),
        compress_nodelist(attempt.nodes),
        alloc_tres(cluster, len(attempt.nodes)),
    ]
    batch_row = [
        f"{attempt.slurm_id}.batch",
        "batch",
        "",
        "",
        state,
        exit_code,
        start,
        start,
        start,
        end,
        "1",
        attempt.nodes[0],
        alloc_tres(cluster, 1, billing=False),
    ]
    return ["|".join(job_row), "|".join(batch_row)]

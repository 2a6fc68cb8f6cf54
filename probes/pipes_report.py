"""The probe side of Dagster Pipes (``python -m probes run --pipes ...``, started by a Pipes client).

It needs only ``dagster-pipes`` (in the ``probes`` extra; no Dagster). The suite runs as it does from the
command line and lands its JSON lines under ``--out-dir`` on this host; Pipes carries back small facts:
a materialization whose metadata names the landed file, its sha256 and size (the Dagster side copies the
file into its own landing zone and checks the hash), the run id, device kind and row counts per status,
and the asset check ``probes_pass`` (no ``fail`` or ``error`` row). Log lines go to Dagster's log.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

from dagster_pipes import open_dagster_pipes

from probes.common import RunInfo
from probes.records import write_jsonl
from probes.suite import SuiteOptions, run_all

CHECK_NAME = "probes_pass"


def landed_facts(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return {"landed_path": str(path), "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def run_reporting_to_dagster(info: RunInfo, options: SuiteOptions, target: Path, progress: Any = None) -> int:
    """Run the suite inside a Pipes session; 0 when it measured (even with failing verdicts), 1 on an error row."""
    with open_dagster_pipes() as pipes:
        pipes.log.info(f"probes on {info.node}: {info.backend.device_kind} {info.backend.device_name}")
        rows = run_all(info, options, log=pipes.log.info, progress=progress)
        write_jsonl(rows, target)
        statuses = Counter(r.status for r in rows)
        failing = sorted({f"{r.probe}/{r.metric}" for r in rows if r.status in ("fail", "error")})
        metadata = {
            **landed_facts(target),
            "run_id": info.run_id,
            "node": info.node,
            "device_kind": info.backend.device_kind,
            "rows": len(rows),
            **{f"rows_{status}": count for status, count in sorted(statuses.items())},
        }
        pipes.report_asset_materialization(metadata=metadata)
        pipes.report_asset_check(
            check_name=CHECK_NAME,
            passed=not failing,
            severity="WARN",
            metadata={"failing": ", ".join(failing) or "none", "rows": len(rows)},
        )
    return 1 if statuses.get("error") else 0

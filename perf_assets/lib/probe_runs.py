"""Run probes on this host, or take a file a remote probe run landed, and put the result where ingestion reads
it (landing/probe_results/)."""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePosixPath
from typing import Callable

from perf_assets.lib.paths import DataHome
from probes.backends import hostname, select_backend
from probes.common import new_run
from probes.records import SOURCE, ProbeResult, land_bytes, landing_path, utc_now, write_jsonl
from probes.suite import SuiteOptions, run_all


def run_local_all(
    home: DataHome,
    cluster: str = "local",
    node: str | None = None,
    backend: str = "auto",
    options: SuiteOptions = SuiteOptions(),
    progress: Callable[[int, int, str], None] | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> tuple[Path, list[ProbeResult]]:
    """The probe catalogue (or ``options.probes``) on this host's first device, landed as one JSON-lines file."""
    node = node or hostname()
    started_at = utc_now()
    target = landing_path(home.landing, cluster, node, started_at)
    info = new_run(select_backend(backend), node=node, started_at=started_at)
    results = run_all(info, options, progress=progress, log=log)
    write_jsonl(results, target)
    return target, results


def landing_relative(remote_out_dir: str, remote_path: str) -> PurePosixPath:
    """The part of a remote landed path under its landing root: ``probe_results/<cluster>/<day>/<file>``.

    Refuses anything else (another folder, ``..``): a remote host never chooses where a file lands here.
    """
    root, path = PurePosixPath(remote_out_dir), PurePosixPath(remote_path)
    try:
        relative = path.relative_to(root)
    except ValueError:
        raise ValueError(f"{remote_path} is not under the remote landing root {remote_out_dir}") from None
    parts = relative.parts
    if len(parts) != 4 or parts[0] != SOURCE or ".." in parts or not parts[-1].endswith(".jsonl"):
        raise ValueError(f"{remote_path} is not a probe_results/<cluster>/<day>/<file>.jsonl landing path")
    return relative


def land_fetched(home: DataHome, relative: PurePosixPath, data: bytes, sha256: str) -> Path:
    """Write fetched bytes under ``home.landing`` after checking their sha256; atomic (temp file + rename).

    The same bytes already there: a no-op. Other bytes there: FileExistsError (landed files never change).
    """
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise ValueError(f"fetched {relative} has sha256 {digest}, the probe host reported {sha256}")
    return land_bytes(home.landing.joinpath(*relative.parts), data)

"""dbt's parsed project (partial_parse.msgpack) kept per data home, so that a build's dbt skips the full parse.

dagster-dbt gives every dbt invocation a fresh target folder and seeds it with dbt_project/target's
partial_parse.msgpack, which `dbt parse` wrote for another data home or none: the warehouse path in the profile
differs, so dbt throws it away and parses every model, test and macro again (10-15 s on 2 cores) on every build.
Here the asset seeds the folder with the file the previous invocation of the same kind left in this home (one per dbt
target and `--vars`, the other inputs of dbt's own check), and keeps the new one after. dbt still checks the file
against the project's files, the profile, the vars and the environment, and parses in full when any changed: a stale
file costs a parse, never a wrong manifest. Plain functions, no Dagster.
"""

from __future__ import annotations

import hashlib
import shutil
import uuid
from pathlib import Path

from perf_assets.lib.paths import DataHome

PARTIAL_PARSE_FILE = "partial_parse.msgpack"  # the name dbt reads and writes in its target folder
CACHE_DIR = "dbt_partial_parse"  # under warehouse/


def cache_file(home: DataHome, dbt_target: str, args: list[str]) -> Path:
    """The cached parse for dbt invocations with these arguments on this dbt target (only `--vars` matters)."""
    dbt_vars = args[args.index("--vars") + 1] if "--vars" in args[:-1] else ""
    key = hashlib.sha256(f"{dbt_target}\0{dbt_vars}".encode()).hexdigest()[:16]
    return home.warehouse_dir / CACHE_DIR / f"{key}.msgpack"


def run_folder(target_root: Path, op_name: str, run_id: str) -> Path:
    """A new dbt target folder named as dagster-dbt names its own: <op>-<run id[:7]>-<random>."""
    return target_root / f"{op_name}-{run_id[:7]}-{uuid.uuid4().hex[:7]}"


def seed(cache: Path, folder: Path) -> bool:
    """Copy the cached parse into a new target folder (dagster-dbt then leaves it there); whether there was one."""
    if not cache.is_file():
        return False
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cache, folder / PARTIAL_PARSE_FILE)
    return True


def keep(folder: Path, cache: Path) -> bool:
    """Keep the parse dbt wrote in its target folder for the next invocation (temp file + rename: a reader never
    sees half a file); whether there was one."""
    written = folder / PARTIAL_PARSE_FILE
    if not written.is_file():
        return False
    cache.parent.mkdir(parents=True, exist_ok=True)
    temporary = cache.with_suffix(".tmp")
    shutil.copyfile(written, temporary)
    temporary.replace(cache)
    return True

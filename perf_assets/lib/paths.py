"""Where everything lives: one setting, PERFWH_HOME, and the folders under it (docs/contracts.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DBT_PROJECT_DIR = REPO_ROOT / "dbt_project"
DEFAULT_HOME = REPO_ROOT / "data"
DEFAULT_SAMPLES = REPO_ROOT.parent / "shared" / "samples"


@dataclass(frozen=True)
class DataHome:
    """The folders under PERFWH_HOME. Every path is absolute."""

    root: Path

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    @property
    def lake_raw(self) -> Path:
        return self.root / "lake" / "raw"

    @property
    def manifest_dir(self) -> Path:
        return self.root / "lake" / "ingest_manifest"

    @property
    def warehouse_dir(self) -> Path:
        return self.root / "warehouse"

    @property
    def warehouse_db(self) -> Path:
        return self.warehouse_dir / "perf.duckdb"

    @property
    def dbt_runs(self) -> Path:
        """dbt's target folder per invocation of a build in this home (dbt.log, run_results.json), named as dagster-dbt
        names its own: warehouse_dbt_models-<run id[:7]>-<random>."""
        return self.warehouse_dir / "dbt_runs"

    @property
    def warehouse_lock(self) -> Path:
        return self.warehouse_dir / "perf.duckdb.writer.lock"

    @property
    def published_db(self) -> Path:
        return self.root / "published" / "perf.duckdb"

    @property
    def alerts_dir(self) -> Path:
        return self.root / "alerts"

    @property
    def reports_dir(self) -> Path:
        return self.root / "reports"

    @property
    def labels_file(self) -> Path:
        """Ground truth of simulated incidents, written by the simulator next to what it landed."""
        return self.landing / "labels.json"

    def ensure(self) -> "DataHome":
        for folder in (
            self.landing,
            self.lake_raw,
            self.manifest_dir,
            self.warehouse_dir,
            self.published_db.parent,
            self.alerts_dir,
            self.reports_dir,
        ):
            folder.mkdir(parents=True, exist_ok=True)
        return self


def data_home(override: str | os.PathLike[str] | None = None) -> DataHome:
    """Resolve PERFWH_HOME: an explicit override (--data-dir) wins, then the environment, then ./data."""
    raw = override or os.environ.get("PERFWH_HOME") or DEFAULT_HOME
    return DataHome(Path(raw).expanduser().resolve())


def samples_dir() -> Path:
    """Real export files for tests: PERFWH_SAMPLES, default ../shared/samples beside the repo."""
    return Path(os.environ.get("PERFWH_SAMPLES") or DEFAULT_SAMPLES).expanduser().resolve()


def positive_int_setting(name: str, default: int, what: str) -> int:
    """A whole-number setting >= 1 from the environment variable `name` (`default` when unset); `what` names the unit
    in the error a bad value raises."""
    text = os.environ.get(name, str(default)).strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a whole number of {what}") from None
    if value < 1:
        raise ValueError(f"{name}={value}: at least 1")
    return value

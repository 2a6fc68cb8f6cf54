"""The contracts writers and readers share: our own formats, raw tables, names (docs/contracts.md).

One module, so the simulator (a writer), the ingestors (readers and writers of the lake), dbt's
sources and the tests cannot drift apart. Later issues extend these lists; they do not change the
meaning of what is here. Every raw table also carries the lineage columns in ``LINEAGE_FIELDS``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

# --------------------------------------------------------------------------- names

ASSET_GROUPS = ("raw", "staging", "intermediate", "marts", "detection", "alerts", "evaluation", "probes")
WRITER_POOL = "warehouse_writer"
OWNER = "team:perf-warehouse"  # owner of every asset until teams own parts of the tree
MANIFEST_TABLE = "ingest_manifest"
REGRESSIONS_TABLE = "regressions"
SEED_METRIC_TREE = "metric_tree_nodes"
SEED_SKU_SPECS = "gpu_sku_specs"

MANIFEST_STATUSES = ("ok", "quarantined", "skipped")
NODE_STATES = ("in_service", "down", "repair", "maintenance", "drain")
STEP_EVENTS = (
    "job_start",
    "device_init_start",
    "device_init_end",
    "training_prep_start",
    "training_prep_end",
    "data_loading_start",
    "data_loading_end",
    "step_start",
    "ckpt_save_start",
    "ckpt_save_end",
    "ckpt_restore_start",
    "ckpt_restore_end",
    "custom_start",
    "custom_end",
    "job_end",
)
WORKLOADS = ("pretrain", "finetune", "eval", "inference", "other")

# Version of each of our own formats; every line (or document) carries it in field "version".
FORMAT_VERSIONS = {
    "inventory": 1,
    "node_software": 1,
    "node_events": 1,
    "step_events": 1,
    "job_meta": 1,
    "pending_queue": 1,
    "probe_results": 1,
    "labels": 1,
}

TS = pa.timestamp("us", tz="UTC")

LINEAGE_FIELDS = [
    pa.field("landed_file_id", pa.string(), nullable=False),
    pa.field("event_date", pa.date32(), nullable=False),
]


@dataclass(frozen=True)
class RawTable:
    """A raw table of the lake: ``lake/raw/<name>/event_date=YYYY-MM-DD/<landed_file_id>.parquet``."""

    source: str  # landing/<source>/...
    schema: pa.Schema  # without the lineage fields
    natural_key: tuple[str, ...]  # rows equal on these are one fact (staging keeps the first landed)
    description: str

    @property
    def name(self) -> str:
        return f"raw_{self.source}"

    @property
    def full_schema(self) -> pa.Schema:
        return pa.schema(list(self.schema) + LINEAGE_FIELDS)


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(name, dtype) for name, dtype in fields])


RAW_TABLES: dict[str, RawTable] = {
    table.source: table
    for table in [
        RawTable(
            source="inventory",
            schema=_schema(
                ("gpu_uuid", pa.string()),
                ("node", pa.string()),
                ("rack", pa.string()),
                ("cluster", pa.string()),
                ("sku", pa.string()),
                ("valid_from", TS),
                ("valid_to", TS),
            ),
            natural_key=("gpu_uuid", "valid_from"),
            description="Installed GPUs, one row per GPU and validity interval (valid_to null = still installed).",
        ),
        RawTable(
            source="node_software",
            schema=_schema(
                ("node", pa.string()),
                ("valid_from", TS),
                ("driver", pa.string()),
                ("cuda", pa.string()),
                ("nccl", pa.string()),
                ("torch", pa.string()),
                ("image", pa.string()),
                ("firmware", pa.string()),
                ("power_limit_w", pa.float64()),
            ),
            natural_key=("node", "valid_from"),
            description="Time-versioned software stack per node; a rollout is a new row.",
        ),
        RawTable(
            source="node_events",
            schema=_schema(
                ("node", pa.string()),
                ("state", pa.string()),
                ("reason", pa.string()),
                ("start_at", TS),
                ("end_at", TS),
            ),
            natural_key=("node", "state", "start_at"),
            description="Node state intervals (down, repair, maintenance, drain, in_service).",
        ),
        RawTable(
            source="step_events",
            schema=_schema(
                ("job_id", pa.string()),
                ("attempt", pa.int32()),
                ("rank", pa.int32()),
                ("event", pa.string()),
                ("step", pa.int64()),
                ("ts", TS),
                ("name", pa.string()),
            ),
            natural_key=("job_id", "attempt", "rank", "event", "step", "ts"),
            description="Goodput-recorder style job events (job_start, step_start, ckpt_save_start, ...).",
        ),
        RawTable(
            source="job_meta",
            schema=_schema(
                ("job_id", pa.string()),
                ("model_flops_per_step", pa.float64()),
                ("model_flops_per_token", pa.float64()),
                ("tokens_per_step", pa.float64()),
                ("dtype", pa.string()),
                ("dp", pa.int32()),
                ("tp", pa.int32()),
                ("pp", pa.int32()),
                ("cp", pa.int32()),
                ("workload", pa.string()),
                ("owner", pa.string()),
            ),
            natural_key=("job_id",),
            description="Model metadata per job: useful FLOPs per step, dtype, parallelism, workload, owner.",
        ),
        RawTable(
            source="pending_queue",
            schema=_schema(
                ("ts", TS),
                ("cluster", pa.string()),
                ("job_id", pa.string()),
                ("requested_gpus", pa.int32()),
                ("eligible_since", TS),
            ),
            natural_key=("ts", "cluster", "job_id"),
            description="Periodic snapshots of jobs waiting for GPUs.",
        ),
        RawTable(
            source="sacct",
            schema=_schema(
                ("cluster", pa.string()),
                ("job_id", pa.string()),
                ("job_step", pa.string()),
                ("job_name", pa.string()),
                ("user_name", pa.string()),
                ("partition", pa.string()),
                ("state", pa.string()),
                ("exit_code", pa.string()),
                ("submit_at", TS),
                ("eligible_at", TS),
                ("start_at", TS),
                ("end_at", TS),
                ("n_nodes", pa.int32()),
                ("node_list", pa.string()),
                ("nodes", pa.list_(pa.string())),
                ("alloc_gpus", pa.int32()),
                ("alloc_tres", pa.string()),
                ("fields_json", pa.string()),
            ),
            natural_key=("cluster", "job_id", "job_step"),
            description="Slurm accounting rows (sacct --parsable2): jobs and steps with their allocations.",
        ),
        RawTable(
            source="dcgm",
            schema=_schema(
                ("cluster", pa.string()),
                ("host", pa.string()),
                ("gpu_uuid", pa.string()),
                ("gpu_index", pa.int32()),
                ("model_name", pa.string()),
                ("field", pa.string()),
                ("ts", TS),
                ("value", pa.float64()),
                ("labels_json", pa.string()),
            ),
            natural_key=("host", "gpu_uuid", "gpu_index", "field", "ts"),
            description="DCGM field samples (Prometheus range-query JSON); NaN and DCGM blank sentinels are NULL.",
        ),
        RawTable(
            source="probe_results",
            schema=_schema(
                ("run_id", pa.string()),
                ("node", pa.string()),
                ("gpu_uuid", pa.string()),
                ("gpu_index", pa.int32()),
                ("sku", pa.string()),
                ("device_kind", pa.string()),
                ("probe", pa.string()),
                ("metric", pa.string()),
                ("value", pa.float64()),
                ("unit", pa.string()),
                ("median", pa.float64()),
                ("iqr", pa.float64()),
                ("ci_low", pa.float64()),
                ("ci_high", pa.float64()),
                ("n", pa.int32()),
                ("throttle_class", pa.string()),
                ("peak", pa.float64()),
                ("fraction_of_peak", pa.float64()),
                ("status", pa.string()),
                ("reason", pa.string()),
                ("started_at", TS),
                ("context_json", pa.string()),
            ),
            natural_key=("run_id", "gpu_uuid", "probe", "metric"),
            description="Probe results, one row per (run, GPU, probe, metric), with uncertainty and verdict.",
        ),
    ]
}

MANIFEST_SCHEMA = _schema(
    ("file_id", pa.string()),
    ("path", pa.string()),  # relative to landing/
    ("sha256", pa.string()),
    ("size_bytes", pa.int64()),
    ("source", pa.string()),
    ("format", pa.string()),
    ("parser_version", pa.int32()),
    ("rows", pa.int64()),
    ("status", pa.string()),  # ok | quarantined | skipped
    ("reason", pa.string()),
    ("cluster", pa.string()),
    ("host", pa.string()),
    ("job_id", pa.string()),
    ("rank", pa.string()),
    ("captured_at", TS),
    ("ingested_at", TS),
)


def raw_table(source: str) -> RawTable:
    try:
        return RAW_TABLES[source]
    except KeyError:
        raise KeyError(f"unknown source {source!r}; known: {', '.join(sorted(RAW_TABLES))}") from None

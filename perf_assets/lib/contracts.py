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
    # Landing folders whose parsers write this table when it is not landing/<source>/ itself (a table
    # shared by several formats, e.g. raw_trace_events from kineto and nsys); () = fed by `source`.
    fed_by: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"raw_{self.source}"

    @property
    def full_schema(self) -> pa.Schema:
        return pa.schema(list(self.schema) + LINEAGE_FIELDS)


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(name, dtype) for name, dtype in fields])


# The columns every trace table starts with: which capture (trace file) and which rank of which job.
TRACE_IDENTITY = (
    ("capture_id", pa.string()),
    ("trace_format", pa.string()),
    ("host", pa.string()),
    ("job_id", pa.string()),
    ("rank", pa.int32()),
)

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
                ("gpu_instance", pa.int32()),  # MIG GPU instance (GPU_I_ID, dcgmi `GPU-I n`); NULL: whole GPU
                ("pci_bus_id", pa.string()),  # dddd:bb:dd.f, lower case
                ("model_name", pa.string()),
                ("field", pa.string()),
                ("ts", TS),
                ("value", pa.float64()),
                ("labels_json", pa.string()),
            ),
            natural_key=("host", "gpu_uuid", "gpu_index", "gpu_instance", "field", "ts"),
            description=(
                "DCGM field samples (Prometheus range-query JSON, dcgm-exporter text, dcgmi dmon); "
                "NaN and DCGM blank sentinels are NULL."
            ),
        ),
        RawTable(
            source="nvidia_smi",
            schema=_schema(
                ("cluster", pa.string()),
                ("host", pa.string()),
                ("gpu_uuid", pa.string()),  # GPU-<uuid>; NULL when masked (all zeros) or absent
                ("gpu_index", pa.int32()),
                ("pci_bus_id", pa.string()),  # dddd:bb:dd.f, lower case
                ("model_name", pa.string()),
                ("field", pa.string()),  # query field (utilization.gpu), dmon.<column> or exporter metric name
                ("ts", TS),
                ("value", pa.float64()),  # NULL for [N/A], [Not Supported], ... and for text
                ("unit", pa.string()),
                ("text_value", pa.string()),  # non-numeric values as written (hex bitmasks also in value)
                ("section", pa.string()),  # query-gpu | dmon | exporter, with the bundle phase (idle/load)
            ),
            natural_key=("host", "gpu_uuid", "gpu_index", "field", "ts"),
            description="nvidia-smi samples (--query-gpu CSV, capture bundles, nvidia_gpu_exporter text), long format.",
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
        # Traces (docs/formats/traces.md): one canonical pair of tables written by the kineto and nsys parsers.
        RawTable(
            source="trace_events",
            fed_by=("kineto", "nsys"),
            schema=_schema(
                *TRACE_IDENTITY,
                ("device_index", pa.int32()),
                ("stream", pa.int64()),
                ("category", pa.string()),  # kernel|memcpy|memset|sync|runtime|annotation|range_profiler
                ("kernel_type", pa.string()),  # compute|communication|memory for GPU activities, else NULL
                ("name", pa.string()),
                ("start_ns", pa.int64()),
                ("end_ns", pa.int64()),
                ("dur_ns", pa.int64()),
                ("time_absolute", pa.bool_()),  # false: ns relative to the trace's own zero
                ("correlation_id", pa.int64()),
                ("in_breakdown", pa.bool_()),
                ("collective_name", pa.string()),
                ("process_group_name", pa.string()),
                ("group_size", pa.int32()),
                ("in_msg_nelems", pa.int64()),
                ("out_msg_nelems", pa.int64()),
                ("msg_dtype", pa.string()),
                ("bytes", pa.int64()),
                ("event_seq", pa.int64()),
                ("args_json", pa.string()),  # compact JSON; Kineto: the trace's text and key order; nsys: sorted
            ),
            natural_key=("capture_id", "event_seq"),
            description="GPU activities, runtime calls and annotations of profiler traces (Kineto JSON, nsys SQLite).",
        ),
        RawTable(
            source="trace_rank_breakdowns",
            fed_by=("kineto", "nsys"),
            schema=_schema(
                *TRACE_IDENTITY,
                ("rank_source", pa.string()),  # trace | path | NULL
                ("world_size", pa.int32()),
                ("device_index", pa.int32()),
                ("device_name", pa.string()),
                ("device_uuid", pa.string()),
                ("captured_at", TS),
                ("time_base", pa.string()),
                ("time_absolute", pa.bool_()),
                ("span_start_ns", pa.int64()),
                ("span_end_ns", pa.int64()),
                ("span_ns", pa.int64()),
                ("busy_ns", pa.int64()),
                ("idle_ns", pa.int64()),
                ("compute_ns", pa.int64()),
                ("non_compute_ns", pa.int64()),
                ("communication_ns", pa.int64()),
                ("comm_compute_overlap_ns", pa.int64()),
                ("idle_share", pa.float64()),
                ("compute_share", pa.float64()),
                ("non_compute_share", pa.float64()),
                ("comm_overlap_share", pa.float64()),
                ("kernel_count", pa.int64()),
                ("kernel_time_ns", pa.int64()),
                ("communication_kernel_count", pa.int64()),
                ("activities_excluded", pa.int64()),
                ("note", pa.string()),
            ),
            natural_key=("capture_id", "rank", "device_index"),
            description="HTA temporal breakdown and comm/compute overlap per trace rank and device, computed at ingest.",
        ),
        RawTable(
            source="trace_idle_breakdowns",
            fed_by=("kineto", "nsys"),
            schema=_schema(
                *TRACE_IDENTITY,
                ("device_index", pa.int32()),
                ("stream", pa.int64()),
                ("activity_count", pa.int64()),
                ("gap_count", pa.int64()),
                ("launch_unknown_count", pa.int64()),  # activities without a correlated runtime launch
                ("idle_ns", pa.int64()),
                ("host_wait_ns", pa.int64()),
                ("kernel_wait_ns", pa.int64()),
                ("other_ns", pa.int64()),
                ("host_wait_share", pa.float64()),  # of idle_ns; NULL when the stream was never idle
                ("kernel_wait_share", pa.float64()),
                ("other_share", pa.float64()),
                ("kernel_wait_threshold_ns", pa.int64()),
            ),
            natural_key=("capture_id", "rank", "device_index", "stream"),
            description="HTA idle-time breakdown (host wait, kernel wait, other) per trace rank, device and stream.",
        ),
        RawTable(
            source="trace_kernel_types",
            fed_by=("kineto", "nsys"),
            schema=_schema(
                *TRACE_IDENTITY,
                ("device_index", pa.int32()),
                ("kernel_type", pa.string()),  # compute | communication | memory
                ("activity_count", pa.int64()),
                ("time_ns", pa.int64()),  # sum of durations
                ("time_share", pa.float64()),  # of the device's summed activity time
                ("union_ns", pa.int64()),
                ("exclusive_ns", pa.int64()),  # no activity of another type running
            ),
            natural_key=("capture_id", "rank", "device_index", "kernel_type"),
            description="Kernel-type breakdown (count, time, union, exclusive time) per trace rank and device.",
        ),
        RawTable(
            source="trace_step_busy",
            fed_by=("kineto", "nsys"),
            schema=_schema(
                *TRACE_IDENTITY,
                ("device_index", pa.int32()),
                ("step", pa.int64()),
                ("step_start_ns", pa.int64()),
                ("step_end_ns", pa.int64()),
                ("span_ns", pa.int64()),
                ("busy_ns", pa.int64()),  # |U GPU activities inside the step window|
                ("activity_count", pa.int64()),
                ("last_step", pa.bool_()),  # the capture's last step, often cut off
                ("time_absolute", pa.bool_()),
            ),
            natural_key=("capture_id", "rank", "device_index", "step"),
            description="GPU busy time per ProfilerStep window, trace rank and device (straggler input).",
        ),
        # Benchmarks (docs/formats/benchmarks.md): nccl-tests logs and MLPerf :::MLLOG result logs.
        RawTable(
            source="nccl_tests",
            schema=_schema(
                ("cluster", pa.string()),
                ("host", pa.string()),  # from the file name: where the log was written
                ("job_id", pa.string()),
                ("captured_at", TS),  # from the file name; the format has no time of its own
                ("run_id", pa.string()),
                ("run_index", pa.int32()),  # position of the test in the file (several back to back)
                ("test_name", pa.string()),  # all_reduce_perf; NULL when not printed
                ("op", pa.string()),  # all_reduce
                ("op_source", pa.string()),  # header | inferred (from the table's shape) | NULL
                ("nccl_tests_version", pa.string()),
                ("nccl_version", pa.string()),  # from nccl-library=22902 -> 2.29.2
                ("n_threads", pa.int32()),
                ("n_gpus", pa.int32()),  # per process
                ("min_bytes", pa.int64()),
                ("max_bytes", pa.int64()),
                ("max_bytes_reduced_to", pa.int64()),  # "Reducing maxBytes to ..." notice
                ("step", pa.string()),  # 2(factor) | 1048576(bytes)
                ("warmup_iters", pa.int32()),
                ("iters", pa.int32()),
                ("agg_iters", pa.int32()),
                ("validation", pa.int32()),
                ("graph", pa.int32()),
                ("n_ranks", pa.int32()),
                ("n_hosts", pa.int32()),
                ("hosts", pa.list_(pa.string())),
                ("gpu_name", pa.string()),  # when every rank names the same GPU
                ("rank_map_json", pa.string()),  # [{rank, group, pid, host, device, bus, bus_id, gpu}]
                ("avg_bus_bandwidth_gbps", pa.float64()),  # the trailer; NULL when the run stopped before it
                ("out_of_bounds_values", pa.int64()),
                ("status", pa.string()),  # ok | failed
                ("error_text", pa.string()),
                ("nccl_debug_lines", pa.int32()),  # NCCL INFO/WARN lines interleaved, skipped (counted)
                ("other_lines", pa.int32()),  # lines no rule reads, skipped (counted)
                ("placement", pa.string()),  # out_of_place | in_place; NULL on a run without rows
                ("size_bytes", pa.int64()),
                ("count_elements", pa.int64()),
                ("data_type", pa.string()),
                ("redop", pa.string()),
                ("root", pa.int32()),
                ("time_us", pa.float64()),
                ("algbw_gbps", pa.float64()),
                ("busbw_gbps", pa.float64()),
                ("wrong", pa.int64()),  # NULL for N/A (no validation)
            ),
            natural_key=("run_id", "placement", "size_bytes", "data_type", "redop", "root"),
            description="nccl-tests results: one row per (test run, size, type, redop, root, placement); failed runs kept.",
        ),
        RawTable(
            source="mlperf_events",
            fed_by=("mlperf",),
            schema=_schema(
                ("cluster", pa.string()),
                ("host", pa.string()),
                ("job_id", pa.string()),
                ("run_id", pa.string()),  # from benchmark, submitter, platform and the first init_start time
                ("event_id", pa.string()),  # hash of (namespace, event_type, key, value, metadata)
                ("event_index", pa.int32()),  # order of first appearance
                ("line_number", pa.int32()),  # line of first appearance in the file
                ("namespace", pa.string()),
                ("event_type", pa.string()),  # POINT_IN_TIME | INTERVAL_START | INTERVAL_END
                ("key", pa.string()),
                ("value_json", pa.string()),
                ("value_num", pa.float64()),  # when the value is a number
                ("time_ms", pa.int64()),  # earliest copy, epoch ms as logged
                ("ts", TS),  # earliest copy
                ("ts_last", TS),  # latest copy (rank skew)
                ("metadata_json", pa.string()),
                ("epoch_num", pa.float64()),
                ("step", pa.int64()),
                ("samples_count", pa.int64()),
                ("status", pa.string()),  # metadata.status (run_stop: success | aborted)
                ("duplicate_count", pa.int32()),  # copies of this event in the file (per-rank logging)
                ("system_json", pa.string()),  # the run's :::SYSJSON
                ("mllog_records", pa.int32()),  # :::MLLOG records read in the file, copies included
                ("sysjson_lines", pa.int32()),
                ("other_lines", pa.int32()),  # non-MLLOG lines ignored (counted)
                ("prefixed_lines", pa.int32()),  # MLLOG lines with an srun --label or other prefix
            ),
            natural_key=("run_id", "event_id"),
            description="MLPerf :::MLLOG events, one row per distinct event of a run (per-rank copies counted).",
        ),
    ]
}


def landing_sources() -> set[str]:
    """Every landing folder some raw table is fed from."""
    return {source for table in RAW_TABLES.values() for source in (table.fed_by or (table.source,))}


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

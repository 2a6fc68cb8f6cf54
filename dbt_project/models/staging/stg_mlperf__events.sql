-- MLPerf :::MLLOG events, one row per (run, event). Per-rank copies were collapsed at ingest
-- (duplicate_count, ts = first copy, ts_last = last copy); value_json holds the value as JSON text.
with

source as (
    select * from {{ source('lake_benchmarks', 'raw_mlperf_events') }}
),

renamed as (
    select
        ----------  ids
        run_id,
        event_id,
        event_index,
        cluster,
        host,
        job_id,
        landed_file_id,
        ----------  strings
        namespace,
        event_type,
        key,
        value_json,
        metadata_json,
        status,
        system_json,
        ----------  numerics
        value_num,
        time_ms,
        epoch_num,
        step,
        samples_count,
        duplicate_count,
        line_number,
        mllog_records,
        sysjson_lines,
        other_lines,
        prefixed_lines,
        ----------  timestamps
        ts,
        ts_last,
        event_date
    from source
    {{ dedupe_on(['run_id', 'event_id']) }}
)

select * from renamed

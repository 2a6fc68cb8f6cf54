with

source as (
    select * from {{ source('lake_traces', 'raw_trace_rank_breakdowns') }}
),

renamed as (
    select
        ----------  ids
        capture_id,
        landed_file_id,
        trace_format,
        host,
        job_id,
        rank,
        rank_source,
        world_size,
        device_index,
        device_name,
        device_uuid,
        ----------  strings
        time_base,
        note,
        ----------  numerics (ns; NULL = unknown, e.g. a trace without kernels)
        span_ns,
        busy_ns,
        idle_ns,
        compute_ns,
        non_compute_ns,
        communication_ns,
        comm_compute_overlap_ns,
        idle_share,
        compute_share,
        non_compute_share,
        comm_overlap_share,
        kernel_count,
        kernel_time_ns,
        communication_kernel_count,
        activities_excluded,
        ----------  booleans
        time_absolute,
        ----------  timestamps
        captured_at,
        span_start_ns,
        span_end_ns,
        case when time_absolute then {{ timestamp_from_micros(int_div('span_start_ns', 1000)) }} end as span_started_at
    from source
    {{ dedupe_on(['capture_id', 'rank', 'device_index']) }}
)

select * from renamed

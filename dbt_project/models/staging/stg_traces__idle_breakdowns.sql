with

source as (
    select * from {{ source('lake_traces', 'raw_trace_idle_breakdowns') }}
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
        device_index,
        stream,
        ----------  numerics (ns; shares of idle_ns, NULL when the stream was never idle)
        activity_count,
        gap_count,
        launch_unknown_count,
        idle_ns,
        host_wait_ns,
        kernel_wait_ns,
        other_ns,
        host_wait_share,
        kernel_wait_share,
        other_share,
        kernel_wait_threshold_ns
    from source
    {{ dedupe_on(['capture_id', 'rank', 'device_index', 'stream']) }}
)

select * from renamed

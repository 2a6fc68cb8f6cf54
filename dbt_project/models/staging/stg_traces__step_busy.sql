with

source as (
    select * from {{ source('lake_traces', 'raw_trace_step_busy') }}
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
        step,
        ----------  numerics (ns)
        span_ns,
        busy_ns,
        activity_count,
        case when span_ns > 0 then busy_ns / span_ns end as busy_share,
        ----------  booleans
        last_step,
        time_absolute,
        ----------  timestamps (ns; absolute UTC only when time_absolute)
        step_start_ns,
        step_end_ns,
        case when time_absolute then {{ timestamp_from_micros(int_div('step_start_ns', 1000)) }} end as step_started_at
    from source
    {{ dedupe_on(['capture_id', 'rank', 'device_index', 'step']) }}
)

select * from renamed

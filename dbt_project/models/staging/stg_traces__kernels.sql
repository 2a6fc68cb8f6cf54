with

source as (
    select * from {{ source('lake_traces', 'raw_trace_events') }}
    where category = 'kernel'
),

renamed as (
    select
        ----------  ids
        capture_id,
        event_seq,
        landed_file_id,
        trace_format,
        host,
        job_id,
        rank,
        device_index,
        stream,
        correlation_id,
        ----------  strings
        name as kernel_name,
        kernel_type,
        collective_name,
        process_group_name,
        msg_dtype,
        ----------  numerics
        group_size,
        in_msg_nelems,
        out_msg_nelems,
        dur_ns,
        ----------  booleans
        in_breakdown,
        time_absolute,
        ----------  timestamps (ns; absolute UTC only when time_absolute)
        start_ns,
        end_ns,
        case when time_absolute then {{ timestamp_from_micros(int_div('start_ns', 1000)) }} end as started_at
    from source
    {{ dedupe_on(['capture_id', 'event_seq']) }}
)

select * from renamed

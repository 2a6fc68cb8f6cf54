with

source as (
    select * from {{ source('lake_traces', 'raw_trace_kernel_types') }}
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
        ----------  strings
        kernel_type,
        ----------  numerics (ns)
        activity_count,
        time_ns,
        time_share,
        union_ns,
        exclusive_ns
    from source
    {{ dedupe_on(['capture_id', 'rank', 'device_index', 'kernel_type']) }}
)

select * from renamed

with

source as (
    select * from {{ source('lake', 'raw_probe_results') }}
),

renamed as (
    select
        ----------  ids
        run_id,
        node,
        gpu_uuid,
        gpu_index,
        landed_file_id,
        ----------  strings
        sku,
        device_kind,
        probe,
        metric,
        unit,
        throttle_class,
        status,
        reason,
        context_json,
        ----------  numerics
        value,
        median,
        iqr,
        ci_low,
        ci_high,
        n,
        peak,
        fraction_of_peak,
        ----------  timestamps
        started_at
    from source
    {{ dedupe_on(['run_id', 'gpu_uuid', 'probe', 'metric']) }}
)

select * from renamed

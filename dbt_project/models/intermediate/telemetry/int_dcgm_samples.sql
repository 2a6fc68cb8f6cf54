-- stg_dcgm__samples materialised by day (docs/incremental.md): the deduplicated DCGM samples, built once per day
-- instead of deduplicating the whole raw history in every model that reads them. A batch reads the raw rows of its
-- day only (stg_dcgm__samples' event_time), so a late file for an old day changes that day when it is rebuilt.
{{ daily_microbatch_config('sampled_at', 'sampled_date') }}
with

samples as (
    select * from {{ ref('stg_dcgm__samples') }}
),

final as (
    select
        cluster,
        node,
        gpu_uuid,
        gpu_index,
        gpu_instance,
        pci_bus_id,
        landed_file_id,
        model_name,
        field,
        value,
        copies,
        conflicting,
        sampled_at,
        cast(sampled_at as date) as sampled_date
    from samples
)

select * from final

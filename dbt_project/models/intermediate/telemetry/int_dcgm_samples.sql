-- stg_dcgm__samples materialised by day (docs/incremental.md): the deduplicated DCGM samples, built once per day
-- instead of deduplicating the whole raw history in every model that reads them. A batch applies staging's rules
-- (the macro deduplicated_dcgm_samples) to the raw rows of its days only (dbt filters raw_dcgm by its event_time,
-- ts; a filter on the view's output would not reach the hash aggregate inside it), so a late file for an old day
-- changes that day when it is rebuilt.
-- depends_on: {{ ref('stg_dcgm__samples') }}
{{ daily_microbatch_config('sampled_at', 'sampled_date') }}
with

samples as (
    {{ deduplicated_dcgm_samples(source('lake', 'raw_dcgm')) | indent(4) }}
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

-- DCGM samples delivered more than once with different values (two exporters or Prometheus
-- replicas disagreeing, a re-export after a correction, one value known and one NULL): one row per
-- natural key that conflicted, with the value staging kept. Duplicates that agree are not listed
-- (staging keeps one row; `copies` in stg_dcgm__samples counts them). Built by day (docs/incremental.md): a
-- day's conflicts read that day's raw rows and kept samples only.
{{ daily_microbatch_config('sampled_at', 'sampled_date') }}
with

raw as (
    select * from {{ source('lake', 'raw_dcgm') }}
),

kept as (
    select * from {{ ref('int_dcgm_samples') }}
    where conflicting
),

final as (
    select
        kept.cluster,
        kept.node,
        kept.gpu_uuid,
        kept.gpu_index,
        kept.gpu_instance,
        kept.field,
        kept.sampled_at,
        kept.copies,
        count(distinct raw.landed_file_id) as landed_files,
        min(raw.value) as min_value,
        max(raw.value) as max_value,
        count(*) - count(raw.value) as null_copies,
        kept.value as kept_value,
        kept.landed_file_id as kept_landed_file_id,
        kept.sampled_date
    from kept
    inner join raw
        on raw.host = kept.node
        and raw.field = kept.field
        and raw.ts = kept.sampled_at
        and raw.gpu_uuid is not distinct from kept.gpu_uuid
        and raw.gpu_index is not distinct from kept.gpu_index
        and raw.gpu_instance is not distinct from kept.gpu_instance
    group by all
)

select * from final

-- The last known sample of each DCGM series on each UTC day, for the fields whose models look back across midnight
-- (counters: int_dcgm_counter_deltas; XID codes: int_dcgm_xid_events; power: int_companion_gpu_days). A day batch
-- of those models takes each series' previous sample before the batch from this table (one row per series and day)
-- instead of scanning every earlier sample, so building day by day costs in proportion to the days, not to their
-- square, and a day built alone still equals a full build's.
{{ daily_microbatch_config('sampled_at', 'sampled_date') }}
with

look_back_fields as (
    select field from {{ ref('dcgm_fields') }} where prometheus_type = 'counter'
    union all
    select 'DCGM_FI_DEV_XID_ERRORS' as field
    union all
    select 'DCGM_FI_DEV_POWER_USAGE' as field
)

select
    samples.cluster,
    samples.node,
    samples.gpu_uuid,
    samples.gpu_index,
    samples.gpu_instance,
    samples.field,
    samples.sampled_date,
    max(samples.sampled_at) as sampled_at,
    max_by(samples.value, samples.sampled_at) as value
from {{ ref('int_dcgm_samples') }} as samples
where samples.value is not null
    and samples.field in (select distinct field from look_back_fields)
group by all

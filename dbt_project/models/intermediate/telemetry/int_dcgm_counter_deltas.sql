-- Per-sample deltas of DCGM counters (fields the dcgm_fields seed types `counter`: energy, PCIe
-- replays, NVLink bandwidth, ECC counts, violation times), in time order within each series
-- (out-of-order deliveries are sorted here). A counter that goes down was reset (driver reload,
-- reboot): the new value is the delta since the reset, and the row is flagged. NULL samples are
-- unknown and skipped, so a delta spans the gap back to the previous known sample
-- (previous_sampled_at); the first known sample of a series has no delta (NULL, not 0).
-- Built by day (docs/incremental.md): a day's first sample of a series takes its previous known sample from the
-- earlier days (however old; their last samples in int_dcgm_series_day_last), so a day built alone equals a full
-- build's.
{{ daily_microbatch_config('sampled_at', 'sampled_date') }}
with

counter_fields as (
    select field, unit from {{ ref('dcgm_fields') }}
    where prometheus_type = 'counter'
),

counter_samples as (
    select
        samples.cluster,
        samples.node,
        samples.gpu_uuid,
        samples.gpu_index,
        samples.gpu_instance,
        samples.field,
        counter_fields.unit,
        samples.sampled_at,
        samples.value
    from {{ ref('int_dcgm_samples').render() }} as samples
    inner join counter_fields on samples.field = counter_fields.field
    where samples.value is not null
),

counter_day_last as (
    -- each series' last known sample of every day (the look-back of a day batch reads these, not every sample)
    select
        day_last.cluster,
        day_last.node,
        day_last.gpu_uuid,
        day_last.gpu_index,
        day_last.gpu_instance,
        day_last.field,
        counter_fields.unit,
        day_last.sampled_at,
        day_last.value
    from {{ ref('int_dcgm_series_day_last').render() }} as day_last
    inner join counter_fields on day_last.field = counter_fields.field
),

series_samples as (
    -- the day's samples and the last known sample of each series before this day
    {{ batch_with_last_before('counter_samples', ['cluster', 'node', 'gpu_uuid', 'gpu_index', 'gpu_instance', 'field', 'unit'], 'sampled_at', ['value'], 'counter_day_last') }}
),

ordered as (
    select
        *,
        lag(value) over series as previous_value,
        lag(sampled_at) over series as previous_sampled_at
    from series_samples
    window series as (partition by node, gpu_uuid, gpu_index, gpu_instance, field order by sampled_at)
),

final as (
    select
        cluster,
        node,
        gpu_uuid,
        gpu_index,
        gpu_instance,
        field,
        unit,
        previous_sampled_at,
        sampled_at,
        previous_value,
        value,
        case
            when previous_value is null then null
            when value >= previous_value then value - previous_value
            else value
        end as delta,
        coalesce(value < previous_value, false) as is_reset,
        cast(sampled_at as date) as sampled_date
    from ordered
    where in_batch
)

select * from final

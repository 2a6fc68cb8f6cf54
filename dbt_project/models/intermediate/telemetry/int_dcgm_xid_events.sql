-- XID errors from DCGM_FI_DEV_XID_ERRORS, a gauge holding the code of the last XID (0: none yet).
-- An event is a change to a non-zero code, in time order within a GPU (or MIG instance) series:
-- counting samples or summing codes would count one XID once per scrape. A non-zero code on the
-- first known sample of a series is kept with is_first_observation = true: it happened before
-- observation began (or before a gap), so its time is unknown; count events with `not
-- is_first_observation`. The same code raised twice in a row cannot be seen (the gauge does not change).
-- Built by day (docs/incremental.md): a day's first sample of a series takes its previous known code from the
-- earlier days (however old; their last codes in int_dcgm_series_day_last), so a day built alone equals a full
-- build's.
{{ daily_microbatch_config('sampled_at', 'sampled_date') }}
with

xid_samples as (
    select cluster, node, gpu_uuid, gpu_index, gpu_instance, sampled_at, value
    from {{ ref('int_dcgm_samples').render() }}
    where field = 'DCGM_FI_DEV_XID_ERRORS' and value is not null
),

xid_day_last as (
    -- each series' last known code of every day (the look-back of a day batch reads these, not every sample)
    select cluster, node, gpu_uuid, gpu_index, gpu_instance, sampled_at, value
    from {{ ref('int_dcgm_series_day_last').render() }}
    where field = 'DCGM_FI_DEV_XID_ERRORS'
),

series_samples as (
    -- the day's samples and the last known code of each series before this day
    {{ batch_with_last_before('xid_samples', ['cluster', 'node', 'gpu_uuid', 'gpu_index', 'gpu_instance'], 'sampled_at', ['value'], 'xid_day_last') }}
),

ordered as (
    select
        *,
        lag(value) over series as previous_code,
        lag(sampled_at) over series as previous_sampled_at
    from series_samples
    window series as (partition by node, gpu_uuid, gpu_index, gpu_instance order by sampled_at)
),

final as (
    select
        cluster,
        node,
        gpu_uuid,
        gpu_index,
        gpu_instance,
        previous_sampled_at,
        sampled_at,
        cast(previous_code as integer) as previous_code,
        cast(value as integer) as xid,
        previous_code is null as is_first_observation,
        cast(sampled_at as date) as sampled_date
    from ordered
    where in_batch and value <> 0 and (previous_code is null or value <> previous_code)
)

select * from final

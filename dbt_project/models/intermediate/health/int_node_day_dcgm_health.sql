-- DCGM health per node and UTC day (whole GPUs): XID events (critical ones apart), ECC error counts, remapped
-- rows, a failed row remap, and time held down by thermal and power violations. A figure is NULL when its
-- field was not observed that node-day (unknown, never 0); a counter's first sample has no delta. Built by day
-- (docs/incremental.md): a day reads that day's samples, XID events and counter deltas only.
{{ daily_microbatch_config('health_date', 'health_date') }}
with

observed as (
    select
        node,
        cast(sampled_at as date) as health_date,
        bool_or(field = 'DCGM_FI_DEV_XID_ERRORS') as xid_observed,
        max(case when field = 'DCGM_FI_DEV_ROW_REMAP_FAILURE' then value end) as row_remap_failure
    from {{ ref('int_dcgm_samples') }}
    where
        value is not null
        and gpu_instance is null
        and field in ('DCGM_FI_DEV_XID_ERRORS', 'DCGM_FI_DEV_ROW_REMAP_FAILURE')
    group by all
),

xids as (
    select
        node,
        cast(sampled_at as date) as health_date,
        count(*) as xid_events,
        count(*) filter (where xid in ({{ var('critical_xids', '48, 63, 64, 74, 79, 92, 94, 95, 119, 120') }}))
            as critical_xid_events,
        {{ sorted_distinct_list('xid') }} as xid_codes
    from {{ ref('int_dcgm_xid_events') }}
    where not is_first_observation and gpu_instance is null
    group by all
),

counters as (
    select
        node,
        cast(sampled_at as date) as health_date,
        sum(delta) filter (where field = 'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL') as ecc_sbe_errors,
        sum(delta) filter (where field = 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL') as ecc_dbe_errors,
        sum(delta) filter (where field = 'DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS') as uncorrectable_remapped_rows,
        sum(delta) filter (where field = 'DCGM_FI_DEV_THERMAL_VIOLATION') / 1e9 as thermal_throttle_s,
        sum(delta) filter (where field = 'DCGM_FI_DEV_POWER_VIOLATION') / 1e9 as power_throttle_s
    from {{ ref('int_dcgm_counter_deltas') }}
    where gpu_instance is null and field in (
        'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL', 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL', 'DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS',
        'DCGM_FI_DEV_THERMAL_VIOLATION', 'DCGM_FI_DEV_POWER_VIOLATION'
    )
    group by all
),

spine as (
    select node, health_date from observed
    union
    select node, health_date from counters
)

select
    s.node,
    s.health_date,
    case when o.xid_observed then coalesce(x.xid_events, 0) end as xid_events,
    case when o.xid_observed then coalesce(x.critical_xid_events, 0) end as critical_xid_events,
    x.xid_codes,
    c.ecc_sbe_errors,
    c.ecc_dbe_errors,
    c.uncorrectable_remapped_rows,
    o.row_remap_failure,
    c.thermal_throttle_s,
    c.power_throttle_s
from spine as s
left join observed as o using (node, health_date)
left join xids as x using (node, health_date)
left join counters as c using (node, health_date)

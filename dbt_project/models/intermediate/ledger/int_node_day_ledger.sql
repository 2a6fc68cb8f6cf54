-- The capacity ledger per node and day, in GPU-seconds (gs): the sums of the node's hours in
-- int_node_hour_ledger (every installed GPU-second is one of down_*, idle_*, badput or productive, precedence
-- down > allocated > idle), so installed = down + idle + badput + productive exactly, down = Σ down_* and
-- idle = Σ idle_*. Steps are attributed to the Slurm allocation that contains their start and split across
-- hours (so days) in proportion to time. gpu_count is the number of GPUs installed on the day.
-- Built by day (docs/incremental.md): a day's rows read that day's installed GPUs and node-hours.
{{ daily_microbatch_config('metric_date', 'metric_date') }}
with

installed as (
    select * from {{ ref('int_node_days_installed') }}
    where {{ in_batch('day') }}
),

hours as (
    select * from {{ ref('int_node_hour_ledger') }}
),


day_sums as (
    select
        node,
        metric_date,
        {%- for state in capacity_ledger_states() %}
        sum({{ state }}_gs) as {{ state }}_gs,
        {%- endfor %}
        sum(productive_flops_known_gs) as productive_flops_known_gs,
        sum(useful_flop_known) as useful_flop_known
    from hours
    group by node, metric_date
),

final as (
    select
        ----------  ids
        installed.cluster,
        installed.node,
        installed.sku,
        ----------  numerics (GPU-seconds and FLOPs; all additive)
        installed.gpu_count,
        {%- for state in capacity_ledger_states() %}
        coalesce(day_sums.{{ state }}_gs, 0) as {{ state }}_gs,
        {%- endfor %}
        coalesce(day_sums.productive_flops_known_gs, 0) as productive_flops_known_gs,
        coalesce(day_sums.useful_flop_known, 0) as useful_flop_known,
        ----------  dates
        installed.day as metric_date
    from installed
    left join day_sums on installed.node = day_sums.node and installed.day = day_sums.metric_date
)

select * from final

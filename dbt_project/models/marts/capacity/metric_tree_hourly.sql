-- The long interface of the metric tree at hour grain (docs/ledger.md): one row per grain (node, cluster,
-- fleet), entity, hour and capacity-lens node of the seed metric_tree_nodes (kinds mult and add_leaf; the
-- companions and the job lens are daily only), with the columns of metric_tree_daily and hour_start_at.
-- Cluster and fleet hours are sums of fct_node_hour's numerators and denominators (Σ/Σ, never a mean of
-- ratios); useful_flop is extrapolated per grain as in the daily marts. Σ numerator and Σ denominator over a
-- day's hours equal metric_tree_daily's (tests/singular/assert_metric_tree_hourly_rolls_up_to_daily.sql).
{%- set summed = [] %}
{%- for state in capacity_ledger_states() %}
    {%- do summed.extend([state ~ '_gs', state ~ '_pfs']) %}
{%- endfor %}
{%- do summed.extend(['productive_flops_known_pfs', 'useful_flop_known']) %}
{%- set measures = summed + ['useful_flop', 'coverage_program_goodput', 'coverage_goodput'] %}
-- Built by day (docs/incremental.md): a day's rows read that day's rows of the models above.
{{ daily_microbatch_config('metric_date', 'metric_date') }}
with

node_hours as (
    select * from {{ ref('fct_node_hour') }}
),

nodes as (
    select * from {{ ref('metric_tree_nodes') }}
    where lens = 'capacity' and kind in ('mult', 'add_leaf')
),

grouped as (
    {%- for grain, entity in [('cluster', 'cluster'), ('fleet', "'fleet'")] %}
    select
        '{{ grain }}' as grain,
        {{ entity }} as entity_id,
        metric_date,
        hour_start_at,
        {%- for measure in summed %}
        sum({{ measure }}) as {{ measure }}{{ ',' if not loop.last }}
        {%- endfor %}
    from node_hours
    group by {{ entity }}, metric_date, hour_start_at
    {% if not loop.last %}union all{% endif %}
    {%- endfor %}
),

wide as (
    select
        'node' as grain,
        node as entity_id,
        metric_date,
        hour_start_at,
        {%- for measure in measures %}
        cast({{ measure }} as double) as {{ measure }}{{ ',' if not loop.last }}
        {%- endfor %}
    from node_hours
    union all
    select
        grain,
        entity_id,
        metric_date,
        hour_start_at,
        {%- for measure in summed %}
        cast({{ measure }} as double) as {{ measure }},
        {%- endfor %}
        cast(useful_flop as double) as useful_flop,
        cast(coverage_program_goodput as double) as coverage_program_goodput,
        cast(coverage_program_goodput as double) as coverage_goodput
    from (
        select
            *,
            {{ useful_flop_extrapolated() }}
        from grouped
    )
),

measures as (
    select grain, entity_id, metric_date, hour_start_at, measure, amount
    from wide
    unpivot include nulls (amount for measure in ({{ measures | join(', ') }}))
),

final as (
    {{ metric_tree_rows(['metric_date', 'hour_start_at'], ['hour_start_at']) }}
)

select
    *,
    {{ is_provisional('metric_date') }} as is_provisional  -- docs/incremental.md
from final

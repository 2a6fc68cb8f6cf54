-- Why a job's goodput changed from one of its days to the next: LMDI-I on the job lens
-- (metric_tree.md §1.5, §2.8, worked example B §5). For each job-day with an earlier day of the
-- same job (d0 = the job's previous day in fct_job_day, d1 = this day):
--   root job_goodput         dln = ln(G1/G0)                 dg_additive = G1 - G0
--   factor S, R, P           dln = ln(f1/f0)                 dg_additive = L(G1, G0) · dln
--   leaf under S (queue_*)   dln = -(s1 - s0) / L(S1, S0)    (share of eligible)
--   leaf under R (badput_*)  dln = -(s1 - s0) / L(R1, R0)    (share of allocated)
--   ladder factor under P   dln = ln(f1/f0)                 (docs/program_ladder.md; f = Σ lower / Σ upper level)
--   ladder_residual under P  dln = ln(r1/r0), r = P / (ladder t_sol / t_mean): 1 up to rounding on the job lens
-- so Σ factor dln = ln(G1/G0), Σ factor dg_additive = G1 - G0, and each factor's leaves add up
-- to its dln (S + Σ queue shares = 1, R + Σ badput shares = 1, P = the ladder x ladder_residual). NULL where a factor is 0 or
-- unknown in either day (ln undefined), and the whole decomposition, root included, is NULL when
-- G is 0 or unknown on either day (a queue-only day; the zero-value limits of Wood & Lenzen are
-- not implemented).
with

job_days as (
    -- the spine recomputed from the day's sums (Σ/Σ), as fct_job_day does
    select
        {{ star_except('', ['scheduling_goodput', 'runtime_goodput', 'program_goodput', 'job_goodput', 'time_goodput']) }},
        {{ job_lens_factors() }}
    from {{ ref('fct_job_day') }}
),

paired as (
    select
        *,
        lag(metric_date) over (partition by job_id order by metric_date) as previous_date
    from job_days
),

days_long as (
    select job_id, metric_date, 'job_goodput' as node_id, cast(null as string) as parent_node_id, 'root' as kind,
        job_goodput as value
    from job_days
    union all
    select job_id, metric_date, 'scheduling_goodput', 'job_goodput', 'mult', scheduling_goodput from job_days
    union all
    select job_id, metric_date, 'job_runtime_goodput', 'job_goodput', 'mult', runtime_goodput from job_days
    union all
    select job_id, metric_date, 'job_program_goodput', 'job_goodput', 'mult', program_goodput from job_days
    {% for leaf in ['queue_initial', 'queue_requeue'] %}
    union all
    select job_id, metric_date, '{{ leaf }}_share', 'scheduling_goodput', 'add_leaf',
        {{ safe_divide(leaf ~ '_pfs', 'eligible_pfs') }}
    from job_days
    {% endfor %}
    {% for leaf in job_lens_badput_leaves() + ['badput_other'] %}
    union all
    select job_id, metric_date, '{{ '' if leaf.startswith('job_') else 'job_' }}{{ leaf }}_share', 'job_runtime_goodput', 'add_leaf',
        {{ safe_divide(leaf ~ '_pfs', 'allocated_pfs') }}
    from job_days
    {% endfor %}
    {%- for step in program_ladder_steps() %}
    union all
    select job_id, metric_date, '{{ step[0] }}', 'job_program_goodput', 'mult',
        {{ safe_divide('ladder_' ~ step[3] ~ '_pfs', 'ladder_' ~ step[2] ~ '_pfs') }}
    from job_days
    {%- endfor %}
    -- rounded to 12 decimals: the job lens's ladder has productive_pfs on top and useful_flop at the bottom, summed
    -- in another order, so the ratio is 1 up to float noise (demo: |r - 1| <= 7e-14) whose log change over a small
    -- ln(G1/G0) differed between DuckDB and Spark (share_of_dln_g 2.6e-10 vs 2.9e-10); a real gap stays visible
    union all
    select job_id, metric_date, 'ladder_residual', 'job_program_goodput', 'mult',
        round({{ safe_divide('program_goodput', safe_divide('ladder_t_sol_pfs', 'ladder_t_mean_pfs')) }}, 12)
    from job_days
),

changes as (
    select
        paired.cluster,
        paired.job_id,
        paired.previous_date,
        paired.metric_date,
        node_1.node_id,
        node_1.parent_node_id,
        node_1.kind,
        node_0.value as value_0,
        node_1.value as value_1,
        parent_0.value as parent_value_0,
        parent_1.value as parent_value_1,
        root_0.value as goodput_0,
        root_1.value as goodput_1
    from paired
    inner join days_long as node_1 on paired.job_id = node_1.job_id and paired.metric_date = node_1.metric_date
    inner join days_long as node_0
        on node_1.job_id = node_0.job_id and node_0.metric_date = paired.previous_date and node_1.node_id = node_0.node_id
    inner join days_long as root_0
        on root_0.job_id = paired.job_id and root_0.metric_date = paired.previous_date and root_0.node_id = 'job_goodput'
    inner join days_long as root_1
        on root_1.job_id = paired.job_id and root_1.metric_date = paired.metric_date and root_1.node_id = 'job_goodput'
    left join days_long as parent_0
        on parent_0.job_id = paired.job_id and parent_0.metric_date = paired.previous_date
        and parent_0.node_id = node_1.parent_node_id
    left join days_long as parent_1
        on parent_1.job_id = paired.job_id and parent_1.metric_date = paired.metric_date
        and parent_1.node_id = node_1.parent_node_id
    where paired.previous_date is not null
),

logs as (
    select
        *,
        case
            when kind in ('root', 'mult') then
                case when value_0 > 0 and value_1 > 0 then ln(value_1 / value_0) end
            else -(value_1 - value_0) / {{ logmean('parent_value_1', 'parent_value_0') }}
        end as dln
    from changes
),

final as (
    select
        ----------  ids
        cluster,
        job_id,
        node_id,
        parent_node_id,
        ----------  strings
        kind,
        ----------  numerics
        {{ attribution_display('value_0') }} as value_0,
        {{ attribution_display('value_1') }} as value_1,
        {{ attribution_display('dln') }} as dln,
        {{ attribution_display("case when kind = 'root' and goodput_0 > 0 and goodput_1 > 0 then goodput_1 - goodput_0
            else " ~ logmean('goodput_1', 'goodput_0') ~ " * dln end") }} as dg_additive,
        {{ attribution_display('exp(dln)') }} as d_multiplicative,
        {{ attribution_display("case when goodput_0 > 0 and goodput_1 > 0 and goodput_1 <> goodput_0
            then dln / ln(goodput_1 / goodput_0) end") }} as share_of_dln_g,
        ----------  dates
        previous_date,
        metric_date
    from logs
)

select * from final

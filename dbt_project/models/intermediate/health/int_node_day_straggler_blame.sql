-- Straggler blame per node and UTC day from traced steps: of the (job, step) pairs a node's ranks were
-- traced in, how often its rank was the slowest (the most GPU-busy time) by at least
-- var straggler_min_ratio (1.10) over the step's mean rank. Complete steps with absolute times only; a step
-- traced on one rank blames nobody.
with

per_rank as (
    select
        job_id,
        step,
        rank,
        any_value(host) as node,
        max(busy_ns) as busy_ns,
        min(step_started_at) as step_started_at
    from {{ ref('stg_traces__step_busy') }}
    where not last_step and job_id is not null and rank is not null and step_started_at is not null
    group by job_id, step, rank
),

ranked as (
    select
        *,
        count(*) over step_ranks as ranks,
        avg(busy_ns) over step_ranks as mean_busy_ns,
        row_number() over (partition by job_id, step order by busy_ns desc, rank) as place
    from per_rank
    window step_ranks as (partition by job_id, step)
)

select
    node,
    cast(step_started_at as date) as health_date,
    count(distinct job_id || '/' || step) as traced_steps,
    count(*) filter (
        where place = 1 and ranks > 1 and mean_busy_ns > 0
        and busy_ns / mean_busy_ns >= {{ var('straggler_min_ratio', 1.10) }}
    ) as straggler_steps
from ranked
where node is not null
group by all

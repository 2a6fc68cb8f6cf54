-- Per job and profiler step, GPU busy time across the ranks traced: max / mean estimates the straggler
-- slowdown (metric_tree.md 2.2, rank_balance). Complete steps only (the capture's last step is often cut off);
-- a step seen on one rank has no spread to measure: ratio NULL (unknown), not 1.
with

steps as (
    select * from {{ ref('stg_traces__step_busy') }}
    where not last_step and job_id is not null and rank is not null
),

per_rank as (
    -- one figure per rank: a rank traced on several devices counts its busiest device
    select job_id, step, rank, max(busy_ns) as busy_ns, max(span_ns) as span_ns
    from steps
    group by job_id, step, rank
)

select
    job_id,
    step,
    count(*) as rank_count,
    min(busy_ns) as min_busy_ns,
    max(busy_ns) as max_busy_ns,
    avg(busy_ns) as mean_busy_ns,
    max(span_ns) as max_span_ns,
    max_by(rank, busy_ns) as busiest_rank,
    case when count(*) > 1 and avg(busy_ns) > 0 then max(busy_ns) / avg(busy_ns) end as straggler_ratio
from per_rank
group by job_id, step

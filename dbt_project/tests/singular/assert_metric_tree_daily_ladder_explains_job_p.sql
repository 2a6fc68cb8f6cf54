{{ config(meta={'dagster': {'ref': {'name': 'metric_tree_daily'}}}) }}
-- In the long interface, at the job, cluster and fleet grains, the program-goodput ladder explains the job
-- lens's P (docs/program_ladder.md; metric_tree.md §2.5 identities 3 and 4): the six ladder factors multiply to
-- job_program_goodput and job_program_goodput + Σ effloss_* = 1, within 1e-9. Rows where P is known but the
-- ladder is missing fail too. (At the cluster and fleet grains P extrapolates FLOPs to jobs without metadata,
-- which is useful_known / productive_known: the ladder's own t_sol / t_mean.)
with

tree as (
    select * from {{ ref('metric_tree_daily') }}
    where grain in ('job', 'cluster', 'fleet') and lens = 'job'
),

p as (
    select grain, entity_id, metric_date, value as program_goodput
    from tree
    where node_id = 'job_program_goodput' and value > 0
),

ladder as (
    select
        grain,
        entity_id,
        metric_date,
        count(case when kind = 'mult' and value > 0 then 1 end) as factors_known,
        exp(sum(case when kind = 'mult' and value > 0 then ln(value) else 0 end)) as factor_product,
        count(case when kind = 'add_leaf' and value is not null then 1 end) as leaves_known,
        sum(case when kind = 'add_leaf' then value else 0 end) as leaf_sum
    from tree
    where parent_node_id = 'job_program_goodput'
    group by grain, entity_id, metric_date
)

select p.*, ladder.factors_known, ladder.factor_product, ladder.leaves_known, ladder.leaf_sum
from p
left join ladder
    on p.grain = ladder.grain and p.entity_id = ladder.entity_id and p.metric_date = ladder.metric_date
where coalesce(ladder.factors_known, 0) <> 6
    or coalesce(ladder.leaves_known, 0) <> 6
    or abs(ladder.factor_product - p.program_goodput) > 1e-9 * p.program_goodput
    or abs(p.program_goodput + ladder.leaf_sum - 1) > 1e-9

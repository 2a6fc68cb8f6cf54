{{ config(meta={'dagster': {'ref': {'name': 'metric_tree_daily'}}}) }}
-- The long interface says what the job-lens facts say: job_goodput per job-day (grain 'job')
-- and per cluster-day (grain 'cluster') equal fct_job_day and fct_job_lens_cluster_day.
select 'job' as grain, facts.job_id as entity_id, facts.metric_date, facts.job_goodput, tree.value
from {{ ref('fct_job_day') }} as facts
inner join {{ ref('metric_tree_daily') }} as tree
    on tree.grain = 'job'
    and tree.entity_id = facts.job_id
    and tree.metric_date = facts.metric_date
    and tree.node_id = 'job_goodput'
where abs(coalesce(facts.job_goodput, -1) - coalesce(tree.value, -1)) > 1e-12
union all
select 'cluster', facts.cluster, facts.metric_date, facts.job_goodput, tree.value
from {{ ref('fct_job_lens_cluster_day') }} as facts
inner join {{ ref('metric_tree_daily') }} as tree
    on tree.grain = 'cluster'
    and tree.entity_id = facts.cluster
    and tree.metric_date = facts.metric_date
    and tree.node_id = 'job_goodput'
where abs(coalesce(facts.job_goodput, -1) - coalesce(tree.value, -1)) > 1e-12

{{ config(meta={'dagster': {'ref': {'name': 'fct_job'}}}) }}
-- The program-goodput ladder closes from window to day to job (docs/program_ladder.md):
--   1. the hourly windows of a job-day hold the day's productive time and useful FLOPs: the ladder's top
--      (t_mean) is the job-day's productive_pfs and its bottom (t_sol) the useful FLOPs, so the ladder
--      multiplies to the job lens's own P; a job-day with P known and no ladder fails too;
--   2. every additive ladder column of a job-day is the Σ of its windows, and of the job the Σ of its days.
-- Tolerance 1e-9 relative.
{%- set columns = program_ladder_additive_columns() %}
with

windows as (
    select job_id, metric_date, {{ program_ladder_sums() }}
    from {{ ref('fct_job_window') }}
    group by job_id, metric_date
),

days as (
    select * from {{ ref('fct_job_day') }}
),

day_sums as (
    select job_id, {{ program_ladder_sums() }}
    from days
    group by job_id
),

jobs as (
    select * from {{ ref('fct_job') }}
)

select 'day_holds_the_job_lens' as check_name, days.job_id, days.metric_date, 'ladder_t_mean_pfs' as measure
from days
where days.program_goodput is not null
    and days.productive_pfs > 0
    and (days.ladder_t_mean_pfs is null
         or abs(days.ladder_t_mean_pfs - days.productive_pfs) > 1e-9 * days.productive_pfs
         or abs(days.ladder_t_sol_pfs - days.useful_flop) > 1e-9 * days.useful_flop)
{%- for column in columns %}
union all
select 'window_to_day', days.job_id, days.metric_date, '{{ column }}'
from days
left join windows on days.job_id = windows.job_id and days.metric_date = windows.metric_date
where {{ differs_relatively('coalesce(days.' ~ column ~ ', 0)', 'coalesce(windows.' ~ column ~ ', 0)') }}
union all
select 'day_to_job', jobs.job_id, cast(null as date), '{{ column }}'
from jobs
left join day_sums on jobs.job_id = day_sums.job_id
where {{ differs_relatively('coalesce(jobs.' ~ column ~ ', 0)', 'coalesce(day_sums.' ~ column ~ ', 0)') }}
{%- endfor %}

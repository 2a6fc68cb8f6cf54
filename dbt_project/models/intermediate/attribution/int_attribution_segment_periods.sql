-- Pooled numerator and denominator of a fleet-level rate per segment and period, the input of
-- the Kitagawa mix-vs-rate split. Segments: each cluster, and each SKU set (the cluster-day's
-- skus). Metrics: goodput = useful_flop / installed_pfs (mix_basis installed) and
-- running_goodput = useful_flop / allocated_pfs (mix_basis allocated).
-- From the job lens (fct_job_day; running_goodput only, mix_basis allocated): segment types
-- job_size_class (the job-day's allocated GPUs in classes split at var job_size_class_bounds, default
-- [8, 64, 512]: '1-8', '9-64', '65-512', '>512') and workload (job_meta's workload, 'unknown' without
-- one), over the job-days with FLOPs metadata (a job-day without it has no useful FLOPs to pool).
-- running_goodput_ref (cluster and sku segments; mix_basis allocated_gs): H100-equivalent running goodput,
-- useful_flop / (allocated GPU-seconds × the H100 dense BF16 peak), worked example C's lens (§6): the
-- weights are shares of allocated GPU-seconds and a shift of work to an older SKU shows up as mix.
{%- set size_bounds = var('job_size_class_bounds', [8, 64, 512]) %}
{%- set metrics = [
    {'metric': 'goodput', 'mix_basis': 'installed', 'numerator': 'useful_flop', 'denominator': 'installed_pfs'},
    {'metric': 'running_goodput', 'mix_basis': 'allocated', 'numerator': 'useful_flop', 'denominator': 'allocated_pfs'},
    {'metric': 'running_goodput_ref', 'mix_basis': 'allocated_gs', 'numerator': 'useful_flop', 'denominator': 'allocated_h100_pfs'},
] %}
{%- set segment_types = {'cluster': 'cluster', 'sku': 'skus'} %}
with

cluster_days as (
    select
        *,
        allocated_gs * (
            select peak_flops_dense from {{ ref('gpu_sku_specs') }} where sku = 'H100-SXM' and dtype = 'bf16'
        ) as allocated_h100_pfs
    from {{ ref('fct_cluster_day') }}
),

periods as (
    select * from {{ ref('int_attribution_periods') }}
),

job_days as (
    -- the job lens's job-days with useful FLOPs known, with their size class and workload
    select
        job_days.metric_date,
        job_days.useful_flop,
        job_days.allocated_pfs,
        case
            {%- for bound in size_bounds %}
            when job_days.gpus <= {{ bound }} then '{{ (size_bounds[loop.index0 - 1] + 1) if not loop.first else 1 }}-{{ bound }}'
            {%- endfor %}
            else '>{{ size_bounds[-1] }}'
        end as job_size_class,
        coalesce(jobs.workload, 'unknown') as workload
    from {{ ref('fct_job_day') }} as job_days
    left join {{ ref('stg_job_meta__jobs') }} as jobs on job_days.job_id = jobs.job_id
    where job_days.has_flops_metadata and job_days.useful_flop is not null
),

final as (
    {% for segment_type, column in segment_types.items() %}
    {% for m in metrics %}
    select
        '{{ segment_type }}' as segment_type,
        cluster_days.{{ column }} as segment_id,
        '{{ m.metric }}' as metric,
        '{{ m.mix_basis }}' as mix_basis,
        periods.period,
        periods.period_start,
        periods.period_end,
        sum(cast(cluster_days.{{ m.numerator }} as double)) as numerator,
        sum(cast(cluster_days.{{ m.denominator }} as double)) as denominator
    from cluster_days
    inner join periods
        on cluster_days.metric_date between periods.period_start and periods.period_end
    group by all
    union all
    {% endfor %}
    {% endfor %}
    {%- for segment_type in ['job_size_class', 'workload'] %}
    select
        '{{ segment_type }}' as segment_type,
        job_days.{{ segment_type }} as segment_id,
        'running_goodput' as metric,
        'allocated' as mix_basis,
        periods.period,
        periods.period_start,
        periods.period_end,
        sum(cast(job_days.useful_flop as double)) as numerator,
        sum(cast(job_days.allocated_pfs as double)) as denominator
    from job_days
    inner join periods
        on job_days.metric_date between periods.period_start and periods.period_end
    group by all
    {% if not loop.last %}union all{% endif %}
    {%- endfor %}
)

select * from final

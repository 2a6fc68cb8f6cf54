-- The 10 kernels with the most GPU time per trace rank and device (counted kernels: HTA's last-step rule).
with

kernels as (
    select * from {{ ref('stg_traces__kernels') }}
    where in_breakdown
),

per_name as (
    select capture_id, job_id, rank, device_index, kernel_name, kernel_type,
        count(*) as kernel_count, sum(dur_ns) as time_ns
    from kernels
    group by capture_id, job_id, rank, device_index, kernel_name, kernel_type
),

ranked as (
    select *,
        time_ns / sum(time_ns) over (partition by capture_id, rank, device_index) as time_share,
        row_number() over (partition by capture_id, rank, device_index order by time_ns desc, kernel_name) as time_rank
    from per_name
)

select * from ranked where time_rank <= 10

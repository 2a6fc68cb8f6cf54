-- HTA idle-time breakdown rolled up per trace rank and device (over its CUDA streams): shares of the idle time.
with

streams as (
    select * from {{ ref('stg_traces__idle_breakdowns') }}
)

select
    capture_id,
    job_id,
    rank,
    device_index,
    count(*) as stream_count,
    sum(idle_ns) as idle_ns,
    sum(host_wait_ns) as host_wait_ns,
    sum(kernel_wait_ns) as kernel_wait_ns,
    sum(other_ns) as other_ns,
    case when sum(idle_ns) > 0 then sum(host_wait_ns) / sum(idle_ns) end as host_wait_share,
    case when sum(idle_ns) > 0 then sum(kernel_wait_ns) / sum(idle_ns) end as kernel_wait_share,
    case when sum(idle_ns) > 0 then sum(other_ns) / sum(idle_ns) end as other_share
from streams
group by capture_id, job_id, rank, device_index

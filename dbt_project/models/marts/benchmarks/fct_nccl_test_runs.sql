-- One row per nccl-tests run (a run is one test binary, so one op): busbw at the largest size it
-- measured, against the physical limit of the link that bounds it (seed interconnect_specs: NVLink
-- inside one host, the network per GPU across hosts; a row for the run's cluster wins over the SKU
-- default). busbw_ratio is NULL when the limit is unknown or the run failed. It can exceed 1: NVLS
-- all_reduce reduces inside the NVSwitch (busbw ~480 GB/s on 8 H100 against 450 per direction).
with

results as (
    select * from {{ ref('stg_nccl_tests__results') }}
),

limits as (
    select * from {{ ref('interconnect_specs') }}
),

run_attributes as (
    select
        run_id,
        run_index,
        cluster,
        host,
        job_id,
        landed_file_id,
        test_name,
        op,
        op_source,
        nccl_tests_version,
        nccl_version,
        gpu_name,
        sku,
        scope,
        status,
        error_text,
        n_ranks,
        n_hosts,
        hosts,
        min_bytes,
        max_bytes,
        max_bytes_reduced_to,
        iters,
        avg_bus_bandwidth_gbps,
        out_of_bounds_values,
        captured_at,
        run_date
    from results
    qualify row_number() over (partition by run_id order by landed_file_id) = 1
),

sizes as (
    select
        run_id,
        count(distinct size_bytes) as n_sizes,
        max(size_bytes) as largest_size_bytes,
        max(busbw_gbps) as peak_busbw_gbps,
        sum(wrong) as wrong_total
    from results
    where size_bytes is not null
    group by run_id
),

-- At the largest size, one row per placement (the best busbw when several types or redops were run).
at_largest as (
    select results.*
    from results
    inner join sizes
        on results.run_id = sizes.run_id and results.size_bytes = sizes.largest_size_bytes
    qualify row_number() over (
        partition by results.run_id, results.placement
        order by results.busbw_gbps desc nulls last, results.data_type, results.redop, results.root
    ) = 1
),

largest as (
    select
        run_id,
        max(data_type) filter (where placement = 'out_of_place') as data_type,
        max(time_us) filter (where placement = 'out_of_place') as time_us,
        max(algbw_gbps) filter (where placement = 'out_of_place') as algbw_gbps,
        max(busbw_gbps) filter (where placement = 'out_of_place') as busbw_gbps,
        max(busbw_gbps) filter (where placement = 'in_place') as in_place_busbw_gbps
    from at_largest
    group by run_id
),

final as (
    select
        ----------  ids
        run_attributes.run_id,
        run_attributes.run_index,
        run_attributes.cluster,
        run_attributes.host,
        run_attributes.job_id,
        run_attributes.landed_file_id,
        ----------  strings
        run_attributes.test_name,
        run_attributes.op,
        run_attributes.op_source,
        run_attributes.nccl_tests_version,
        run_attributes.nccl_version,
        run_attributes.gpu_name,
        run_attributes.sku,
        run_attributes.scope,
        run_attributes.status,
        run_attributes.error_text,
        run_attributes.hosts,
        largest.data_type,
        limits.interconnect,
        ----------  numerics
        run_attributes.n_ranks,
        run_attributes.n_hosts,
        run_attributes.min_bytes,
        run_attributes.max_bytes,
        run_attributes.max_bytes_reduced_to,
        run_attributes.iters,
        sizes.n_sizes,
        sizes.largest_size_bytes,
        largest.time_us,
        largest.algbw_gbps,
        largest.busbw_gbps,
        largest.in_place_busbw_gbps,
        sizes.peak_busbw_gbps,
        run_attributes.avg_bus_bandwidth_gbps,
        run_attributes.out_of_bounds_values,
        sizes.wrong_total,
        limits.bus_bandwidth_gbps as limit_busbw_gbps,
        case
            when run_attributes.status = 'ok' then largest.busbw_gbps / limits.bus_bandwidth_gbps
        end as busbw_ratio,
        ----------  timestamps
        run_attributes.captured_at,
        run_attributes.run_date
    from run_attributes
    left join sizes on run_attributes.run_id = sizes.run_id
    left join largest on run_attributes.run_id = largest.run_id
    left join limits
        on run_attributes.sku = limits.sku
        and run_attributes.scope = limits.scope
        and (limits.cluster = run_attributes.cluster or limits.cluster is null)
    qualify row_number() over (partition by run_attributes.run_id order by limits.cluster nulls last) = 1
)

select * from final

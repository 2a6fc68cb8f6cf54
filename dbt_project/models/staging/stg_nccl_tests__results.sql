-- nccl-tests results, one row per natural key (run, size, type, redop, root, placement). A failed run
-- without any measured row is one row with NULL measurements. scope says which link bounds busbw:
-- NVLink inside one host, the network across hosts (unknown without the rank map).
with

source as (
    select * from {{ source('lake_benchmarks', 'raw_nccl_tests') }}
),

renamed as (
    select
        ----------  ids
        run_id,
        run_index,
        cluster,
        host,
        job_id,
        landed_file_id,
        ----------  strings
        test_name,
        op,
        op_source,
        nccl_tests_version,
        nccl_version,
        gpu_name,
        {{ sku_from_gpu_name('gpu_name') }} as sku,
        case when n_hosts = 1 then 'intra_node' when n_hosts > 1 then 'inter_node' end as scope,
        status,
        error_text,
        placement,
        data_type,
        redop,
        step,
        rank_map_json,
        hosts,
        ----------  numerics
        n_threads,
        n_gpus,
        n_ranks,
        n_hosts,
        min_bytes,
        max_bytes,
        max_bytes_reduced_to,
        warmup_iters,
        iters,
        agg_iters,
        validation,
        graph,
        size_bytes,
        count_elements,
        root,
        time_us,
        algbw_gbps,
        busbw_gbps,
        wrong,
        avg_bus_bandwidth_gbps,
        out_of_bounds_values,
        nccl_debug_lines,
        other_lines,
        ----------  timestamps
        captured_at,
        event_date as run_date
    from source
    {{ dedupe_on(['run_id', 'placement', 'size_bytes', 'data_type', 'redop', 'root']) }}
)

select * from renamed

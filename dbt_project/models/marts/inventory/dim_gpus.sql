-- Where every GPU sits, as of its latest inventory record: the topology (GPU -> node -> rack ->
-- cluster) that groups a change seen on GPUs, nodes and a cluster into one incident
-- (perf_assets/lib/topology.py) and that SQL users join companions on.
with

inventory as (
    select * from {{ ref('stg_inventory__gpus') }}
),

latest as (
    select
        gpu_uuid,
        node,
        rack,
        cluster,
        sku,
        valid_from_at,
        valid_to_at
    from inventory
    qualify row_number() over (partition by gpu_uuid order by valid_from_at desc, landed_file_id desc) = 1
)

select * from latest

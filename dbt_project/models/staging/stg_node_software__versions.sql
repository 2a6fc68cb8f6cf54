-- A table on Spark: detection reads it from the DuckDB serving warehouse (docs/spark.md).
{{ config(materialized=read_by_python_materialization()) }}

with

source as (
    select * from {{ source('lake', 'raw_node_software') }}
),

deduplicated as (
    select * from source
    {{ dedupe_on(['node', 'valid_from']) }}
),

renamed as (
    select
        ----------  ids
        node,
        landed_file_id,
        ----------  strings
        driver,
        cuda,
        nccl,
        torch,
        image,
        firmware,
        ----------  numerics
        power_limit_w,
        ----------  timestamps
        valid_from as valid_from_at,
        lead(valid_from) over (partition by node order by valid_from) as valid_to_at
    from deduplicated
)

select * from renamed

-- A table on Spark: detection reads it from the DuckDB serving warehouse (docs/spark.md).
{{ config(materialized=read_by_python_materialization()) }}

with

source as (
    select * from {{ source('lake', 'raw_inventory') }}
),

renamed as (
    select
        ----------  ids
        gpu_uuid,
        node,
        rack,
        cluster,
        sku,
        landed_file_id,
        ----------  timestamps
        valid_from as valid_from_at,
        valid_to as valid_to_at
    from source
    {{ dedupe_on(['gpu_uuid', 'valid_from']) }}
)

select * from renamed

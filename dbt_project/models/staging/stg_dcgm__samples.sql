with

source as (
    select * from {{ source('lake', 'raw_dcgm') }}
),

renamed as (
    select
        ----------  ids
        cluster,
        host as node,
        gpu_uuid,
        gpu_index,
        landed_file_id,
        ----------  strings
        model_name,
        field,
        ----------  numerics
        value,
        ----------  timestamps
        ts as sampled_at
    from source
    {{ dedupe_on(['host', 'gpu_uuid', 'gpu_index', 'field', 'ts']) }}
)

select * from renamed

-- DCGM samples (range JSON, dcgm-exporter text, dcgmi dmon), one row per natural key; gpu_instance is
-- the MIG instance (NULL: the whole GPU).
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
        gpu_instance,
        pci_bus_id,
        landed_file_id,
        ----------  strings
        model_name,
        field,
        ----------  numerics
        value,
        ----------  timestamps
        ts as sampled_at
    from source
    {{ dedupe_on(['host', 'gpu_uuid', 'gpu_index', 'gpu_instance', 'field', 'ts']) }}
)

select * from renamed

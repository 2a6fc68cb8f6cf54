-- nvidia-smi samples, one row per natural key (host, gpu_uuid, gpu_index, field, ts). NULL value:
-- unknown ([N/A], [Not Supported], masked or absent); text_value keeps non-numeric values.
with

source as (
    select * from {{ source('lake_telemetry', 'raw_nvidia_smi') }}
),

renamed as (
    select
        ----------  ids
        cluster,
        host as node,
        gpu_uuid,
        gpu_index,
        pci_bus_id,
        landed_file_id,
        ----------  strings
        model_name,
        field,
        unit,
        text_value,
        section,
        ----------  numerics
        value,
        ----------  timestamps
        ts as sampled_at
    from source
    {{ dedupe_on(['host', 'gpu_uuid', 'gpu_index', 'field', 'ts']) }}
)

select * from renamed

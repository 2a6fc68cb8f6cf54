-- DCGM samples (range JSON, dcgm-exporter text, dcgmi dmon), one row per natural key; gpu_instance is
-- the MIG instance (NULL: the whole GPU). The same sample delivered more than once (two exporters or
-- Prometheus replicas, the same capture under another name, twice in one file) keeps the row of the
-- lowest landed_file_id, then the known value, then the larger value: deterministic. `copies` counts
-- the deliveries of the key and `conflicting` says whether they disagreed (int_dcgm_sample_conflicts).
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
        count(*) over natural_key as copies,
        ----------  booleans
        coalesce(
            min(value) over natural_key <> max(value) over natural_key
            or count(value) over natural_key not in (0, count(*) over natural_key),
            false
        ) as conflicting,
        ----------  timestamps
        ts as sampled_at
    from source
    window natural_key as (partition by host, gpu_uuid, gpu_index, gpu_instance, field, ts)
    qualify row_number() over (
        partition by host, gpu_uuid, gpu_index, gpu_instance, field, ts
        order by landed_file_id, value desc nulls last
    ) = 1
)

select * from renamed

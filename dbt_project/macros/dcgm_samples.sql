{#- DCGM samples of `relation` (raw_dcgm rows), one row per natural key (host, gpu_uuid, gpu_index, gpu_instance,
    field, ts): stg_dcgm__samples over the whole lake, int_dcgm_samples over one batch's raw rows (dbt filters the
    source by its event_time). The same sample delivered more than once keeps the row of the lowest landed_file_id,
    then the known value, then the larger value; `copies` counts the deliveries and `conflicting` says whether they
    disagreed (int_dcgm_sample_conflicts).
    Most samples arrive once: a hash aggregate finds the keys that may repeat (hash and ts seen more than once), and
    only their rows go through the window that sorts by the full key; a hash collision sends distinct keys there
    too, where the window keeps them apart. The window over every row cost twice the CPU of this (fleet-1k, one
    day: 3.1 s against 1.6 s; docs/benchmarks.md). -#}
{% macro deduplicated_dcgm_samples(relation) -%}
with

source as (
    select * from {{ relation }}
),

keyed as (
    select
        *,
        {{ row_hash(['host', 'gpu_uuid', 'gpu_index', 'gpu_instance', 'field', 'ts']) }} as key_hash
    from source
),

repeated_keys as (
    select key_hash, ts
    from keyed
    group by key_hash, ts
    having count(*) > 1
),

delivered_once as (
    select
        keyed.cluster,
        keyed.host as node,
        keyed.gpu_uuid,
        keyed.gpu_index,
        keyed.gpu_instance,
        keyed.pci_bus_id,
        keyed.landed_file_id,
        keyed.model_name,
        keyed.field,
        keyed.value,
        cast(1 as bigint) as copies,
        false as conflicting,
        keyed.ts as sampled_at
    from keyed
    left join repeated_keys
        on keyed.key_hash = repeated_keys.key_hash
        and keyed.ts = repeated_keys.ts
    where repeated_keys.key_hash is null
),

delivered_more_than_once as (
    select
        keyed.cluster,
        keyed.host as node,
        keyed.gpu_uuid,
        keyed.gpu_index,
        keyed.gpu_instance,
        keyed.pci_bus_id,
        keyed.landed_file_id,
        keyed.model_name,
        keyed.field,
        keyed.value,
        count(*) over natural_key as copies,
        coalesce(
            min(keyed.value) over natural_key <> max(keyed.value) over natural_key
            or count(keyed.value) over natural_key not in (0, count(*) over natural_key),
            false
        ) as conflicting,
        keyed.ts as sampled_at
    from keyed
    inner join repeated_keys
        on keyed.key_hash = repeated_keys.key_hash
        and keyed.ts = repeated_keys.ts
    window natural_key as (
        partition by keyed.host, keyed.gpu_uuid, keyed.gpu_index, keyed.gpu_instance, keyed.field, keyed.ts
    )
    qualify row_number() over (
        partition by keyed.host, keyed.gpu_uuid, keyed.gpu_index, keyed.gpu_instance, keyed.field, keyed.ts
        order by keyed.landed_file_id, keyed.value desc nulls last
    ) = 1
)

select * from delivered_once
union all
select * from delivered_more_than_once
{%- endmacro %}

-- One GPU telemetry table: DCGM samples (range JSON, dcgm-exporter text, dcgmi dmon) and nvidia-smi
-- samples (query-gpu, dmon, nvidia_gpu_exporter) with canonical columns. An nvidia-smi field that
-- measures what a DCGM field measures takes the DCGM name, its value scaled to the DCGM unit
-- (seed nvidia_smi_dcgm_fields); the others are kept as nvsmi:<field> in their own unit. Text-only
-- nvidia-smi values (P0, Enabled, versions) are not samples and stay in stg_nvidia_smi__samples.
-- NULL value: unknown (never 0). gpu_instance: MIG instance, NULL for the whole GPU (nvidia-smi
-- reports whole GPUs only). Built by day (docs/incremental.md); sampled_date is the day.
{{ daily_microbatch_config('sampled_at', 'sampled_date') }}
with

dcgm as (
    select
        samples.cluster,
        samples.node,
        samples.gpu_uuid,
        samples.gpu_index,
        samples.gpu_instance,
        samples.field,
        samples.field as source_field,
        samples.value,
        fields.unit,
        samples.sampled_at,
        'dcgm' as source,
        samples.sampled_date
    from {{ ref('int_dcgm_samples') }} as samples
    left join {{ ref('dcgm_fields') }} as fields
        on samples.field = fields.field
),

nvidia_smi as (
    select
        samples.cluster,
        samples.node,
        samples.gpu_uuid,
        samples.gpu_index,
        cast(null as integer) as gpu_instance,
        coalesce(mapped.dcgm_field, 'nvsmi:' || samples.field) as field,
        samples.field as source_field,
        case when mapped.dcgm_field is null then samples.value else samples.value * mapped.scale end as value,
        case when mapped.dcgm_field is null then samples.unit else mapped.unit end as unit,
        samples.sampled_at,
        case
            when samples.section like '%dmon' then 'nvidia_smi_dmon'
            when samples.section = 'exporter' then 'nvidia_gpu_exporter'
            else 'nvidia_smi'
        end as source,
        cast(samples.sampled_at as date) as sampled_date
    from {{ ref('stg_nvidia_smi__samples') }} as samples
    left join {{ ref('nvidia_smi_dcgm_fields') }} as mapped
        on samples.field = mapped.nvidia_smi_field
    where samples.value is not null or samples.text_value is null
),

final as (
    select * from dcgm
    union all
    select * from nvidia_smi
)

select * from final

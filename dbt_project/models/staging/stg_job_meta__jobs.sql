with

source as (
    select * from {{ source('lake', 'raw_job_meta') }}
),

renamed as (
    select
        ----------  ids
        job_id,
        landed_file_id,
        ----------  strings
        dtype,
        workload,
        owner,
        ----------  numerics
        coalesce(model_flops_per_step, model_flops_per_token * tokens_per_step) as model_flops_per_step,
        dp,
        tp,
        pp,
        cp
    from source
    {{ dedupe_on(['job_id']) }}
)

select * from renamed

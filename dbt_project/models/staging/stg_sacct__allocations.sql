-- Slurm allocations: the job-level sacct rows (steps such as .batch are left out). The Slurm
-- job name carries our job_id; each attempt of a job is one Slurm allocation.
with

source as (
    select * from {{ source('lake', 'raw_sacct') }}
),

renamed as (
    select
        ----------  ids
        cluster,
        job_id as slurm_job_id,
        job_name as job_id,
        landed_file_id,
        ----------  strings
        user_name,
        partition,
        state,
        exit_code,
        node_list,
        nodes,
        ----------  numerics
        n_nodes,
        alloc_gpus,
        ----------  timestamps
        submit_at,
        eligible_at,
        start_at,
        end_at
    from source
    where job_step is null
    {{ dedupe_on(['source.cluster', 'source.job_id']) }}
)

select * from renamed

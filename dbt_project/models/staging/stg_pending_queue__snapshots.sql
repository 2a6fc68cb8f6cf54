with

source as (
    select * from {{ source('lake', 'raw_pending_queue') }}
),

renamed as (
    select
        ----------  ids
        cluster,
        job_id,
        landed_file_id,
        ----------  numerics
        requested_gpus,
        ----------  timestamps
        ts as snapshot_at,
        eligible_since as eligible_since_at
    from source
    {{ dedupe_on(['ts', 'cluster', 'job_id']) }}
)

select * from renamed

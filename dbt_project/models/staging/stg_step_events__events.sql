with

source as (
    select * from {{ source('lake', 'raw_step_events') }}
),

renamed as (
    select
        ----------  ids
        job_id,
        attempt,
        rank,
        landed_file_id,
        ----------  strings
        event,
        name,
        ----------  numerics
        step,
        ----------  timestamps
        ts as event_at
    from source
    {{ dedupe_on(['job_id', 'attempt', 'rank', 'event', 'step', 'ts']) }}
)

select * from renamed

with

source as (
    select * from {{ source('lake', 'raw_node_events') }}
),

renamed as (
    select
        ----------  ids
        node,
        landed_file_id,
        ----------  strings
        state,
        reason,
        ----------  timestamps
        start_at,
        end_at
    from source
    {{ dedupe_on(['node', 'state', 'start_at']) }}
)

select * from renamed

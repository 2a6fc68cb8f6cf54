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
    -- one row per interval; a later delivery that closes an open interval (end_at set) wins
    qualify row_number() over (
        partition by node, state, start_at order by end_at desc nulls last, landed_file_id
    ) = 1
)

select * from renamed

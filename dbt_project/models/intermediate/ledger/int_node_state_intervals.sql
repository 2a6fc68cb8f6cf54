-- The down time of each node as disjoint intervals, each with one down_* leaf (seed state_taxonomy): a
-- node_events interval takes the leaf of the matching taxonomy row with the lowest precedence, and where
-- intervals of a node overlap the lowest precedence holds the overlap, so no second is counted twice.
-- Open intervals end at the end of the reporting window. Touching pieces with the same leaf are merged.
with

taxonomy as (
    select * from {{ ref('state_taxonomy') }}
),

states as (
    select * from {{ ref('stg_node_events__states') }}
),

window_end as (
    select max(day_end_at) as window_end_at from {{ ref('int_calendar_days') }}
),

classified as (
    -- each interval with the precedence of the first taxonomy row that matches it
    select
        states.node,
        states.state,
        states.reason,
        states.start_at,
        coalesce(states.end_at, greatest(window_end.window_end_at, states.start_at)) as end_at,
        min(taxonomy.precedence) as precedence
    from states
    cross join window_end
    inner join taxonomy
        on states.state = taxonomy.source_state
        and {{ regex_partial_match("lower(coalesce(states.reason, ''))", 'taxonomy.reason_pattern') }}
    group by all
),

bounded as (
    select * from classified where end_at > start_at
),

boundaries as (
    select node, start_at as boundary_at from bounded
    union
    select node, end_at as boundary_at from bounded
),

pieces as (
    -- the elementary pieces between consecutive boundaries of a node
    select
        node,
        boundary_at as start_at,
        lead(boundary_at) over (partition by node order by boundary_at) as end_at
    from boundaries
),

covered as (
    -- the winning precedence of each piece some interval covers, with the states and reasons covering it
    select
        pieces.node,
        pieces.start_at,
        pieces.end_at,
        min(bounded.precedence) as precedence,
        {{ sorted_distinct_string_agg('bounded.state', "','") }} as states,
        {{ sorted_distinct_string_agg('bounded.reason', "'; '") }} as reasons
    from pieces
    inner join bounded
        on pieces.node = bounded.node
        and bounded.start_at <= pieces.start_at
        and bounded.end_at >= pieces.end_at
    where pieces.end_at is not null
    group by pieces.node, pieces.start_at, pieces.end_at
),

labelled as (
    select
        covered.*,
        taxonomy.ledger_leaf,
        -- a new run starts where the previous piece of the node does not touch this one or has another leaf
        case
            when lag(covered.end_at) over (partition by covered.node order by covered.start_at) = covered.start_at
                and lag(taxonomy.ledger_leaf) over (partition by covered.node order by covered.start_at)
                    = taxonomy.ledger_leaf
            then 0 else 1
        end as starts_run
    from covered
    inner join taxonomy on covered.precedence = taxonomy.precedence
),

runs as (
    select
        *,
        sum(starts_run) over (partition by node order by start_at rows unbounded preceding) as run_id
    from labelled
),

final as (
    select
        ----------  ids
        node,
        ----------  strings
        ledger_leaf,
        {{ sorted_distinct_string_agg('states', "','") }} as states,
        {{ sorted_distinct_string_agg('reasons', "'; '") }} as reasons,
        ----------  numerics
        min(precedence) as precedence,
        ----------  timestamps
        min(start_at) as start_at,
        max(end_at) as end_at
    from runs
    group by node, ledger_leaf, run_id
)

select * from final

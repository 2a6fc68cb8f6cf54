-- Node health per node and day from the probe verdicts: what ran, the worst verdict, the rules that
-- failed with their evidence, and whether to drain the node (any confirmed fail-class verdict).

with

verdicts as (
    select * from {{ ref('int_probe_verdicts') }}
),

ranked as (
    select
        *,
        case verdict when 'fail' then 3 when 'warn' then 2 when 'pass' then 1 else 0 end as verdict_rank
    from verdicts
),

per_node_day as (
    select
        node,
        probe_date as health_date,
        count(distinct probe) as probes_run,
        count(distinct gpu_uuid) as gpus_probed,
        count(distinct run_id) as runs,
        count(*) as rule_checks,
        count(*) filter (where verdict = 'unknown') as unknown_checks,
        max(verdict_rank) as worst_rank,
        count(distinct gpu_uuid) filter (where verdict = 'fail') as failing_gpus,
        {{ sorted_distinct_list('rule', "verdict = 'fail'") }} as failing_rule_list,
        {{ sorted_distinct_list('rule', "verdict = 'warn'") }} as warning_rule_list,
        {{ sorted_distinct_string_agg(
            "'gpu ' || coalesce(cast(gpu_index as string), '?') || ' ' || gpu_uuid || ': ' || evidence", "'; '", "verdict = 'fail'"
        ) }} as failing_evidence,
        {{ sorted_distinct_string_agg(
            "'gpu ' || coalesce(cast(gpu_index as string), '?') || ' ' || gpu_uuid || ': ' || evidence", "'; '", "verdict = 'warn'"
        ) }} as warning_evidence,
        {{ sorted_distinct_list('category', "verdict = 'fail'") }} as failing_categories
    from ranked
    group by node, probe_date
)

select
    node,
    health_date,
    probes_run,
    gpus_probed,
    runs,
    rule_checks,
    unknown_checks,
    case worst_rank when 3 then 'fail' when 2 then 'warn' when 1 then 'pass' else 'unknown' end as worst_verdict,
    failing_gpus,
    {{ join_list('failing_rule_list', "','") }} as failing_rules,
    {{ join_list('warning_rule_list', "','") }} as warning_rules,
    failing_evidence,
    warning_evidence,
    worst_rank = 3 as drain_recommended,
    case
        when worst_rank = 3 then
            'drain: ' || failing_gpus || ' GPU(s) failed ' || {{ join_list('failing_rule_list', "', '") }}
            || ' (' || {{ join_list('failing_categories', "', '") }} || ')'
    end as drain_reason
from per_node_day

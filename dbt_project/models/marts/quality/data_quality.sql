-- Data quality as data: one row per (check, entity, day) with what was observed, what was expected,
-- their ratio and a status ok | warn | fail. Unknown stays NULL (never 0); docs/data_quality.md
-- gives every check's formula and thresholds.
{% set coverage_warn = var('dq_dcgm_coverage_warn', 0.95) %}
{% set coverage_fail = var('dq_dcgm_coverage_fail', 0.5) %}
{% set silent_h = var('dq_silent_exporter_hours', 2) %}
{% set late_h = var('dq_late_file_hours', 24) %}
{% set quarantine_fail = var('dq_quarantine_rate_fail', 0.05) %}
{% set fresh_warn_h = var('dq_freshness_warn_hours', 24) %}
{% set fresh_fail_h = var('dq_freshness_fail_hours', 48) %}
{% set event_tables = [
    ('lake', 'raw_dcgm'), ('lake', 'raw_sacct'), ('lake', 'raw_step_events'),
    ('lake', 'raw_probe_results'), ('lake_telemetry', 'raw_nvidia_smi'),
] %}
{#- sparse or change-driven: rows come when something happens (a change, a sampled trace, a benchmark run
    after maintenance), so days without rows say nothing about the source's health -#}
{% set change_tables = [
    ('lake', 'raw_inventory'), ('lake', 'raw_node_software'), ('lake', 'raw_node_events'), ('lake', 'raw_job_meta'),
    ('lake', 'raw_pending_queue'), ('lake_traces', 'raw_trace_events'), ('lake_benchmarks', 'raw_nccl_tests'),
    ('lake_benchmarks', 'raw_mlperf_events'),
] %}
with

gpu_days as (
    select * from {{ ref('int_quality_dcgm_gpu_days') }}
),

days as (
    select * from {{ ref('int_calendar_days') }}
),

window_end as (
    select max(day_end_at) as window_end_at from days
),

manifest as (
    -- the latest parser version's outcome per landed file
    select *, cast(coalesce(captured_at, ingested_at) as date) as capture_day
    from {{ ref('ingest_manifest') }}
    where status != 'skipped'
    qualify row_number() over (partition by file_id order by parser_version desc, ingested_at desc) = 1
),

dcgm_coverage as (
    select
        'dcgm_coverage' as check_name,
        'gpu' as grain,
        gpu_uuid as entity_id,
        day as metric_date,
        cast(known_points as double) as observed,
        cast(expected_points as double) as expected,
        case when expected_points > 0 then known_points / expected_points end as ratio,
        case
            when expected_points = 0 then 'ok'
            when known_points / expected_points >= {{ coverage_warn }} then 'ok'
            when known_points / expected_points >= {{ coverage_fail }} then 'warn'
            else 'fail'
        end as status,
        {{ format_text(
            'node {}: {} of {} in-service 5-min samples known; {} out-of-service samples known-missing',
            ['node', 'known_points', 'expected_points', 'out_of_service_points']
        ) }} as detail
    from gpu_days
),

silent_exporters as (
    select
        'exporter_silent' as check_name,
        'gpu' as grain,
        gpu_uuid as entity_id,
        day as metric_date,
        longest_silent_h as observed,
        cast({{ silent_h }} as double) as expected,
        case when expected_points > 0 then longest_silent_h / {{ silent_h }} end as ratio,
        case when longest_silent_h > {{ silent_h }} then 'fail' when longest_silent_h > 0 then 'warn' else 'ok' end
            as status,
        case
            when longest_silent_h = 0 then {{ format_text('node {}: no in-service gap', ['node']) }}
            else {{ format_text(
                'node {}: no sample for {:.2f} h in service ({} to {}){}', [
                    'node', 'longest_silent_h',
                    format_timestamp('silent_from_at', '%Y-%m-%dT%H:%MZ'), format_timestamp('silent_to_at', '%Y-%m-%dT%H:%MZ'),
                    "case when silent_at_window_end then ', still silent at the window end' else '' end"]
            ) }}
        end as detail
    from gpu_days
    where expected_points > 0
),

-- a file is late when it was ingested more than dq_late_file_hours after the same source's first file of a
-- later capture day: the days after it had been reported on without it (a backfill batch is not late)
source_days as (
    select
        source,
        capture_day,
        min(ingested_at) as first_ingested_at
    from manifest
    group by all
),

late as (
    select
        manifest.*,
        exists (
            select 1 from source_days as later
            where later.source = manifest.source and later.capture_day > manifest.capture_day
                and later.first_ingested_at + interval '{{ late_h }} hours' < manifest.ingested_at
        ) as is_late,
        {{ interval_seconds('manifest.ingested_at - (manifest.capture_day + interval 1 day)') }} / 3600.0 as lag_h
    from manifest
),

late_files as (
    select
        'late_files' as check_name,
        'source' as grain,
        source as entity_id,
        capture_day as metric_date,
        cast(count(*) filter (where is_late) as double) as observed,
        cast(count(*) as double) as expected,
        count(*) filter (where is_late) / count(*) as ratio,
        case when count(*) filter (where is_late) > 0 then 'warn' else 'ok' end as status,
        {{ format_text('{} of {} files late; max lag after the capture day {:.1f} h',
            ['count(*) filter (where is_late)', 'count(*)', 'max(lag_h)']) }} as detail
    from late
    group by all
),

quarantine_rate as (
    select
        'quarantine_rate' as check_name,
        'source' as grain,
        source as entity_id,
        capture_day as metric_date,
        cast(count(*) filter (where status = 'quarantined') as double) as observed,
        cast(count(*) as double) as expected,
        count(*) filter (where status = 'quarantined') / count(*) as ratio,
        case
            when count(*) filter (where status = 'quarantined') / count(*) > {{ quarantine_fail }} then 'fail'
            when count(*) filter (where status = 'quarantined') > 0 then 'warn'
            else 'ok'
        end as status,
        {{ format_text('{} of {} files quarantined{}', [
            "count(*) filter (where status = 'quarantined')", 'count(*)',
            "coalesce(': ' || " ~ sorted_distinct_string_agg('reason', "'; '", "status = 'quarantined'") ~ ", '')"]) }} as detail
    from manifest
    group by all
),

job_days as (
    select distinct job_id, cast(event_at as date) as day from {{ ref('stg_step_events__events') }}
),

traced_job_days as (
    select distinct job_id, event_date as day from {{ source('lake_traces', 'raw_trace_events') }}
    where job_id is not null
),

trace_coverage as (
    select
        'trace_coverage' as check_name,
        'fleet' as grain,
        'fleet' as entity_id,
        job_days.day as metric_date,
        cast(count(traced_job_days.job_id) as double) as observed,
        cast(count(*) as double) as expected,
        count(traced_job_days.job_id) / count(*) as ratio,
        case when count(traced_job_days.job_id) = 0 then 'warn' else 'ok' end as status,
        {{ format_text('{} of {} job-days have a trace', ['count(traced_job_days.job_id)', 'count(*)']) }} as detail
    from job_days
    left join traced_job_days using (job_id, day)
    group by all
),

latest_events as (
    {% for source_name, table in event_tables + change_tables %}
    select
        '{{ table }}' as table_name,
        {{ 'true' if (source_name, table) in change_tables else 'false' }} as change_driven,
        max(event_date) + interval 1 day as latest_at
    from {{ source(source_name, table) }}
    {% if not loop.last %}union all{% endif %}
    {% endfor %}
),

freshness as (
    select
        'source_freshness' as check_name,
        'table' as grain,
        latest_events.table_name as entity_id,
        cast(window_end.window_end_at - interval 1 day as date) as metric_date,
        {{ interval_seconds('window_end.window_end_at - latest_events.latest_at') }} / 3600.0 as observed,
        cast({{ fresh_warn_h }} as double) as expected,
        {{ interval_seconds('window_end.window_end_at - latest_events.latest_at') }} / 3600.0 / {{ fresh_warn_h }} as ratio,
        case
            when latest_events.latest_at is null then 'warn'
            when latest_events.change_driven then 'ok'
            when {{ interval_seconds('window_end.window_end_at - latest_events.latest_at') }} / 3600.0 > {{ fresh_fail_h }} then 'fail'
            when {{ interval_seconds('window_end.window_end_at - latest_events.latest_at') }} / 3600.0 > {{ fresh_warn_h }} then 'warn'
            else 'ok'
        end as status,
        case
            when latest_events.latest_at is null then 'no rows ever landed: freshness unknown'
            when latest_events.change_driven then {{ format_text(
                'sparse or change-driven table: latest rows end {}; no rows means nothing to report',
                [format_timestamp('latest_events.latest_at', '%Y-%m-%d')]) }}
            else {{ format_text('latest event day ends {}, window ends {}', [
                format_timestamp('latest_events.latest_at', '%Y-%m-%d'),
                format_timestamp('window_end.window_end_at', '%Y-%m-%d')]) }}
        end as detail
    from latest_events
    cross join window_end
    where window_end.window_end_at is not null
),

unioned as (
    select * from dcgm_coverage
    union all select * from silent_exporters
    union all select * from late_files
    union all select * from quarantine_rate
    union all select * from trace_coverage
    union all select * from freshness
)

select
    check_name,
    grain,
    entity_id,
    metric_date,
    observed,
    expected,
    ratio,
    status,
    detail
from unioned

-- One row per MLPerf run: what ran where (SUBMISSION events and :::SYSJSON), when (run_start,
-- run_stop), how it ended, and its throughput. A run without run_stop is 'incomplete': its
-- run_duration_s and time_to_train_s are NULL (unknown, never 0). time_to_train_s is set for
-- successful runs only (run_stop - run_start, MLPerf's definition; official scoring over several
-- runs lives in the mlperf-logging package). Throughput is as logged (tracked_stats.throughput, or the
-- `throughput` key of older logs): samples per second, in the benchmark's own unit of sample.
with

events as (
    select
        *,
        case
            when key = 'tracked_stats' then try_cast({{ json_text('value_json', "'$.throughput'") }} as double)
            when key = 'throughput' then value_num
        end as throughput
    from {{ ref('stg_mlperf__events') }}
),

per_run as (
    select
        run_id,
        min(landed_file_id) as landed_file_id,
        min(cluster) as cluster,
        min(host) as host,
        min(job_id) as job_id,
        max(system_json) as system_json,
        max({{ json_text('value_json', "'$'") }}) filter (where key = 'submission_benchmark') as benchmark,
        max({{ json_text('value_json', "'$'") }}) filter (where key = 'submission_org') as submission_org,
        max({{ json_text('value_json', "'$'") }}) filter (where key = 'submission_division') as division,
        max({{ json_text('value_json', "'$'") }}) filter (where key = 'submission_platform') as platform,
        max(value_num) filter (where key = 'global_batch_size') as global_batch_size,
        max(value_num) filter (where key = 'seed') as seed,
        max(value_num) filter (where key = 'train_samples') as train_samples,
        max(value_num) filter (where key = 'trained_samples') as trained_samples_logged,
        max(samples_count) as max_samples_count,
        min(time_ms) filter (where key = 'init_start') as init_start_ms,
        min(time_ms) filter (where key = 'init_stop') as init_stop_ms,
        min(time_ms) filter (where key = 'run_start') as run_start_ms,
        min(time_ms) filter (where key = 'run_stop') as run_stop_ms,
        min(ts) filter (where key = 'run_start') as run_start_at,
        min(ts) filter (where key = 'run_stop') as run_stop_at,
        coalesce(min(event_date) filter (where key = 'run_start'), min(event_date)) as run_date,
        max(status) filter (where key = 'run_stop') as run_stop_status,
        avg(throughput) as throughput_mean,
        max_by(throughput, time_ms) filter (where throughput is not null) as throughput_last,
        count(throughput) as throughput_samples,
        max_by(value_num, time_ms) filter (where key = 'eval_accuracy') as eval_accuracy_last,
        count(*) filter (where key = 'eval_accuracy') as evals,
        count(*) as events,
        sum(duplicate_count - 1)::bigint as duplicate_copies,
        max(mllog_records) as mllog_records,
        max(other_lines) as other_lines
    from events
    group by run_id
),

final as (
    select
        ----------  ids
        run_id,
        cluster,
        host,
        job_id,
        landed_file_id,
        ----------  strings
        benchmark,
        coalesce({{ json_text('system_json', "'$.submitter'") }}, submission_org) as submitter,
        {{ json_text('system_json', "'$.system_name'") }} as system_name,
        platform,
        coalesce({{ json_text('system_json', "'$.division'") }}, division) as division,
        {{ json_text('system_json', "'$.accelerator_model_name'") }} as accelerator_model_name,
        {{ sku_from_gpu_name(json_text('system_json', "'$.accelerator_model_name'")) }} as sku,
        {{ json_text('system_json', "'$.framework'") }} as framework,
        case
            when run_stop_ms is null then 'incomplete'
            when run_stop_status in ('success', 'aborted') then run_stop_status
            else 'unknown'
        end as status,
        system_json,
        ----------  numerics
        try_cast({{ json_text('system_json', "'$.number_of_nodes'") }} as integer) as n_nodes,
        try_cast({{ json_text('system_json', "'$.accelerators_per_node'") }} as integer) as accelerators_per_node,
        try_cast({{ json_text('system_json', "'$.number_of_nodes'") }} as integer)
        * try_cast({{ json_text('system_json', "'$.accelerators_per_node'") }} as integer) as n_accelerators,
        global_batch_size,
        seed,
        train_samples,
        coalesce(trained_samples_logged, max_samples_count) as samples_trained,
        (init_stop_ms - init_start_ms) / 1000.0 as init_s,
        (run_stop_ms - run_start_ms) / 1000.0 as run_duration_s,
        case when run_stop_status = 'success' then (run_stop_ms - run_start_ms) / 1000.0 end as time_to_train_s,
        throughput_mean,
        throughput_last,
        throughput_samples,
        eval_accuracy_last,
        evals,
        events,
        duplicate_copies,
        mllog_records,
        other_lines,
        ----------  booleans
        run_stop_ms is not null as is_complete,
        ----------  timestamps
        run_start_at,
        run_stop_at,
        run_date
    from per_run
)

select * from final

-- Every landed file the ingestion has handled, with its latest outcome per parser version:
-- status ok | quarantined | skipped and the reason.
with

source as (
    select * from {{ source('lake_meta', 'ingest_manifest_files') }}
),

final as (
    select
        ----------  ids
        file_id,
        path,
        sha256,
        source,
        format,
        cluster,
        host,
        job_id,
        rank,
        ----------  strings
        status,
        reason,
        ----------  numerics
        parser_version,
        size_bytes,
        rows as row_count,
        ----------  timestamps
        captured_at,
        ingested_at
    from source
)

select * from final

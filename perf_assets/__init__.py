"""GPU fleet performance warehouse: Dagster assets, ingestion, detection and alerts."""

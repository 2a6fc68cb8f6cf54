"""Data quality as plain functions (no Dagster): figures the asset checks and `perfwh` report on."""

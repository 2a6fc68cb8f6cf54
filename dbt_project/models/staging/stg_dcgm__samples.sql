-- DCGM samples (range JSON, dcgm-exporter text, dcgmi dmon), one row per natural key; gpu_instance is
-- the MIG instance (NULL: the whole GPU). The same sample delivered more than once (two exporters or
-- Prometheus replicas, the same capture under another name, twice in one file) keeps the row of the
-- lowest landed_file_id, then the known value, then the larger value: deterministic. `copies` counts
-- the deliveries of the key and `conflicting` says whether they disagreed (int_dcgm_sample_conflicts).
-- The rules are the macro deduplicated_dcgm_samples, which int_dcgm_samples applies to one batch's raw rows.
{{ deduplicated_dcgm_samples(source('lake', 'raw_dcgm')) }}

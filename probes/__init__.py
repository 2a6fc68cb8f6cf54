"""GPU probes: micro-benchmarks run on a GPU host, written as `probe_results` JSON lines.

A GPU host installs only the ``probes`` extra (torch, nvidia-ml-py): nothing here imports Dagster or
``perf_assets``. Each module has one job:

- ``records``: the ``ProbeResult`` row of the ``probe_results`` format, its JSON line and landing path
- ``stats``: median, IQR and a bootstrap CI of the median of per-iteration samples
- ``backends``: which device and library a probe runs on (torch CUDA, torch CPU, numpy CPU)
- ``specs``: the physical peaks of ``dbt_project/seeds/gpu_sku_specs.csv``
- ``throttle``: clock-event (throttle) reasons from NVML over a timed window
- ``context``: host and software facts recorded with every result
- ``verdict``: pass / fail against the physical limit
- ``gemm``: the dense matrix-multiply probe
- ``cli``: ``python -m probes gemm --out-dir LANDING --cluster NAME``
"""

PROBE_VERSION = 1  # bump when a probe's method changes, so cohorts never mix methods

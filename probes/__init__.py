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
- ``gemm``: the dense matrix-multiply probe (bf16, fp16, tf32, fp32, fp8, fp64)
- ``launch_latency``, ``hbm_stream``, ``host_device_copy``, ``burn_soak``, ``health``: the other probes
- ``collectives``: ``p2p_copy`` and ``allreduce`` (gloo across 2 CPU processes without 2 GPUs)
- ``suite``: the catalogue in order, with the confirmation re-run
- ``pipes_report``: the probe side of Dagster Pipes (needs only ``dagster-pipes``)
- ``gpu_check``: the device check, a standalone script (standard library, torch, pynvml)
- ``cli``: ``python -m probes run --out-dir LANDING --cluster NAME [--probe NAME ...] [--quick]``
"""

PROBE_VERSION = 1  # bump when a probe's method changes, so cohorts never mix methods

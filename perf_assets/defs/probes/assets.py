"""Probes: the probe catalogue on this host and on remote GPU hosts, through Dagster Pipes.

Both assets run ``python -m probes run --pipes`` in a fresh process (probes.md section 3: one process per
probe run), which lands its JSON lines and reports the landed file, row counts and the ``probes_pass``
check over Pipes. ``local_probe_suite`` starts it with Dagster's ``PipesSubprocessClient`` and lands straight
into ``landing/probe_results/``; ``remote_probe_suite`` (one partition per host, added with
``dagster asset ... --partition`` or in the UI under the dynamic partitions ``probe_hosts``) starts it over
ssh, copies the landed file back and checks its sha256. The landing sensor then ingests it and the build
carries it to ``int_probe_verdicts`` and ``fct_node_health``. Neither asset is part of the build job: they
have their own job and schedule (off by default), so builds stay reproducible.
"""

import os
import sys
from pathlib import Path

import dagster as dg

from perf_assets.defs.probes.pipes_clients import PipesSshClient
from perf_assets.defs.resources import PerfwhHome
from perf_assets.lib.contracts import OWNER
from perf_assets.lib.probe_runs import land_fetched, landing_relative

REPO = Path(__file__).resolve().parents[3]
CHECK = "probes_pass"
probe_hosts = dg.DynamicPartitionsDefinition(name="probe_hosts")


class ProbeSelection(dg.Config):
    cluster: str = "local"
    probes: list[str] = []  # empty: the whole catalogue
    gemm_dtypes: list[str] = []  # empty: every dtype
    quick: bool = False
    backend: str = "auto"  # auto: CUDA, else torch on the CPU, else numpy
    burn_seconds: float | None = None

    def arguments(self) -> list[str]:
        args = ["--cluster", self.cluster, "--backend", self.backend]
        for probe in self.probes:
            args += ["--probe", probe]
        for dtype in self.gemm_dtypes:
            args += ["--gemm-dtype", dtype]
        if self.quick:
            args.append("--quick")
        if self.burn_seconds is not None:
            args += ["--burn-seconds", str(self.burn_seconds)]
        return args


class RemoteProbeConfig(ProbeSelection):
    cluster: str = "remote"
    ssh_destination: str = "{node}"  # "{node}" is the partition key; e.g. "root@{node}" or a ~/.ssh/config alias
    ssh_options: list[str] = []  # e.g. ["-p", "2222", "-i", "/keys/probe"]
    remote_python: str = "python3"  # a python with the `probes` extra installed
    remote_workdir: str = ""  # a checkout of this repository on the host ("": the login directory)
    remote_out_dir: str = "/tmp/perfwh-probes"


def _reported_materialization(invocation: dg.PipesClientCompletedInvocation) -> dict[str, object]:
    for result in invocation.get_results():
        if isinstance(result, dg.MaterializeResult) and result.metadata:
            return {key: getattr(value, "value", value) for key, value in result.metadata.items()}
    raise dg.Failure("the probe host reported no materialization (no landed file)")


@dg.asset(
    key="local_probe_suite",
    group_name="probes",
    owners=[OWNER],
    kinds={"python", "pytorch"},
    check_specs=[dg.AssetCheckSpec(CHECK, asset="local_probe_suite", description="no probe row failed or errored")],
    description=(
        "The probe catalogue on this host's first device (GPU, else the CPU and the rows say so), in a subprocess "
        "over Dagster Pipes: median, IQR, bootstrap CI, throttle class and verdict per metric; lands JSON lines "
        "under landing/probe_results/ for the next ingestion."
    ),
)
def local_probe_suite(context: dg.AssetExecutionContext, config: ProbeSelection, perfwh: PerfwhHome):
    home = perfwh.home().ensure()
    command = [sys.executable, "-m", "probes", "run", "--pipes", "--out-dir", str(home.landing), *config.arguments()]
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    invocation = dg.PipesSubprocessClient(cwd=str(REPO), env=env).run(context=context, command=command)
    return invocation.get_results()


@dg.asset(
    key="remote_probe_suite",
    group_name="probes",
    owners=[OWNER],
    kinds={"python", "pytorch", "ssh"},
    partitions_def=probe_hosts,
    check_specs=[dg.AssetCheckSpec(CHECK, asset="remote_probe_suite", description="no probe row failed or errored")],
    description=(
        "The probe catalogue on a remote GPU host (one partition per host) over ssh and Dagster Pipes; the file "
        "the host landed is copied into landing/probe_results/ and checked against the sha256 it reported."
    ),
)
def remote_probe_suite(context: dg.AssetExecutionContext, config: RemoteProbeConfig, perfwh: PerfwhHome):
    node = context.partition_key
    client = PipesSshClient(config.ssh_destination.format(node=node), config.ssh_options)
    command = [
        config.remote_python, "-m", "probes", "run", "--pipes", "--out-dir", config.remote_out_dir,
        "--node", node, *config.arguments(),
    ]  # fmt: skip
    invocation = client.run(context=context, command=command, cwd=config.remote_workdir or None)
    reported = _reported_materialization(invocation)
    relative = landing_relative(config.remote_out_dir, str(reported["landed_path"]))
    data = client.fetch(str(reported["landed_path"]))
    landed = land_fetched(perfwh.home().ensure(), relative, data, str(reported["sha256"]))
    context.log.info(f"landed {landed} ({len(data)} bytes) from {node}")
    for result in invocation.get_results():
        if isinstance(result, dg.MaterializeResult):
            metadata = {**(result.metadata or {}), "landed_file": dg.MetadataValue.path(str(landed))}
            result = dg.MaterializeResult(
                asset_key=result.asset_key,
                metadata=metadata,
                check_results=result.check_results,
                data_version=result.data_version,
            )
        yield result

"""Ask for the confirming re-run of a probe the warehouse flagged (off by default, like the probe schedule)."""

from functools import partial

import dagster as dg

from perf_assets.defs.jobs import probe_local_host, probe_remote_hosts
from perf_assets.defs.probes.assets import probe_hosts
from perf_assets.lib.paths import data_home
from perf_assets.lib.probe_reruns import pending_confirmations
from perf_assets.lib.warehouse import query_published
from probes.backends import hostname


@dg.sensor(
    name="probe_confirmation_sensor",
    minimum_interval_seconds=300,
    default_status=dg.DefaultSensorStatus.STOPPED,
    jobs=[probe_local_host, probe_remote_hosts],
    description=(
        "For every probe whose latest verdict waits for a confirming re-run (a confirm_rerun rule fired once), "
        "requests that probe again on that node: probe_local_host on this host, probe_remote_hosts for a host "
        "in the probe_hosts partitions; other nodes are logged. One request per awaiting run and probe."
    ),
)
def probe_confirmation_sensor(context: dg.SensorEvaluationContext):
    home = data_home()
    if not home.published_db.exists():
        return dg.SkipReason("no published warehouse yet")
    pending = pending_confirmations(partial(query_published, home))
    remote = set(context.instance.get_dynamic_partitions(probe_hosts.name))
    requests = []
    for item in pending:
        selection = {"probes": [item.probe], "cluster": "confirm"}
        if item.node == hostname():
            config = {"ops": {"local_probe_suite": {"config": selection}}}
            requests.append(dg.RunRequest(run_key=item.key, job_name="probe_local_host", run_config=config))
        elif item.node in remote:
            config = {"ops": {"remote_probe_suite": {"config": selection}}}
            requests.append(
                dg.RunRequest(
                    run_key=item.key, job_name="probe_remote_hosts", partition_key=item.node, run_config=config
                )
            )
        else:
            context.log.info(f"{item.node}: {item.probe} awaits a re-run ({item.rules}); no way to reach it here")
    if not requests:
        return dg.SkipReason(f"{len(pending)} awaiting re-run(s), none reachable from here")
    return dg.SensorResult(run_requests=requests)

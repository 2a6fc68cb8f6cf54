"""The executor and dbt target come from deployment configuration (perf_assets/lib/deployment.py)."""

from __future__ import annotations

import os
import textwrap

import dagster as dg
import pytest

from perf_assets.lib.deployment import configured_dbt_target, configured_executor, executor_for

TWO_STEP_JOB = textwrap.dedent(
    """
    import os

    import dagster as dg

    from perf_assets.lib.deployment import configured_executor


    @dg.asset
    def first() -> int:
        return os.getpid()


    @dg.asset
    def second(first: int) -> dg.Output:
        return dg.Output([first, os.getpid()], metadata={"first_pid": first, "second_pid": os.getpid()})


    defs = dg.Definitions(
        assets=[first, second], jobs=[dg.define_asset_job("two_steps")], executor=configured_executor()
    )


    def two_steps() -> dg.JobDefinition:
        return defs.resolve_job_def("two_steps")
    """
)


def test_in_process_is_the_default(monkeypatch):
    monkeypatch.delenv("PERFWH_EXECUTOR", raising=False)
    assert configured_executor() is dg.in_process_executor
    monkeypatch.setenv("PERFWH_EXECUTOR", "multiprocess")
    assert configured_executor().name == "multiprocess"


def test_unknown_choices_are_clear_errors(monkeypatch):
    with pytest.raises(ValueError, match="not one of in_process, multiprocess, celery, k8s"):
        executor_for("threads")
    monkeypatch.setenv("PERFWH_DBT_TARGET", "trino")
    with pytest.raises(ValueError, match="not one of duckdb, spark, spark_thrift"):
        configured_dbt_target()
    monkeypatch.setenv("PERFWH_DBT_TARGET", "spark")
    assert configured_dbt_target() == "spark"


def test_cluster_executors_name_their_package_when_missing():
    for name, package in (("celery", "dagster-celery"), ("k8s", "dagster-k8s")):
        try:
            executor = executor_for(name)
        except RuntimeError as error:
            assert package in str(error)
        else:
            assert executor.name in ("celery", "k8s")


def test_the_code_location_takes_the_configured_executor(monkeypatch):
    from perf_assets.definitions import defs

    monkeypatch.setenv("PERFWH_EXECUTOR", "multiprocess")
    job = defs().resolve_job_def("ingest_and_build")
    assert job.executor_def.name == "multiprocess"


def test_multiprocess_runs_each_step_in_its_own_process(tmp_path, monkeypatch):
    """The local choice for real: a two-asset job under PERFWH_EXECUTOR=multiprocess on a persistent instance."""
    monkeypatch.setenv("PERFWH_EXECUTOR", "multiprocess")
    (tmp_path / "two_step_job.py").write_text(TWO_STEP_JOB)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # the step processes import the job's module from the working directory
    import two_step_job

    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        with dg.execute_job(dg.reconstructable(two_step_job.two_steps), instance=instance) as result:
            assert result.success
            [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("second")]
            metadata = event.materialization.metadata
            first_pid, second_pid = metadata["first_pid"].value, metadata["second_pid"].value
    assert len({first_pid, second_pid, os.getpid()}) == 3

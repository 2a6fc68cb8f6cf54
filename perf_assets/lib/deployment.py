"""Deployment choices made by configuration, not code: which Dagster executor runs a run's steps, which dbt target.

PERFWH_EXECUTOR picks the executor of every job of the code location (deploy/README.md):
  in_process    every step in the run's process (the default: tests, `perfwh build`, one small host)
  multiprocess  a process per step on the run's host, PERFWH_MAX_CONCURRENT at a time (default 2)
  celery        steps as Celery tasks on workers (dagster-celery; broker and backend from run config)
  k8s           a Kubernetes Job per step (dagster-k8s; image, namespace and resources from run config)
The run launcher is the instance's (dagster.yaml: DefaultRunLauncher here, K8sRunLauncher or CeleryK8sRunLauncher
on a cluster; deploy/helm/values.yaml). PERFWH_DBT_TARGET picks the dbt target (duckdb, spark, spark_thrift).
DuckDB takes one writer at a time whatever the executor: warehouse writers share the pool warehouse_writer.
"""

from __future__ import annotations

import importlib
import os

import dagster as dg

EXECUTORS = ("in_process", "multiprocess", "celery", "k8s")
DBT_TARGETS = ("duckdb", "spark", "spark_thrift")


def executor_for(name: str) -> dg.ExecutorDefinition:
    """The executor a deployment names; a clear error for an unknown name or a missing integration package."""
    if name == "in_process":
        return dg.in_process_executor
    if name == "multiprocess":
        max_concurrent = int(os.environ.get("PERFWH_MAX_CONCURRENT", "2"))
        return dg.multiprocess_executor.configured({"max_concurrent": max_concurrent}, name="multiprocess")
    if name in ("celery", "k8s"):
        module, attribute, package = {
            "celery": ("dagster_celery", "celery_executor", "dagster-celery"),
            "k8s": ("dagster_k8s", "k8s_job_executor", "dagster-k8s"),
        }[name]
        try:
            return getattr(importlib.import_module(module), attribute)
        except ImportError as error:
            raise RuntimeError(
                f"PERFWH_EXECUTOR={name} needs {package} (pip install {package}==0.29.27, matching dagster 1.13.27)"
            ) from error
    raise ValueError(f"PERFWH_EXECUTOR={name!r} is not one of {', '.join(EXECUTORS)}")


def configured_executor() -> dg.ExecutorDefinition:
    return executor_for(os.environ.get("PERFWH_EXECUTOR", "in_process").strip() or "in_process")


def configured_dbt_target() -> str | None:
    """PERFWH_DBT_TARGET, checked; None means the profile's default target (duckdb)."""
    target = os.environ.get("PERFWH_DBT_TARGET", "").strip()
    if target and target not in DBT_TARGETS:
        raise ValueError(f"PERFWH_DBT_TARGET={target!r} is not one of {', '.join(DBT_TARGETS)}")
    return target or None

"""Detection: change points on the metric tree, written to the warehouse table `regressions`."""

from datetime import datetime, timezone

import dagster as dg

from perf_assets.defs.resources import PerfwhHome
from perf_assets.lib.changepoint import DetectorConfig
from perf_assets.lib.contracts import OWNER, REGRESSIONS_TABLE, WRITER_POOL
from perf_assets.lib.detection import (
    CLIPPED_SERIES,
    GRAIN_MIN_EFFECTS,
    REGRESSION_COLUMNS,
    describe_regression,
    detect_regressions,
    regressions_ddl,
)
from perf_assets.lib.metadata_plots import markdown_image, regression_chart, regression_sparkline, regression_view
from perf_assets.lib.rollout_canary import CANARY_SCHEMA, canary_markdown
from perf_assets.lib.warehouse import connect, publish_snapshot, warehouse_write_lock

DETECTION_RUNS_TABLE = "detection_runs"  # one row: the last run's series tested and days (series-days)
ROLLOUT_CANARIES_TABLE = "rollout_canaries"  # every rollout to part of a cluster against its untouched nodes


class DetectionConfig(dg.Config):
    """Detector knobs (see perf_assets/lib/changepoint.py); defaults suit daily series of 2-8 weeks."""

    min_segment: int = 3
    max_pvalue: float = 0.01
    min_relative_effect: float = 0.03
    n_permutations: int = 999
    max_permutations: int = 99_999  # adaptive refinement of p-values at the floor 1/(1+n) under BH
    seed: int = 0
    statistic: str = "student"  # "rank": the robust rank-sum scan (heavy tails, spikes); "welch"
    epidemic: bool = True  # also scan intervals against the rest (student, rank): a level that moves and comes back
    max_qvalue: float | None = 0.05  # Benjamini-Hochberg FDR across the run's series; None: per series
    min_relative_effects: dict[str, float] = {}  # per metric (tree node), e.g. {"availability": 0.01}
    confirm_points: int = 7  # days after a change for the verdict "confirmed" (else provisional)
    # minimum |relative effect| per grain (min_relative_effects entries "grain/metric" or "metric" win)
    grain_min_relative_effects: dict[str, float] = dict(GRAIN_MIN_EFFECTS)
    # BH families: "auto" (hierarchical, fleet and clusters -> nodes -> GPUs, when one family could not discover a
    # lone change: many series, few days), "flat" (one family), "tree" (always hierarchical)
    fdr_families: str = "auto"
    # several changes per series (docs/detection.md, "Split and merge"): "split_merge" or "binary" segmentation
    segmentation: str = "split_merge"
    propose_pvalue: float = 0.05  # a sub-segment scan at or under this (and BH q) proposes a change
    merge_pvalue: float = 0.001  # a proposal is kept when its test between its neighbouring changes passes this
    # an epidemic interval's reported end whose other end is a change too needs its own split test (docs/detection.md)
    merge_interval_ends: bool = True
    # series ("grain/metric") the Student scan reads Huber-clipped: heavy-tailed by nature (docs/detection.md)
    clipped_metrics: list[str] = list(CLIPPED_SERIES)

    def detector_config(self) -> DetectorConfig:
        """This run config as the change-point library's DetectorConfig (the asset, `perfwh detect`-style replays)."""
        return DetectorConfig(
            min_segment=self.min_segment,
            max_pvalue=self.max_pvalue,
            min_relative_effect=self.min_relative_effect,
            n_permutations=self.n_permutations,
            max_permutations=self.max_permutations,
            seed=self.seed,
            statistic=self.statistic,
            epidemic=self.epidemic,
            max_qvalue=self.max_qvalue,
            min_relative_effects=dict(self.min_relative_effects),
            confirm_points=self.confirm_points,
            fdr_families=self.fdr_families,
            segmentation=self.segmentation,
            propose_pvalue=self.propose_pvalue,
            merge_pvalue=self.merge_pvalue,
            merge_interval_ends=self.merge_interval_ends,
            clipped_metrics=tuple(self.clipped_metrics),
        )


@dg.asset(
    key=REGRESSIONS_TABLE,
    group_name="detection",
    owners=[OWNER],
    kinds={"duckdb", "python"},
    pool=WRITER_POOL,
    deps=["metric_tree_daily", "stg_node_software__versions", "stg_inventory__gpus", "int_allocation_nodes"],
    description=(
        "Change points in goodput and its spine factors per node, per cluster and for the fleet, and in the "
        "companions (SM clock, power, thermal throttling, tensor activity, GEMM and HBM probes) per GPU, node, "
        "cluster and fleet, each with pooled "
        "before/after levels (numerator and denominator), relative effect, 95% bootstrap CI, "
        "scan-corrected permutation p-value, Benjamini-Hochberg q-value, verdict (confirmed or provisional), "
        "the factor that moved (log contributions), coinciding rollouts, the same change on peers "
        "(difference in differences) and ranked cause candidates (node dimensions that changed on the entity's "
        "nodes only, each with a peer diff-in-diff and its 95% interval). Also writes `detection_runs` "
        "(series tested x days: the series-days of the evaluation) and `rollout_canaries` (every configuration "
        "change that part of a cluster took, tested against the cluster's untouched nodes on the same stack: "
        "difference in differences, bootstrap interval, randomization p, verdict or the reason it could not be "
        "tested)."
    ),
)
def regressions(context: dg.AssetExecutionContext, config: DetectionConfig, perfwh: PerfwhHome) -> dg.MaterializeResult:
    home = perfwh.home()
    detector = config.detector_config()
    with warehouse_write_lock(home):
        connection = connect(home.warehouse_db, read_only=False)
        try:
            metric_tree = connection.execute("select * from metric_tree_daily").df()
            node_software = connection.execute("select * from staging.stg_node_software__versions").df()
            inventory = connection.execute("select * from staging.stg_inventory__gpus").df()
            allocations = connection.execute(
                "select slurm_job_id, node, start_at, end_at from intermediate.int_allocation_nodes"
            ).df()
            cluster_nodes = inventory.groupby("cluster")["node"].apply(lambda nodes: sorted(set(nodes))).to_dict()
            gpu_nodes = dict(zip(inventory["gpu_uuid"], inventory["node"]))
            found = detect_regressions(
                metric_tree,
                node_software,
                cluster_nodes,
                detector,
                datetime.now(timezone.utc),
                gpu_nodes=gpu_nodes,
                grain_min_effects=dict(config.grain_min_relative_effects),
                inventory=inventory,
                allocations=allocations,
            )
            connection.register("found", found)
            connection.execute(regressions_ddl(f"main.{REGRESSIONS_TABLE}"))
            connection.execute(
                f"insert into main.{REGRESSIONS_TABLE} select {', '.join(REGRESSION_COLUMNS)} from found"
            )
            connection.unregister("found")
            series = found.attrs.get("series", {})
            connection.execute(
                f"create or replace table main.{DETECTION_RUNS_TABLE} as select ?::timestamptz as detected_at, "
                "?::integer as series_tested, ?::integer as series_too_short, ?::integer as days, "
                "?::bigint as series_days",
                [
                    datetime.now(timezone.utc),
                    int(series.get("tested", 0)),
                    int(series.get("too_short", 0)),
                    int(found.attrs.get("days", 0)),
                    int(found.attrs.get("series_days", 0)),
                ],
            )
            canaries = found.attrs.get("canaries")  # absent when the tree had no series at all
            columns = ", ".join(f"{name} {kind}" for name, kind in CANARY_SCHEMA.items())
            connection.execute(f"create or replace table main.{ROLLOUT_CANARIES_TABLE} ({columns})")
            if canaries is not None and len(canaries):
                connection.register("canaries", canaries)
                connection.execute(
                    f"insert into main.{ROLLOUT_CANARIES_TABLE} select "
                    + ", ".join(f"{name}::{kind}" for name, kind in CANARY_SCHEMA.items())
                    + " from canaries"
                )
                connection.unregister("canaries")
        finally:
            connection.close()
        publish_snapshot(home)
    series = found.attrs.get("series", {})
    if found.attrs.get("too_short"):
        context.log.warning(
            f"{len(found.attrs['too_short'])} series too short to test (not 'no change'): "
            + ", ".join(found.attrs["too_short"][:20])
        )
    confirmed = found[found["change_kind"] == "regression"]
    for row in confirmed.to_dict("records"):
        context.log.info(describe_regression(row))
    view = regression_view(found, metric_tree)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": dg.MetadataValue.int(len(found)),
            "regressions": dg.MetadataValue.int(len(confirmed)),
            "improvements": dg.MetadataValue.int(len(found) - len(confirmed)),
            "provisional": dg.MetadataValue.int(int((found["verdict"] == "provisional").sum())),
            "series_tested": dg.MetadataValue.int(int(series.get("tested", 0))),
            "series_too_short": dg.MetadataValue.int(int(series.get("too_short", 0))),
            "days": dg.MetadataValue.int(int(found.attrs.get("days", 0))),
            "series_days": dg.MetadataValue.int(int(found.attrs.get("series_days", 0))),
            "headline": dg.MetadataValue.text(view["title"]),
            "regression_sparkline": dg.MetadataValue.md(regression_sparkline(view)),
            "regression_plot": dg.MetadataValue.md(markdown_image(regression_chart(view), view["title"])),
            "rollout_canaries": dg.MetadataValue.md(canary_markdown(found.attrs.get("canaries"))),
            "summary": dg.MetadataValue.md(
                "\n".join(f"- {describe_regression(row)}" for row in confirmed.to_dict("records")) or "none"
            ),
        }
    )

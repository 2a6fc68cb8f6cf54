"""Evaluation: detection and attribution scored against the simulator's labeled incidents."""

import json

import dagster as dg

from perf_assets.defs.resources import PerfwhHome
from perf_assets.lib.contracts import OWNER, REGRESSIONS_TABLE
from perf_assets.lib.evaluation import evaluate, load_labels
from perf_assets.lib.warehouse import published_frame


@dg.asset(
    key="detection_evaluation",
    group_name="evaluation",
    owners=[OWNER],
    kinds={"python", "json"},
    deps=[REGRESSIONS_TABLE],
    description="Recall, precision and attribution accuracy of `regressions` against landing/labels.json; written to reports/evaluation.json.",
)
def detection_evaluation(context: dg.AssetExecutionContext, perfwh: PerfwhHome) -> dg.MaterializeResult:
    home = perfwh.home()
    labels = load_labels(home.labels_file)
    found = published_frame(home, f"select * from {REGRESSIONS_TABLE}")
    result = evaluate(found, labels)
    (home.reports_dir / "evaluation.json").write_text(json.dumps(result.as_dict(), indent=2, default=str))
    context.log.info(result.line())
    metadata = {
        "labels": dg.MetadataValue.int(result.labels),
        "detected_labels": dg.MetadataValue.int(result.detected_labels),
        "cluster_regressions": dg.MetadataValue.int(result.cluster_regressions),
        "summary": dg.MetadataValue.text(result.line()),
    }
    if result.recall is not None:
        metadata["recall"] = dg.MetadataValue.float(result.recall)
    if result.precision is not None:
        metadata["precision"] = dg.MetadataValue.float(result.precision)
    return dg.MaterializeResult(metadata=metadata)

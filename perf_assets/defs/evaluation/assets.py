"""Evaluation: detection and attribution scored against the simulator's labeled incidents (docs/evaluation.md)."""

import json

import dagster as dg

from perf_assets.defs.resources import PerfwhHome
from perf_assets.lib.contracts import OWNER, REGRESSIONS_TABLE
from perf_assets.lib.evaluation import evaluate_home, line, table_markdown

# Thresholds per scenario (labels.json `scenario`); a scenario not listed is scored but not checked.
# The demo scores recall 1.0 and precision 1.0 (seed 7); these hold with margin.
DEFAULT_THRESHOLDS = {"demo": {"min_recall": 0.75, "min_precision": 0.5}}
CHECK_NAME = "evaluation_meets_thresholds"


class EvaluationConfig(dg.Config):
    """Thresholds of the asset check, per labels.json scenario: {scenario: {min_recall, min_precision}}."""

    thresholds: dict[str, dict[str, float]] = DEFAULT_THRESHOLDS


def threshold_check(result: dict, thresholds: dict[str, dict[str, float]]) -> dg.AssetCheckResult:
    """Passes when recall and precision are at or above the scenario's thresholds; unchecked scenarios pass."""
    scenario = result.get("scenario")
    limits = thresholds.get(str(scenario))
    if not limits:
        return dg.AssetCheckResult(
            check_name=CHECK_NAME,
            passed=True,
            metadata={"checked": False, "reason": f"no thresholds for scenario {scenario!r}"},
        )
    failures = []
    for name in ("recall", "precision"):
        floor = limits.get(f"min_{name}")
        value = result.get(name)
        if floor is not None and (value is None or value < floor):
            failures.append(f"{name} {value} < {floor}")
    return dg.AssetCheckResult(
        check_name=CHECK_NAME,
        passed=not failures,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "checked": True,
            "recall": result.get("recall"),
            "precision": result.get("precision"),
            "thresholds": json.dumps(limits),
            "failures": "; ".join(failures) or "none",
        },
    )


@dg.asset(
    key="detection_evaluation",
    group_name="evaluation",
    owners=[OWNER],
    kinds={"python", "json"},
    deps=[REGRESSIONS_TABLE],
    check_specs=[
        dg.AssetCheckSpec(
            CHECK_NAME,
            asset="detection_evaluation",
            description="Recall and precision at or above the thresholds of the labels' scenario (docs/evaluation.md).",
        )
    ],
    description=(
        "Precision, recall and F1 (Wilson 95% intervals) per kind, per magnitude and overall, delay, false alarms "
        "per 1,000 series-days, factor, cause and mix attribution accuracy of the incident groups of `regressions` "
        "against landing/labels.json (docs/evaluation.md); written to reports/evaluation.json."
    ),
)
def detection_evaluation(
    context: dg.AssetExecutionContext, config: EvaluationConfig, perfwh: PerfwhHome
) -> dg.MaterializeResult:
    home = perfwh.home()
    result = evaluate_home(home)
    home.reports_dir.mkdir(parents=True, exist_ok=True)
    (home.reports_dir / "evaluation.json").write_text(json.dumps(result, indent=2, default=str))
    context.log.info(line(result))
    metadata = {
        "scenario": dg.MetadataValue.text(str(result.get("scenario"))),
        "labels": dg.MetadataValue.int(result["labels"]),
        "detected_labels": dg.MetadataValue.int(result["detected_labels"]),
        "incident_groups": dg.MetadataValue.int(result["groups"]),
        "false_alarms": dg.MetadataValue.int(result["false_alarms"]["count"]),
        "table": dg.MetadataValue.md(table_markdown(result)),
        "summary": dg.MetadataValue.text(line(result)),
    }
    for name in ("recall", "precision"):
        if result[name] is not None:
            metadata[name] = dg.MetadataValue.float(result[name])
    return dg.MaterializeResult(metadata=metadata, check_results=[threshold_check(result, dict(config.thresholds))])

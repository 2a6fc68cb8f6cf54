"""The text summary `perfwh build` and `perfwh report` print: goodput, its factors, regressions, score."""

from __future__ import annotations

import json
import math
from collections import Counter

import pandas as pd

from perf_assets.lib.alerts import build_incidents
from perf_assets.lib.paths import DataHome
from perf_assets.lib.topology import read_topology
from perf_assets.lib.warehouse import published_frame

FACTOR_SQL = """
select
    {label} as entity,
    min(metric_date) as first_day,
    max(metric_date) as last_day,
    count(distinct metric_date) as days,
    sum(useful_flop) as useful_flop,
    sum(installed_pfs) as installed_pfs,
    sum(available_pfs) as available_pfs,
    sum(allocated_pfs) as allocated_pfs,
    sum(productive_pfs) as productive_pfs,
    sum(productive_flops_known_pfs) / nullif(sum(productive_pfs), 0) as coverage
from {table}
group by all
order by 1
"""


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


def goodput_lines(frame: pd.DataFrame) -> list[str]:
    lines = []
    for row in frame.to_dict("records"):
        a = _ratio(row["available_pfs"], row["installed_pfs"])
        u = _ratio(row["allocated_pfs"], row["available_pfs"])
        r = _ratio(row["productive_pfs"], row["allocated_pfs"])
        p = _ratio(row["useful_flop"], row["productive_pfs"])
        g = _ratio(row["useful_flop"], row["installed_pfs"])
        lines.append(
            f"  {row['entity']:<8} {row['first_day']}..{row['last_day']} ({row['days']} days): "
            f"goodput {g:.4f} = availability {a:.4f} x allocation {u:.4f} x runtime_goodput {r:.4f} "
            f"x program_goodput {p:.4f}   [useful {row['useful_flop']:.4g} FLOP / installed {row['installed_pfs']:.4g} "
            f"peak-FLOP-s; FLOPs metadata covers {row['coverage']:.0%} of productive time]"
        )
    return lines


def summary(home: DataHome) -> str:
    """Pooled Σnumerator/Σdenominator over the whole window (never a mean of daily ratios)."""
    fleet = published_frame(home, FACTOR_SQL.format(label="'fleet'", table="fct_fleet_day"))
    clusters = published_frame(home, FACTOR_SQL.format(label="cluster", table="fct_cluster_day"))
    found = published_frame(home, "select * from regressions order by grain desc, entity_id, change_date, metric")
    lines = [
        "Fleet goodput (capacity lens, dense BF16 peak):",
        *goodput_lines(fleet),
        "Per cluster:",
        *goodput_lines(clusters),
    ]
    confirmed = found[found["change_kind"] == "regression"] if not found.empty else found
    incidents = build_incidents(found, read_topology(lambda sql: published_frame(home, sql)))
    lines.append(
        f"Regressions found: {len(confirmed)} changes in {len(incidents)} incident(s) "
        f"(and {len(found) - len(confirmed)} improvements); each incident is one alert:"
    )
    for incident in incidents:
        lines.append(f"  - {incident['summary']}")
        related = [name for name in incident["metrics"] if name != incident["headline_metric"]]
        children = Counter(str(child["grain"]) for child in incident.get("children", []))
        if related or children:
            parts = ([f"{', '.join(related)} of the same entity"] if related else []) + [
                f"{count} {grain}" for grain, count in sorted(children.items())
            ]
            lines.append(f"    with {sum(children.values()) + len(related)} related changes: {'; '.join(parts)}")
    evaluation = home.reports_dir / "evaluation.json"
    if evaluation.exists():
        score = json.loads(evaluation.read_text())
        if score.get("labels"):
            from perf_assets.lib.evaluation import line

            lines.append(f"Evaluation against {score['labels']} labeled incident(s): " + line(score))
    lines.append(
        f"Alerts: perfwh alerts list (store {home.alerts_dir / 'events.jsonl'}; sent to the sinks of alerts.yaml)"
    )
    lines.append(f'Published warehouse (read-only): {home.published_db}  ->  perfwh sql "select * from fct_fleet_day"')
    lines.append(f"Reports: {home.reports_dir}")
    return "\n".join(lines)

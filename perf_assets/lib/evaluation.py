"""Score detection and attribution against the simulator's labeled incidents (labels.json)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from pathlib import Path

import pandas as pd

MATCH_WINDOW = timedelta(days=1)


@dataclass(frozen=True)
class Evaluation:
    labels: int
    detected_labels: int
    recall: float | None
    cluster_regressions: int
    explained_regressions: int
    precision: float | None
    factor_correct: int
    rollout_correct: int
    matches: list[dict]

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        def fmt(value: float | None) -> str:
            return "n/a" if value is None else f"{value:.2f}"

        return (
            f"recall {fmt(self.recall)} ({self.detected_labels}/{self.labels} incidents), "
            f"precision {fmt(self.precision)} ({self.explained_regressions}/{self.cluster_regressions} cluster regressions), "
            f"factor attribution {self.factor_correct}/{self.detected_labels}, rollout attribution {self.rollout_correct}/{self.detected_labels}"
        )


def load_labels(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return json.loads(path.read_text(encoding="utf-8")).get("incidents", [])


def _near(change_date: object, label_start: str) -> bool:
    start = date.fromisoformat(label_start[:10])
    changed = pd.Timestamp(change_date).date()
    return abs(changed - start) <= MATCH_WINDOW


def _clusters(label: dict) -> list[str]:
    """The clusters a label's incident acts on: its scope's (a mix shift moves several), else its own."""
    return (label.get("scope") or {}).get("clusters") or [label["cluster"]]


def evaluate(regressions: pd.DataFrame, labels: list[dict]) -> Evaluation:
    """A label is detected when a cluster regression of its entity starts within a day of it on
    its factor or on goodput; a regression is explained when some label of its entity (or with the
    entity among its scope's clusters) is that near.
    Decoys (`decoy: true`: noise, diurnal swings, null rollouts, maintenance) must not alert: they are
    not counted as labels to find, and a regression near one alone is unexplained."""
    cluster = regressions[(regressions["grain"] == "cluster") & (regressions["change_kind"] == "regression")]
    labels = [label for label in labels if not label.get("decoy")]
    matches = []
    for label in labels:
        candidates = cluster[
            (cluster["entity_id"] == label["cluster"])
            & cluster["metric"].isin([label["factor"], "goodput"])
            & cluster["change_date"].map(lambda value, start=label["start"]: _near(value, start))
        ]
        if candidates.empty:
            matches.append({"incident_id": label["incident_id"], "detected": False})
            continue
        best = candidates.sort_values("p_value").iloc[0]
        goodput_rows = candidates[candidates["metric"] == "goodput"]
        factor = goodput_rows.iloc[0]["top_factor"] if not goodput_rows.empty else best["metric"]
        rollouts = json.loads(best["coinciding_changes"] or "[]")
        component = (label.get("cause") or {}).get("component")
        matches.append(
            {
                "incident_id": label["incident_id"],
                "detected": True,
                "regression_id": best["regression_id"],
                "detected_change_date": str(best["change_date"]),
                "relative_effect": float(best["relative_effect"]),
                "expected_relative_change": label.get("expected_relative_change"),
                "factor_attributed": factor,
                "factor_correct": factor == label["factor"],
                "rollout_correct": component is not None and any(r["component"] == component for r in rollouts),
            }
        )
    explained = sum(
        any(row.entity_id in _clusters(label) and _near(row.change_date, label["start"]) for label in labels)
        for row in cluster.itertuples()
    )
    detected = [match for match in matches if match["detected"]]
    return Evaluation(
        labels=len(labels),
        detected_labels=len(detected),
        recall=len(detected) / len(labels) if labels else None,
        cluster_regressions=len(cluster),
        explained_regressions=explained,
        precision=explained / len(cluster) if len(cluster) else None,
        factor_correct=sum(match["factor_correct"] for match in detected),
        rollout_correct=sum(match["rollout_correct"] for match in detected),
        matches=matches,
    )

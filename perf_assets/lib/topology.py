"""Which nodes (and GPUs) an entity covers, at every grain: fleet, cluster, rack, cohort, node, gpu.

A cohort (rollout_canary.py: the nodes of a cluster that took one configuration change) names its nodes in its
entity id, joined by ``COHORT_SEPARATOR``, so a cohort row's scope needs no table beside the inventory.

Built from the inventory (`stg_inventory__gpus`: gpu_uuid, node, rack, cluster); used by cause
ranking (the nodes of an entity and of its peers), grouping (is one scope inside another) and
evaluation (does a detected scope overlap a label's scope).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

GRAIN_RANK = {"fleet": 0, "cluster": 1, "rack": 2, "cohort": 2, "node": 3, "gpu": 4}
COHORT_SEPARATOR = "+"


def cohort_nodes(entity: str) -> set[str]:
    """The nodes a cohort's entity id names."""
    return set(str(entity).split(COHORT_SEPARATOR)) if entity else set()


@dataclass(frozen=True)
class Topology:
    node_cluster: dict[str, str] = field(default_factory=dict)
    node_rack: dict[str, str] = field(default_factory=dict)
    gpu_node: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_frame(cls, inventory: pd.DataFrame | None) -> "Topology":
        """From rows with `node`, `cluster` and optionally `rack`, `gpu_uuid` (the last row of a key wins)."""
        if inventory is None or inventory.empty:
            return cls()
        node_cluster = dict(zip(inventory["node"].astype(str), inventory["cluster"].astype(str)))
        node_rack = (
            dict(zip(inventory["node"].astype(str), inventory["rack"].astype(str))) if "rack" in inventory else {}
        )
        gpu_node = (
            dict(zip(inventory["gpu_uuid"].astype(str), inventory["node"].astype(str)))
            if "gpu_uuid" in inventory
            else {}
        )
        return cls(node_cluster, node_rack, gpu_node)

    @classmethod
    def from_cluster_nodes(cls, cluster_nodes: dict[str, list[str]]) -> "Topology":
        return cls({node: cluster for cluster, nodes in cluster_nodes.items() for node in nodes})

    @property
    def nodes(self) -> list[str]:
        return sorted(self.node_cluster)

    def gpus_per_cluster(self) -> dict[str, int]:
        """Installed GPUs per cluster (the inventory's); a cluster with no GPU listed is absent (unknown, not 0)."""
        gpus: dict[str, int] = {}
        for node in self.gpu_node.values():
            cluster = self.node_cluster.get(node)
            if cluster is not None:
                gpus[cluster] = gpus.get(cluster, 0) + 1
        return gpus

    def nodes_of(self, grain: str, entity: str) -> set[str]:
        """The nodes an entity covers; an unknown entity covers none (unknown, not everything)."""
        if grain == "fleet":
            return set(self.node_cluster)
        if grain == "cluster":
            return {node for node, cluster in self.node_cluster.items() if cluster == entity}
        if grain == "rack":
            return {node for node, rack in self.node_rack.items() if rack == entity}
        if grain == "cohort":
            return cohort_nodes(entity)
        if grain == "node":
            return {entity}
        if grain == "gpu":
            return {self.gpu_node[entity]} if entity in self.gpu_node else set()
        return set()

    def cluster_of(self, grain: str, entity: str) -> str | None:
        if grain == "cluster":
            return entity
        nodes = self.nodes_of(grain, entity)
        clusters = {self.node_cluster.get(node) for node in nodes} - {None}
        return clusters.pop() if len(clusters) == 1 else None

    def contains(self, broad: tuple[str, str], narrow: tuple[str, str]) -> bool:
        """Is the scope (grain, entity) `narrow` inside `broad` (equal scopes count)?"""
        (bgrain, bentity), (ngrain, nentity) = broad, narrow
        if (bgrain, bentity) == (ngrain, nentity) or bgrain == "fleet":
            return True
        if GRAIN_RANK.get(bgrain, 9) >= GRAIN_RANK.get(ngrain, 9):
            return False  # same grain, other entity; or the broad one is finer
        if bgrain == "cluster" and ngrain in ("rack", "cohort", "node", "gpu"):
            return self.cluster_of(ngrain, nentity) == bentity
        inner = self.nodes_of(ngrain, nentity)
        return bool(inner) and inner <= self.nodes_of(bgrain, bentity)


INVENTORY_SQL = "select distinct gpu_uuid, node, rack, cluster from {table}"


def read_topology(query) -> Topology:
    """The topology from the warehouse's inventory staging table; `query(sql)` returns a DataFrame.
    An older snapshot without it gives an empty topology (scopes nest only for the same entity and the fleet)."""
    for table in ("dim_gpus", "staging.stg_inventory__gpus"):  # the published snapshot has the mart
        try:
            return Topology.from_frame(query(INVENTORY_SQL.format(table=table)))
        except Exception:  # noqa: BLE001 - table absent in this snapshot
            continue
    return Topology()

"""Hierarchical BH families (changepoint.detect's `parents`): a short window over many series.

With 14 days the smallest permutation p-value any scan can have is 2 / C(14, 7) = 0.00058, however many
permutations run, so one BH family over ~1,800 series cannot discover a lone incident (its q is at least
1,800 x 0.00058 / k). Tested within the children of a discovered parent (fleet and clusters, then the nodes of a
discovered cluster series, then the GPUs of a discovered node series), the same incident is found.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from perf_assets.lib.changepoint import (
    DetectorConfig,
    benjamini_hochberg,
    benjamini_hochberg_by_family,
    detect,
    smallest_permutation_pvalue,
    tree_needed,
)

DAYS, CLUSTERS, NODES, GPUS = 14, 5, 40, 8


def fleet(seed: int = 3):
    """5 clusters x 40 nodes x 8 GPUs of 14 daily values with 1 % noise; node 3 of cluster 0 and its 8 GPUs drop
    10 % from day 7, and so does cluster 0's own series by 0.5 % (its 40 nodes averaged: 1 in 40 slower, with
    0.05 % noise). Returns values, parents (row of the parent series, -1 for clusters) and the changed rows."""
    rng = np.random.default_rng(seed)
    rows, parents, changed = [], [], set()
    step = np.where(np.arange(DAYS) >= 7, 1.0, 0.0)
    for cluster in range(CLUSTERS):
        cluster_row = len(rows)
        drop = 0.005 if cluster == 0 else 0.0
        rows.append(np.exp(rng.normal(0, 0.0005, DAYS)) * (1 - drop * step))
        parents.append(-1)
        if drop:
            changed.add(cluster_row)
        for node in range(NODES):
            node_row = len(rows)
            hit = cluster == 0 and node == 3
            rows.append(np.exp(rng.normal(0, 0.01, DAYS)) * (1 - 0.1 * step * hit))
            parents.append(cluster_row)
            if hit:
                changed.add(node_row)
            for _ in range(GPUS):
                if hit:
                    changed.add(len(rows))
                rows.append(np.exp(rng.normal(0, 0.01, DAYS)) * (1 - 0.1 * step * hit))
                parents.append(node_row)
    return np.array(rows), parents, changed


CONFIG = DetectorConfig(epidemic=False, statistic="student", min_relative_effect=0.003, max_permutations=19_999)


def found_rows(result) -> set[int]:
    return {change.series_index for change in result.changes}


def test_the_permutation_floor_is_exact_and_decides_the_families():
    assert smallest_permutation_pvalue(14) == pytest.approx(2 / math.comb(14, 7)) == pytest.approx(0.000583, rel=1e-3)
    assert smallest_permutation_pvalue(5) == 1.0  # shorter than two segments of 3: never testable
    # fleet-1k at 14 days (~6,450 series) needs the tree; incidents at 28 days (712 series) does not
    assert tree_needed(6450, 14, CONFIG) and tree_needed(CLUSTERS * (1 + NODES * (1 + GPUS)), 14, CONFIG)
    assert not tree_needed(712, 28, CONFIG)
    assert not tree_needed(85, 14, CONFIG) and tree_needed(86, 14, CONFIG)  # 85 x 0.000583 = 0.0495, 86: 0.0501
    assert not tree_needed(6450, 14, DetectorConfig(max_qvalue=None))  # no BH, no families


def test_bh_by_family_is_bh_within_each_label():
    p = np.array([0.001, 0.04, 0.001, 0.2, 0.03])
    families = np.array([0, 0, 1, 1, 1])
    q = benjamini_hochberg_by_family(p, families)
    assert q[:2] == pytest.approx(benjamini_hochberg(p[:2]))
    assert q[2:] == pytest.approx(benjamini_hochberg(p[2:]))
    assert benjamini_hochberg_by_family(p, None) == pytest.approx(benjamini_hochberg(p))


def test_one_family_misses_the_lone_node_and_the_tree_finds_it():
    values, parents, changed = fleet()
    ones = np.ones_like(values)
    flat = detect(values, ones, dataclasses.replace(CONFIG, fdr_families="flat"), parents=parents)
    assert found_rows(flat) == set()  # 10 changed series at the floor among 1,805: q >= 0.1
    first = flat.series[0]
    assert first.p_value < 0.01 and first.q_value > 0.05  # the cluster: significant alone, not among 1,805

    tree = detect(values, ones, dataclasses.replace(CONFIG, fdr_families="tree"), parents=parents)
    assert found_rows(tree) == changed  # the cluster, its slow node and that node's 8 GPUs; nothing else
    auto = detect(values, ones, CONFIG, parents=parents)  # "auto": 1,805 x 0.00058 > 0.05, so the tree
    assert found_rows(auto) == changed
    # a series whose parent was not discovered was not tested in the tree: no q-value (unknown, not 1)
    other_cluster_node = parents.index(1 + NODES * (1 + GPUS))  # the first node of cluster 1
    assert auto.series[other_cluster_node].q_value is None
    assert auto.series[other_cluster_node].status == "no_change" and auto.series[other_cluster_node].p_value > 0
    # without parents the call is one family, as before
    assert found_rows(detect(values, ones, CONFIG)) == set()


def test_parents_are_checked():
    values = np.ones((3, DAYS))
    with pytest.raises(ValueError, match="parents"):
        detect(values, values, CONFIG, parents=[-1, 1, 0])  # row 1 its own parent
    with pytest.raises(ValueError, match="parents"):
        detect(values, values, CONFIG, parents=[-1, 0])  # one per row
    with pytest.raises(ValueError, match="fdr_families"):
        DetectorConfig(fdr_families="forest")

"""Scenario YAML files: demo.yaml is the code-defined demo, paths work, bad keys are named, fleet-1k parses."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from perf_assets.lib.paths import data_home
from perf_assets.lib.simulate import simulate
from perf_assets.lib.simulate.scenario import SCENARIO_DIR, demo, get_scenario, load_scenario


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_demo_yaml_equals_code_demo():
    assert get_scenario("demo") == demo()
    assert load_scenario(SCENARIO_DIR / "demo.yaml") == demo()


def test_demo_yaml_writes_the_same_bytes(tmp_path):
    from_yaml = simulate(data_home(tmp_path / "yaml"), load_scenario(SCENARIO_DIR / "demo.yaml"), seed=7, days=2)
    from_code = simulate(data_home(tmp_path / "code"), demo(), seed=7, days=2)
    assert from_yaml.counts == from_code.counts
    yaml_files, code_files = _hashes(tmp_path / "yaml"), _hashes(tmp_path / "code")
    assert yaml_files and yaml_files == code_files


def test_a_yaml_path_works(tmp_path):
    text = (SCENARIO_DIR / "demo.yaml").read_text().replace("name: demo", "name: my-demo")
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    scenario = get_scenario(str(path))
    assert scenario.name == "my-demo"
    assert scenario.clusters == demo().clusters
    result = simulate(data_home(tmp_path / "home"), str(path), seed=7, days=1)
    assert result.scenario == "my-demo" and result.counts["inventory"] == 64


def test_name_defaults_to_the_file_stem(tmp_path):
    text = (SCENARIO_DIR / "demo.yaml").read_text().replace("name: demo\n", "")
    path = tmp_path / "stem-name.yaml"
    path.write_text(text)
    assert get_scenario(path).name == "stem-name"


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("days: 14", "days: 14\ndayz: 3", "dayz"),
        ("n_nodes: 4, slurm", "n_nodes: 4, gpus: 8, slurm", "gpus"),
        ("  torch:", "  pytorch: x\n  torch:", "pytorch"),
        ("cause_component: nccl", "cause_component: nccl\n    severity: 2", "severity"),
    ],
)
def test_unknown_keys_are_rejected_by_name(tmp_path, old, new, key):
    text = (SCENARIO_DIR / "demo.yaml").read_text()
    assert old in text
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ValueError, match=repr(key)):
        get_scenario(str(path))


def test_bad_values_are_rejected(tmp_path):
    text = (SCENARIO_DIR / "demo.yaml").read_text()
    for old, new, message in [
        ("sku: H100-SXM", "sku: B200", "unknown SKU 'B200'"),
        ('cuda: "12.4"', "cuda: 12.4", "expected a string"),
        ("days: 14", "days: two weeks", "expected an integer"),
    ]:
        path = tmp_path / "bad.yaml"
        path.write_text(text.replace(old, new, 1))
        with pytest.raises(ValueError, match=message):
            get_scenario(str(path))


def test_unknown_name_and_missing_file():
    with pytest.raises(KeyError, match="fleet-1k"):  # the message lists the known names
        get_scenario("no-such-scenario")
    with pytest.raises(FileNotFoundError):
        get_scenario("no/such/file.yaml")


def test_fleet_1k_parses():
    fleet = get_scenario("fleet-1k")
    assert fleet.name == "fleet-1k" and fleet.days == 30
    assert sum(cluster.n_nodes * cluster.gpus_per_node for cluster in fleet.clusters) == 1024
    assert sum(cluster.n_nodes for cluster in fleet.clusters) == 128
    assert {cluster.sku.name for cluster in fleet.clusters} == {"A100-SXM4-80GB", "H100-SXM", "H200-SXM"}
    names = {cluster.name for cluster in fleet.clusters}
    assert fleet.faults.forced_cluster in names
    assert all(rollout.cluster in names for rollout in fleet.rollouts)
    for maintenance in fleet.maintenances:
        assert maintenance.node in fleet.cluster(maintenance.cluster).nodes
    assert len({cluster.slurm_id_base for cluster in fleet.clusters}) == len(fleet.clusters)


def test_incidents_and_fleet_1k_list_the_whole_catalogue():
    from perf_assets.lib.simulate.catalogue import Incidents

    kinds = set(Incidents.__dataclass_fields__)
    small = get_scenario("incidents")
    assert {name for name, _ in small.incidents.all()} == kinds  # one of each
    assert len(small.incidents.all()) == len(kinds)
    big = get_scenario("fleet-1k")
    counts = {name: sum(1 for kind, _ in big.incidents.all() if kind == name) for name in kinds}
    assert set(counts) == kinds and min(counts.values()) >= 1
    assert sum(count >= 2 for count in counts.values()) >= 10  # several magnitudes
    assert demo().incidents == Incidents() and demo().dcgm_fields == get_scenario("demo").dcgm_fields


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("stranded_nodes: 1}", "stranded_nodes: 1, nodes_lost: 2}", "'nodes_lost'"),
        ("node: h100-n04, gpus", "node: h100-n09, gpus", "'h100-n09' is not a node of h100"),
        ("rack: h200-r1", "rack: h200-r7", "unknown rack 'h200-r7'"),
        ("step_time_factor: 0.93", "step_time_factor: 1.05", "does not fit framework_upgrades"),
        ("save_time_factor: 6.0}", "save_time_factor: 6.0}\n  power_naps: []", "'power_naps'"),
        ("probes: [gemm, hbm_stream]", "probes: [gemm, nvbandwidth]", "unknown probe 'nvbandwidth'"),
        ("  - DCGM_FI_DEV_GPU_TEMP", "  - DCGM_FI_DEV_FAN_SPEED", "unknown field 'DCGM_FI_DEV_FAN_SPEED'"),
        ("incident_id: decoy-noise-h100,", "incident_id: inc-fragmentation-a100,", "incident_id used twice"),
    ],
)
def test_bad_incidents_are_rejected_by_name(tmp_path, old, new, message):
    text = (SCENARIO_DIR / "incidents.yaml").read_text()
    assert old in text
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ValueError, match=message):
        get_scenario(str(path))

"""Every dbt model, seed and column of the built warehouse is documented, and `dbt docs generate` works.

`dbt docs generate` runs on a copy of the demo warehouse (so the session's warehouse is never opened for
writing); its catalog.json lists the columns each model and seed really has, and manifest.json the
descriptions the yml files give them. Shared column definitions are doc blocks in
dbt_project/models/_docs.md, so a description that still holds an unresolved `{{ doc(...) }}` fails too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perf_assets.lib.paths import DBT_PROJECT_DIR, DataHome

DOCUMENTED_TYPES = ("model", "seed")


def undocumented_nodes(manifest: dict) -> list[str]:
    """Models and seeds without a description."""
    return sorted(
        node["name"]
        for node in manifest["nodes"].values()
        if node["resource_type"] in DOCUMENTED_TYPES and not node.get("description", "").strip()
    )


def undocumented_columns(manifest: dict, catalog: dict) -> list[str]:
    """`model.column` for every column the warehouse has whose manifest description is empty or absent."""
    missing = []
    for unique_id, node in manifest["nodes"].items():
        if node["resource_type"] not in DOCUMENTED_TYPES or unique_id not in catalog["nodes"]:
            continue
        described = {name.lower(): column.get("description", "") for name, column in node["columns"].items()}
        for column in catalog["nodes"][unique_id]["columns"]:
            if not described.get(column.lower(), "").strip():
                missing.append(f"{node['name']}.{column}")
    return sorted(missing)


def documented_but_absent(manifest: dict, catalog: dict) -> list[str]:
    """`model.column` entries of the yml files that name a column the built table does not have (a stale entry)."""
    stale = []
    for unique_id, node in manifest["nodes"].items():
        if node["resource_type"] not in DOCUMENTED_TYPES or unique_id not in catalog["nodes"]:
            continue
        built = {name.lower() for name in catalog["nodes"][unique_id]["columns"]}
        stale += [f"{node['name']}.{name}" for name in node["columns"] if name.lower() not in built]
    return sorted(stale)


def unrendered_descriptions(manifest: dict) -> list[str]:
    """Descriptions of nodes, sources and columns that still contain Jinja (a doc block that did not render)."""
    found = []
    for node in [*manifest["nodes"].values(), *manifest["sources"].values()]:
        texts = [(node["name"], node.get("description", ""))]
        texts += [(f"{node['name']}.{name}", column.get("description", "")) for name, column in node["columns"].items()]
        found += [name for name, text in texts if "{{" in text or "doc(" in text]
    return sorted(found)


@pytest.fixture(scope="module")
def docs_artifacts(demo_home: DataHome, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    """manifest.json and catalog.json of `dbt docs generate` on a copy of the demo warehouse and lake."""
    home = tmp_path_factory.mktemp("docs_home")
    shutil.copytree(demo_home.warehouse_dir, home / "warehouse", ignore=shutil.ignore_patterns("*.lock", "dbt_runs"))
    shutil.copytree(demo_home.root / "lake", home / "lake")
    target = home / "target"
    dbt = Path(sys.executable).parent / "dbt"
    command = [str(dbt) if dbt.exists() else "dbt", "docs", "generate", "--project-dir", str(DBT_PROJECT_DIR)]
    command += ["--profiles-dir", str(DBT_PROJECT_DIR), "--target-path", str(target), "--log-path", str(home / "logs")]
    result = subprocess.run(command, env={**os.environ, "PERFWH_HOME": str(home)}, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads((target / "manifest.json").read_text()), json.loads((target / "catalog.json").read_text())


def test_every_model_and_seed_is_built_and_described(docs_artifacts):
    manifest, catalog = docs_artifacts
    nodes = [node for node in manifest["nodes"].values() if node["resource_type"] in DOCUMENTED_TYPES]
    assert len(nodes) > 50  # the project's models and seeds, not an empty parse
    assert undocumented_nodes(manifest) == []
    not_in_catalog = sorted(node["name"] for node in nodes if node["unique_id"] not in catalog["nodes"])
    assert not_in_catalog == [], "not in the demo warehouse, so their columns cannot be checked"


def test_every_column_of_the_warehouse_is_described(docs_artifacts):
    manifest, catalog = docs_artifacts
    assert sum(len(node["columns"]) for node in catalog["nodes"].values()) > 1000
    missing = undocumented_columns(manifest, catalog)
    assert missing == [], f"{len(missing)} columns without a description in the yml files:\n" + "\n".join(missing)


def test_no_yml_entry_names_a_column_the_table_does_not_have(docs_artifacts):
    manifest, catalog = docs_artifacts
    assert documented_but_absent(manifest, catalog) == []


def test_doc_blocks_render(docs_artifacts):
    manifest, _ = docs_artifacts
    assert unrendered_descriptions(manifest) == []
    cluster = manifest["nodes"]["model.perf_warehouse.fct_cluster_day"]["columns"]["cluster"]["description"]
    assert cluster.startswith("Cluster name")  # the text of the col_cluster doc block in models/_docs.md
    assert "doc.perf_warehouse.col_cluster" in manifest["docs"]


def test_the_checks_name_what_is_missing():
    """The helpers find an empty description, a column absent from the yml, a stale entry and raw Jinja."""
    manifest = {
        "nodes": {
            "model.p.m": {
                "name": "m",
                "resource_type": "model",
                "unique_id": "model.p.m",
                "description": "",
                "columns": {
                    "a": {"description": "A."},
                    "b": {"description": " "},
                    "gone": {"description": "{{ doc('x') }}"},
                },
            },
            "test.p.t": {"name": "t", "resource_type": "test", "description": "", "columns": {}},
        },
        "sources": {},
    }
    catalog = {"nodes": {"model.p.m": {"columns": {"A": {}, "b": {}, "c": {}}}}}
    assert undocumented_nodes(manifest) == ["m"]
    assert undocumented_columns(manifest, catalog) == ["m.b", "m.c"]
    assert documented_but_absent(manifest, catalog) == ["m.gone"]
    assert unrendered_descriptions(manifest) == ["m.gone"]

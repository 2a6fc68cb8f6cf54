"""How dbt nodes become Dagster assets: keys are the model name, the group is the dbt layer."""

from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings


class WarehouseDbtTranslator(DagsterDbtTranslator):
    """Model and seed keys are their bare names (`fct_cluster_day`), the names users query;
    sources keep the key their `meta.dagster.asset_key` gives (the ingest assets)."""

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> dg.AssetKey:
        if dbt_resource_props["resource_type"] in ("model", "seed", "snapshot"):
            return dg.AssetKey(dbt_resource_props["name"])
        return super().get_asset_key(dbt_resource_props)


translator = WarehouseDbtTranslator(settings=DagsterDbtTranslatorSettings(enable_code_references=False))

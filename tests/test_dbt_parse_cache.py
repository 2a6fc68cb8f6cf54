"""dbt's parsed project kept per data home (perf_assets/lib/dbt_parse_cache.py). That dbt then skips its full parse
on a real build is asserted in tests/test_incremental_build.py (the split-day test)."""

from __future__ import annotations

from perf_assets.lib import dbt_parse_cache
from perf_assets.lib.paths import DataHome


def test_one_cached_parse_per_dbt_target_and_vars(tmp_path):
    home = DataHome(tmp_path / "home")
    day = ["--event-time-start", "2026-11-01", "--event-time-end", "2026-11-03"]
    month = [*day, "--vars", '{"microbatch_batch_size": "month"}', "--full-refresh"]
    selector = ["--selector", "day_local", *day]
    plain = dbt_parse_cache.cache_file(home, "duckdb", day)
    assert plain.parent == home.warehouse_dir / "dbt_partial_parse"
    assert dbt_parse_cache.cache_file(home, "duckdb", selector) == plain  # dbt's check ignores selection and dates
    assert dbt_parse_cache.cache_file(home, "duckdb", month) != plain  # --vars is part of dbt's check
    assert dbt_parse_cache.cache_file(home, "spark", day) != plain  # so is the profile's target


def test_the_parse_a_run_leaves_seeds_the_next_run_folder(tmp_path):
    home = DataHome(tmp_path / "home")
    cache = dbt_parse_cache.cache_file(home, "duckdb", [])
    first = dbt_parse_cache.run_folder(tmp_path / "target", "warehouse_dbt_models", "0e488755-a3a1")
    second = dbt_parse_cache.run_folder(tmp_path / "target", "warehouse_dbt_models", "0e488755-a3a1")
    assert first != second and first.name.startswith("warehouse_dbt_models-0e48875-")

    assert not dbt_parse_cache.seed(cache, first)  # nothing kept yet: dbt parses in full
    assert not dbt_parse_cache.keep(first, cache)  # dbt died before it wrote one: nothing kept
    first.mkdir(parents=True)
    (first / "partial_parse.msgpack").write_bytes(b"parsed by the first run")
    assert dbt_parse_cache.keep(first, cache) and cache.read_bytes() == b"parsed by the first run"
    assert dbt_parse_cache.seed(cache, second)
    assert (second / "partial_parse.msgpack").read_bytes() == b"parsed by the first run"
    assert [path.name for path in cache.parent.iterdir()] == [cache.name]  # no temporary file left
